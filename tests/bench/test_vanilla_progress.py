"""The vanilla jobs' progress reading (bench/peers/vanilla_job.py): every batch that ran, once."""

from __future__ import annotations

import sys
from pathlib import Path
from types import SimpleNamespace

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "bench" / "peers"))

from vanilla_job import new_progress  # noqa: E402


def _ran(batch: int, rows: int) -> dict:
    return {"batchId": batch, "numInputRows": rows,
            "durationMs": {"addBatch": 5, "latestOffset": 1, "triggerExecution": 9}}


def _idle(batch: int) -> dict:  # Spark's report of a trigger that found no data: the next batch's id
    return {"batchId": batch, "numInputRows": 0, "durationMs": {"latestOffset": 1, "triggerExecution": 1}}


def test_a_batch_that_runs_after_an_idle_trigger_of_its_id_is_reported():
    query, seen = SimpleNamespace(recentProgress=[_ran(9, 2000), _idle(10)]), set()
    assert [p["batchId"] for p in new_progress(query, seen)] == [9]
    query.recentProgress += [_ran(10, 511), _idle(11)]
    got = list(new_progress(query, seen))
    assert [(p["batchId"], p["numInputRows"]) for p in got] == [(10, 511)]
    assert list(new_progress(query, seen)) == []  # each batch once
