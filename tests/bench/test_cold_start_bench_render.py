"""bench/cold_start_bench.py's table: medians per phase and variant, between its markers."""

from __future__ import annotations

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "bench"))

import cold_start_bench as bench  # noqa: E402

from harness.runtime_job import WindowedJob  # noqa: E402


def test_the_table_has_a_median_per_phase_and_variant() -> None:
    results = [{"variant": v, "phases": {"session": s, "restored": 1.0}, "restore_seconds": 0.5}
               for v, s in (("serial", 10.0), ("serial", 12.0), ("serial", 30.0), ("overlap", 8.0))]
    text = bench.render(results, WindowedJob(keys=10), 64, "load average 1.0")
    assert text.startswith(bench.START) and text.endswith(bench.END)
    assert "| session | 12.00 (10.00-30.00) | 8.00 (8.00-8.00) |" in text
    assert "| query | n/a | n/a |" in text and "serial (median of 3)" in text
