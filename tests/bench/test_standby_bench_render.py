"""bench/standby_bench.py's section: both variants' kill -> first batch, the top-up and the standby's cost."""

from __future__ import annotations

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "bench"))

import standby_bench as bench  # noqa: E402

from harness.runtime_job import WindowedJob  # noqa: E402


def result(standby_s: float, cold_s: float) -> dict:
    phases = {"promoted": 60.0, "fence": 60.1, "restored": 60.3, "built": 61.0, "query": 62.0,
              "firstBatchPlanned": 62.5, "firstBatchCommitted": 70.0}
    return {"standby_s": standby_s, "standby_first_batch": {"addBatch": 6.0, "queryPlanning": 1.0}, "cold_s": cold_s, "load_b": 5.0, "load_a": 6.5, "standby_phases": phases,
            "cold_phases": {"api": 2.0, "restored": 3.0, "firstBatchCommitted": 50.0},
            "topup": {"reusedFiles": 40, "downloadedFiles": 3},
            "cost": {"standby_rss_mib": 700.0, "active_rss_mib": 900.0, "follow_seconds": 30.0,
                     "lists_per_hour": 1800.0, "gets_per_hour": 900.0, "fetched_mib_per_hour": 50.0, "behind": 0}}


def test_a_warmed_up_standby_is_said_so() -> None:
    warm = [result(10.0, 50.0) | {"warmup": {"state": "warm", "seconds": 41.2}}]
    assert "(`--standby-warmup`): warm in 41.2 s." in bench.render(warm, WindowedJob(keys=10), 64, 2**20)
    assert "--standby-warmup" not in bench.render([result(10.0, 50.0)], WindowedJob(keys=10), 64, 2**20)


def test_the_section_has_both_variants_the_top_up_and_the_cost() -> None:
    text = bench.render([result(10.0, 50.0), result(12.0, 40.0), result(20.0, 45.0)], WindowedJob(keys=10), 64,
                        3 * 2**20)
    assert text.startswith(bench.START) and text.endswith(bench.END)
    assert "| (a) cold `sparkpoint run` started at the kill (new work dir) | 45.0 (40.0-50.0) |" in text
    assert "| (b) standby promoted at the kill | 12.0 (10.0-20.0) |" in text
    assert "firstBatchCommitted 10.00" in text and "built 1.00" in text and "firstBatchPlanned 2.50" in text
    assert "durationMs in s: addBatch 6.00, queryPlanning 1.00" in text and "downloaded 3" in text and "5.0-6.5" in text
    assert "RSS 700.0 (700.0-700.0) MiB" in text and "1800.0 (1800.0-1800.0) LIST" in text
