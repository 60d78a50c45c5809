"""bench/upsert_snapshot_bench.py's table: each batch count's bytes and objects with and without
snapshots, their ratio, and the time the snapshots and GC passes took, inside the section markers."""

from __future__ import annotations

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "bench"))

import upsert_snapshot_bench as bench  # noqa: E402


def test_a_row_per_batch_count_with_the_ratio_of_the_bytes():
    rows = [{"batches": 200, "without": (4 * bench.MIB, 401), "with": (bench.MIB, 43), "seconds": 3.04},
            {"batches": 500, "without": (10 * bench.MIB, 1001), "with": (bench.MIB // 2, 43), "seconds": 8.7}]
    text = bench.render(rows, keys=1000, every=10, loads=[1.0, 2.0])
    assert text.startswith(bench.START) and text.endswith(bench.END)
    table = [line for line in text.splitlines() if line.startswith("| 200") or line.startswith("| 500")]
    assert table == ["| 200 | 4.00 MiB in 401 objects | 1.00 MiB in 43 objects | 0.250 | 3.0 s (20 of each) |",
                     "| 500 | 10.00 MiB in 1,001 objects | 0.50 MiB in 43 objects | 0.050 | 8.7 s (50 of each) |"]
    assert "load average 1.0 -> 2.0" in text
