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


def spark_run(partitions: int, restore: float, rescale_from: int | None, seconds: float | None, first: float) -> dict:
    return {"partitions": partitions, "restore_seconds": restore, "first_input_batch_seconds": first,
            "rescale": rescale_from and {"from": rescale_from, "to": partitions, "seconds": seconds}}


def test_the_summary_pairs_each_spark_rescale_with_flinks_step_at_the_same_count():
    r = {"keys": 1024 * 1024 // (1024 + 64) * 100,  # ~100 MiB of rows
         "runs": [spark_run(4, 0, None, None, 5), spark_run(2, 1.0, 4, 11.0, 30.5), spark_run(6, 2.0, 2, 4.0, 20.0),
                  spark_run(6, 1.0, None, None, 15.0)],
         "flink": [flink_run("p4", 1.5, 20.0, 10), flink_run("p2", 2.5, 31.0, 12), flink_run("p6", 3.5, 42.0, None)]}
    rows = rescale_bench.summary([r, {**r, "flink": None}])[2:]
    assert rows == ["| ~100 MiB | 4 -> 2 | 12.0 s | 11.0 s | 1.1x | 30.5 s | 31.0 s |",
                    "| ~100 MiB | 2 -> 6 | 6.0 s | 11.0 s | 0.5x | 20.0 s | 42.0 s |",
                    "| ~100 MiB | 4 -> 2 | 12.0 s | - | - | 30.5 s | - |",
                    "| ~100 MiB | 2 -> 6 | 6.0 s | - | - | 20.0 s | - |"]
