"""The StreamingJobSavepoint decision, row by row: (observations) -> (action, state, reason)."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest

from sparkpoint.operator.savepoint import decide as sp
from sparkpoint.operator.savepoint.model import SavepointStatus, StorageRef

T0 = datetime(2026, 1, 1, tzinfo=UTC)
RUNNING = sp.JobView(phase="Running", pod="job-1", pod_ip="10.0.0.5", checkpoint_timeout=60.0)
STORED = sp.Stored(checkpoint="chk-000004", size_bytes=1234, completed_at="2026-01-01T00:00:05+00:00")


def status(state="Pending", **kw) -> SavepointStatus:
    return SavepointStatus(state=state, **kw)


def following(**kw) -> SavepointStatus:
    base = {"request_id": "req-000001", "pod": "job-1", "triggered_at": T0.isoformat(), "triggers": 1}
    return status("InProgress", **(base | kw))


def obs(*, at=10.0, st=None, job=RUNNING, stored=None, store_error=None, runtime=None) -> sp.Observed:
    return sp.Observed(now=T0 + timedelta(seconds=at), created=T0, status=st or status(), job=job,
                       stored=stored, store_error=store_error, runtime=runtime)


ROWS = [
    # --- terminal states are left alone
    ("completed stays", obs(st=status("Completed"), stored=STORED), sp.NONE, "Completed", "Done"),
    ("failed stays", obs(st=status("Failed"), job=None), sp.NONE, "Failed", "Done"),
    # --- the store is the truth: a manifest means Completed, with or without a trigger of ours
    ("stored before any trigger (restart)", obs(stored=STORED), sp.RECORD, "Completed", "SavepointCompleted"),
    ("stored while following", obs(st=following(), stored=STORED, runtime=sp.RuntimeAnswer("uploading")),
     sp.RECORD, "Completed", "SavepointCompleted"),
    ("stored though the job is gone", obs(st=following(), job=None, stored=STORED),
     sp.RECORD, "Completed", "SavepointCompleted"),
    # --- waiting for the job
    ("job missing, young", obs(at=5, job=None), sp.WAIT, "Pending", "JobNotFound"),
    ("job missing, past grace", obs(at=31, job=None), sp.FAIL, "Failed", "JobNotFound"),
    ("job pending", obs(job=sp.JobView("Pending", None, None, 60.0)), sp.WAIT, "Pending", "JobNotRunning"),
    ("job recovering", obs(job=sp.JobView("Recovering", "job-2", None, 60.0)), sp.WAIT, "Pending",
     "JobNotRunning"),
    ("job running without pod ip", obs(job=sp.JobView("Running", "job-1", None, 60.0)), sp.WAIT, "Pending",
     "JobNotRunning"),
    ("job suspended too long", obs(at=601, job=sp.JobView("Suspended", None, None, 60.0)), sp.FAIL, "Failed",
     "JobNotRunning"),
    ("store unreadable", obs(store_error="secret creds not found"), sp.WAIT, "Pending", "StoreUnavailable"),
    ("store unreadable too long", obs(at=601, store_error="denied"), sp.FAIL, "Failed", "StoreUnavailable"),
    # --- trigger
    ("job running", obs(), sp.TRIGGER, "InProgress", "Triggered"),
    # --- follow the request
    ("queued", obs(st=following(), runtime=sp.RuntimeAnswer("queued")), sp.WAIT, "InProgress", "InProgress"),
    ("uploading", obs(st=following(), runtime=sp.RuntimeAnswer("uploading")), sp.WAIT, "InProgress",
     "InProgress"),
    ("runtime unreachable", obs(st=following(), runtime=sp.RuntimeAnswer("unreachable")), sp.WAIT,
     "InProgress", "InProgress"),
    ("completed, manifest not seen yet", obs(st=following(), runtime=sp.RuntimeAnswer("completed")), sp.WAIT,
     "InProgress", "InProgress"),
    ("runtime failed", obs(st=following(), runtime=sp.RuntimeAnswer("failed", "upload: denied")), sp.FAIL,
     "Failed", "RuntimeFailed"),
    ("runtime timed out", obs(st=following(), runtime=sp.RuntimeAnswer("timed_out")), sp.FAIL, "Failed",
     "RuntimeFailed"),
    ("skipped: nothing new", obs(st=following(), runtime=sp.RuntimeAnswer(
        "skipped", "batch 7 is already checkpointed")), sp.COPY_LATEST, "InProgress", "CopyLatest"),
    ("skipped: no batch yet", obs(st=following(), runtime=sp.RuntimeAnswer("skipped", "no batch committed yet")),
     sp.TRIGGER, "InProgress", "Retriggered"),
    ("skipped: no batch yet, many times", obs(st=following(triggers=3), runtime=sp.RuntimeAnswer(
        "skipped", "no batch committed yet")), sp.TRIGGER, "InProgress", "Retriggered"),
    ("too slow", obs(at=121, st=following(), runtime=sp.RuntimeAnswer("uploading")), sp.FAIL, "Failed",
     "Timeout"),
    ("store unreadable while following", obs(st=following(), store_error="unreachable"), sp.WAIT, "InProgress",
     "StoreUnavailable"),
    # --- the request's pod is gone: a new attempt does not know it
    ("runtime forgot (404)", obs(st=following(), runtime=sp.RuntimeAnswer("lost")), sp.TRIGGER, "InProgress",
     "Retriggered"),
    ("pod replaced", obs(st=following(pod="job-0")), sp.TRIGGER, "InProgress", "Retriggered"),
    ("pod replaced, new one not running", obs(st=following(pod="job-0"), job=sp.JobView(
        "Recovering", "job-1", None, 60.0)), sp.WAIT, "InProgress", "JobNotRunning"),
    ("job deleted while following", obs(st=following(), job=None), sp.FAIL, "Failed", "JobNotFound"),
    ("lost too often", obs(st=following(pod="job-0", triggers=3)), sp.FAIL, "Failed", "TooManyAttempts"),
]


@pytest.mark.parametrize(("name", "observed", "action", "state", "reason"), ROWS, ids=[r[0] for r in ROWS])
def test_decide(name, observed, action, state, reason) -> None:
    got = sp.decide(observed)
    assert (got.action, got.state, got.reason) == (action, state, reason), got
    if got.action == sp.FAIL:
        assert got.message, "a failure must say why"
    if got.action == sp.WAIT:
        assert got.delay > 0


def test_a_skip_for_want_of_a_batch_is_retried_later_and_not_counted() -> None:
    got = sp.decide(obs(st=following(), runtime=sp.RuntimeAnswer("skipped", "no batch committed yet")))
    assert got.delay >= sp.RETRY_LONG and got.extra["counted"] is False
    lost = sp.decide(obs(st=following(), runtime=sp.RuntimeAnswer("lost")))
    assert lost.extra["counted"] is True


def test_failure_message_carries_the_runtime_error() -> None:
    got = sp.decide(obs(st=following(), runtime=sp.RuntimeAnswer("failed", "upload: AccessDenied")))
    assert "AccessDenied" in got.message


STORE = StorageRef(url="s3://b/p", secret_name="creds")
DELETE_ROWS = [
    ("retained", status("Completed", storage=STORE), True, 0, "keep"),
    ("never reached the store", status("Failed"), False, 0, "keep"),
    ("completed, not retained", status("Completed", storage=STORE), False, 0, "delete"),
    ("failed after trigger", status("Failed", storage=STORE), False, 0, "delete"),
    ("in flight", following(storage=STORE), False, 30, "wait"),
    ("in flight past its timeout", following(storage=STORE), False, 121, "delete"),
    ("in flight but retained", following(storage=STORE), True, 30, "keep"),
    ("adopted: it existed before this resource", status("Completed", storage=STORE, adopted=True), False, 0, "keep"),
]


@pytest.mark.parametrize(("name", "st", "retain", "at", "verdict"), DELETE_ROWS, ids=[r[0] for r in DELETE_ROWS])
def test_decide_delete(name, st, retain, at, verdict) -> None:
    assert sp.decide_delete(st, retain, T0 + timedelta(seconds=at), 60.0) == verdict


def test_a_savepoint_a_job_still_names_is_kept() -> None:
    st = status("Completed", storage=STORE)
    assert sp.decide_delete(st, False, T0, 60.0, in_use=True) == "keep"
    job_spec = {"restoreFrom": {"savepoint": "from-spec"}}
    job_status = {"tracking": {"lineage": {"point": {"savepoint": "lineage-sp"}}, "restoreTarget": "drain-sp",
                               "nextPoint": {"savepoint": "next-sp"}, "rollbackPoint": {"savepoint": "rb-sp"},
                               "upgrade": {"rollbackPoint": {"savepoint": "up-sp"}}}}
    assert sp.savepoints_named(job_spec, job_status) == {"from-spec", "lineage-sp", "drain-sp", "next-sp", "rb-sp",
                                                          "up-sp"}
    assert sp.savepoints_named(None, None) == set()


def test_a_savepoint_found_in_the_store_before_any_trigger_is_adopted() -> None:
    stored = sp.Stored(checkpoint="chk-000001", size_bytes=1, completed_at="2026-01-01T00:00:00Z")
    got = sp.decide(obs(st=status(), stored=stored))
    assert got.action == sp.RECORD and got.extra["adopted"] is True
    ours = sp.decide(obs(st=following(), stored=stored))
    assert ours.action == sp.RECORD and ours.extra["adopted"] is False
