"""Spark's progress JSON -> the runtime's batch numbers (runtime/spark/query.py)."""

from sparkpoint.runtime.spark.query import progress_from_json


def test_progress_keeps_each_phase_in_seconds_and_the_whole_batch_apart():
    p = progress_from_json({"batchId": 7, "numInputRows": 20, "durationMs": {
        "triggerExecution": 1500, "addBatch": 1200, "walCommit": 40, "commitOffsets": 35, "latestOffset": 0},
        "stateOperators": [{"numRowsTotal": 3}, {"numRowsTotal": 4}]})
    assert (p.batch_id, p.duration_seconds, p.input_rows, p.state_rows) == (7, 1.5, 20, 7)
    assert p.phases == {"addBatch": 1.2, "commitOffsets": 0.035, "latestOffset": 0.0, "walCommit": 0.04}


def test_progress_without_durations_is_zero_and_has_no_phases():
    p = progress_from_json({"batchId": 0})
    assert (p.duration_seconds, p.phases, p.state_rows) == (0.0, {}, 0)
