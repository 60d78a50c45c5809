"""bench/promoted_batch_bench.py's reading of a promoted first batch: the changelogs its restore replays
(harness.runtime_job.state_replays) and the batch's stages and state metrics from Spark's event log."""

from __future__ import annotations

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "bench"))

import promoted_batch_bench as bench  # noqa: E402

from harness.runtime_job import state_replays  # noqa: E402


def test_a_restore_replays_the_changelogs_after_each_partitions_newest_snapshot_at_or_below_it() -> None:
    paths = [f"state/0/0/{v}.changelog" for v in range(1, 26)] + ["state/0/0/10.zip", "state/0/0/20.zip",
             "state/0/0/30.zip", "state/0/0/_metadata/schema", "state/0/1/3.changelog", "offsets/24", "commits/24"]
    assert state_replays(paths, 25) == {0: 5, 1: 25}  # 30.zip is newer than the version restored
    assert state_replays(["offsets/3"], 4) == {}


def _task(stage: int, run_ms: int, cpu_ns: int) -> dict:  # type: ignore[type-arg]
    return {"Event": "SparkListenerTaskEnd", "Stage ID": stage,
            "Task Metrics": {"Executor Run Time": run_ms, "Executor CPU Time": cpu_ns}}


def test_a_batch_is_its_progress_and_the_stages_of_its_jobs_only() -> None:
    progress = {"batchId": 26, "durationMs": {"addBatch": 9000, "triggerExecution": 9500},
                "stateOperators": [{"numRowsTotal": 50000, "allUpdatesTimeMs": 1500, "allRemovalsTimeMs": 700,
                                    "commitTimeMs": 650, "customMetrics": {"rocksdbLoadLatencyMs": 300,
                                                                           "rocksdbGetCount": 5}}]}
    events = [
        {"Event": "org.apache.spark.sql.streaming.StreamingQueryListener$QueryProgressEvent", "progress": progress},
        {"Event": "SparkListenerJobStart", "Stage IDs": [4, 5], "Properties": {"streaming.sql.batchId": "26"}},
        {"Event": "SparkListenerJobStart", "Stage IDs": [6], "Properties": {"streaming.sql.batchId": "27"}},
        *({"Event": "SparkListenerStageCompleted", "Stage Info": {"Stage ID": s, "Number of Tasks": n,
                                                                   "Submission Time": 1000, "Completion Time": 1000 + w}}
          for s, n, w in ((4, 2, 600), (5, 4, 7900), (6, 4, 3000))),
        _task(4, 500, 90_000_000), _task(5, 4000, 1_000_000_000), _task(5, 3000, 800_000_000), _task(6, 100, 1),
    ]
    got = bench.batch_breakdown(events, 26)
    assert got["durationMs"] == progress["durationMs"]
    assert got["state"] == [{"numRowsTotal": 50000, "allUpdatesTimeMs": 1500, "allRemovalsTimeMs": 700,
                             "commitTimeMs": 650, "rocksdbLoadLatencyMs": 300}]
    assert got["stages"] == [{"tasks": 2, "wall_s": 0.6, "run_s": 0.5, "cpu_s": 0.09},
                             {"tasks": 4, "wall_s": 7.9, "run_s": 7.0, "cpu_s": 1.8}]
