"""hotdir.record_failed_start: one record per restore point, the latest error of each kept."""

from sparkpoint.runtime.service import hotdir
from sparkpoint.runtime.service.recovery import RestorePoint
from sparkpoint.runtime.store import JobRef


def test_a_failed_start_replaces_the_earlier_record_of_the_same_point_and_keeps_the_others(tmp_path):
    hotdir.claim(tmp_path, JobRef("ns", "job"), "file:///s", attempt=3, checkpoint="chk-1")
    hotdir.record_failed_start(tmp_path, None, batch=7, attempt=3, error="local died")
    hotdir.record_failed_start(tmp_path, RestorePoint("checkpoint", "chk-1"), batch=5, attempt=3, error="first")
    hotdir.record_failed_start(tmp_path, RestorePoint("checkpoint", "chk-1"), batch=5, attempt=4, error="again")
    assert hotdir.owner_of(tmp_path)["failedStarts"] == [
        {"source": "local", "batch": 7, "attempt": 3, "error": "local died"},
        {"source": "checkpoint", "id": "chk-1", "batch": 5, "attempt": 4, "error": "again"}]


def test_a_long_error_keeps_both_ends(tmp_path):
    hotdir.claim(tmp_path, JobRef("ns", "job"), "file:///s", attempt=1, checkpoint=None)
    hotdir.record_failed_start(tmp_path, None, batch=None, attempt=1, error="A" * 300 + "B" * 500)
    error = hotdir.owner_of(tmp_path)["failedStarts"][0]["error"]
    assert error == "A" * 200 + " ... " + "B" * 400
