"""bench/rescale_bench.py's Flink rows: each restore step names the stop-with-savepoint before it, the
time to every task RUNNING and the first checkpoint at the new parallelism; a Flink that could not
run is said so, not left out silently."""

from __future__ import annotations

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "bench"))

import rescale_bench  # noqa: E402

MIB = 1024 * 1024


def flink_run(tag: str, savepoint_s: float, running: float | None, first_mib: int | None) -> dict:
    return {"tag": tag, "savepoint": {"path": f"s3://b/{tag}", "seconds": savepoint_s},
            "process_to_running_seconds": running, "tasks_running_seconds": running and running - 9,
            "submitted_seconds": running and running - 20,
            "first_checkpoint": first_mib and {"fullSize": first_mib * MIB, "durationMs": 2500}}


def test_each_restore_row_pairs_the_stop_before_it_with_the_restore():
    r = {"keys": 1000, "load": [3.0, 4.5], "flink": [flink_run("p4", 1.5, 20.0, 10), flink_run("p2", 2.5, 31.0, 12),
                                                      flink_run("p6", 3.5, 42.0, None)]}
    lines = rescale_bench.render_flink(r)
    rows = [line for line in lines if line.startswith("| parallelism")]
    assert rows == ["| parallelism 4 -> 2 | 1.50 s | 31.0 s (from the job's submission: 11.0 s) | 12, 2.50 |",
                    "| parallelism 2 -> 6 | 2.50 s | 42.0 s (from the job's submission: 11.0 s) | - |"]
    assert "load average 3.0" in lines[1] and "4.5" in lines[1]


def test_a_flink_that_did_not_run_is_named():
    assert rescale_bench.render_flink({"flink_skipped": "scripts/ensure-flink.sh failed: x"}) == [
        "", "Flink: not run (scripts/ensure-flink.sh failed: x)."]
    assert rescale_bench.render_flink({"keys": 1}) == []  # not asked for
