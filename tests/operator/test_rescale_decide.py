"""Rescaling state as the operator decides it (issue 26; operator/decisions/rescale.py): a shufflePartitions
edit is an upgrade, the runtime's repartition lands in status.lastRescale with one Rescaled event,
and a repartition Spark refused (exit 4) rolls the upgrade back at once to the old partition count
and the upgrade's restore point; outside an upgrade it fails the job at once (RescaleFailed) until
the spec is edited."""

from __future__ import annotations

from test_machine import RUNTIME, T0, make_spec, observe, pod, running

from sparkpoint.operator.decisions.machine import decide, spec_key
from sparkpoint.operator.decisions.model import CreateAttempt, DeletePod, Emit, RescaleFailure, StopRuntime
from sparkpoint.operator.decisions.rescale import rescale_failure_text
from sparkpoint.operator.decisions.status_model import parse_status
from sparkpoint.operator.decisions.step import running_spec, stable_doc


def _spec(partitions: int):
    return make_spec(spark={"shufflePartitions": partitions}, upgradeMode="savepoint")


def _upgraded_attempt():
    """Running at 4 partitions, the CR edited to 2: drained with a savepoint, attempt 2 created."""
    old, new = _spec(4), _spec(2)
    assert spec_key(old) != spec_key(new)  # shufflePartitions needs a new pod: an upgrade
    st = running(stableSpec=spec_key(old), stableSpecDoc=stable_doc(old))
    d = decide(observe(st, [pod()], runtime=RUNTIME, spec=new, generation=2))
    assert d.status["phase"] == "Upgrading" and [a.savepoint for a in d.of(StopRuntime)] == ["upgrade-2"]
    d = decide(observe(d.status, [], spec=new, generation=2, now=T0 + 10, store_savepoints=[{"name": "upgrade-2"}]))
    (create,) = d.of(CreateAttempt)
    assert create.attempt == 2 and create.restore_from.savepoint == "upgrade-2" and create.spec is None
    return d, new


def test_the_runtimes_rescale_is_recorded_once_per_attempt() -> None:
    d, new = _upgraded_attempt()
    rt = RUNTIME | {"rescale": {"from": 4, "to": 2, "seconds": 1.452, "batch": 9}}
    d = decide(observe(d.status, [pod(2)], runtime=rt, spec=new, generation=2, now=T0 + 40))
    assert d.status["phase"] == "Running"
    assert d.status["lastRescale"] == {"from": 4, "to": 2, "durationSeconds": 1.452, "attempt": 2, "batch": 9,
                                       "at": "2027-01-15T08:00:40Z"}
    (event,) = [a for a in d.of(Emit) if a.reason == "Rescaled"]
    assert event.type == "Normal"
    assert event.message == "attempt 2 repartitioned the state from 4 to 2 partitions in 1.452s"
    d = decide(observe(d.status, [pod(2)], runtime=rt, spec=new, generation=2, now=T0 + 41))
    assert not [a for a in d.of(Emit) if a.reason == "Rescaled"]
    assert d.status["lastRescale"]["at"] == "2027-01-15T08:00:40Z"


def test_an_attempt_without_a_rescale_keeps_the_last_one() -> None:
    last = {"from": 4, "to": 2, "durationSeconds": 1.0, "attempt": 1}
    d = decide(observe(running() | {"lastRescale": last}, [pod()], runtime=RUNTIME | {"rescale": None}))
    assert d.status["lastRescale"] == last and not [a for a in d.of(Emit) if a.reason == "Rescaled"]


def test_a_refused_rescale_rolls_the_upgrade_back_at_once() -> None:
    d, new = _upgraded_attempt()
    # The new attempt's runtime exits 4 once (the kubelet restarts it in place): no crash loop first.
    d = decide(observe(d.status, [pod(2, ready=False, restart_count=1, last_exit_code=4)], spec=new, generation=2,
                       now=T0 + 30))
    assert d.status["phase"] == "Upgrading"
    assert [a.name for a in d.of(DeletePod)] == ["job-2"]
    reasons = [a.reason for a in d.of(Emit)]
    assert "UpgradeRolledBack" in reasons and "RescaleFailed" in reasons
    assert d.status["lastFailure"]["reason"] == "RescaleFailed"
    assert "to 2 partitions" in d.status["lastFailure"]["message"]
    assert "(4 partitions)" in d.status["lastFailure"]["message"]
    # Attempt 3 runs the stable spec (4 partitions) from the upgrade's savepoint.
    d = decide(observe(d.status, [], spec=new, generation=2, now=T0 + 60, store_savepoints=[{"name": "upgrade-2"}]))
    (create,) = d.of(CreateAttempt)
    assert create.attempt == 3 and create.spec.spark.shuffle_partitions == 4
    assert create.restore_from.savepoint == "upgrade-2"


def _first_attempt_pending(partitions: int):
    """A new job at `partitions` restoring a savepoint whose state has another partition count: attempt
    1 is Pending, with no stable spec (so no upgrade on trial to roll back)."""
    spec = make_spec(spark={"shufflePartitions": partitions}, restoreFrom={"savepoint": "sp-1"})
    d = decide(observe({}, [], spec=spec))
    (create,) = d.of(CreateAttempt)
    assert create.attempt == 1 and d.status["phase"] == "Pending" and "stableSpecDoc" not in d.status["tracking"]
    return d.status, spec


def _failed_by_rescale():
    status, spec = _first_attempt_pending(2)
    # The kubelet restarted the runtime in place once after exit 4: with 3 restarts of budget left the job
    # still fails now (Spark refuses the same repartition again), not after crash-looping through maxRestarts.
    refused = pod(ready=False, restart_count=1, last_exit_code=4,
                  rescale_failure=RescaleFailure(source=4, target=2, reason="invalid-checkpoint"))
    d = decide(observe(status, [refused], spec=spec, now=T0 + 30))
    assert d.status["phase"] == "Failed" and d.status["restarts"] == 1
    failure = d.status["lastFailure"]
    assert failure["reason"] == "RescaleFailed"
    assert "could not repartition the state from 4 to 2 partitions (invalid-checkpoint)" in failure["message"]
    assert [a.name for a in d.of(DeletePod)] == ["job-1"] and not d.of(CreateAttempt)
    (event,) = [a for a in d.of(Emit) if a.reason == "RescaleFailed"]
    assert event.type == "Warning" and "from 4 to 2 partitions" in event.message
    assert "LocalRecovery" not in [a.reason for a in d.of(Emit)]  # never counted as a local recovery
    assert "localRecoveries" not in d.status or d.status["localRecoveries"] == 0
    # It stays Failed, whatever the clock says, until the spec is edited.
    d = decide(observe(d.status, [], spec=spec, now=T0 + 3600))
    assert d.status["phase"] == "Failed" and not d.of(CreateAttempt)
    return d.status


def test_exit_4_outside_an_upgrade_fails_the_job_at_once_naming_the_partitions() -> None:
    _failed_by_rescale()


def test_a_spec_edit_after_a_failed_rescale_starts_a_new_attempt() -> None:
    failed = _failed_by_rescale()
    fixed = make_spec(spark={"shufflePartitions": 4}, restoreFrom={"savepoint": "sp-1"})  # the state's count
    d = decide(observe(failed, [], spec=fixed, generation=2, now=T0 + 3700))
    assert d.status["phase"] == "Pending" and "SpecChanged" in [a.reason for a in d.of(Emit)]
    (create,) = d.of(CreateAttempt)
    assert create.attempt == 2 and create.restore_from.savepoint == "sp-1"
    # The new attempt runs: the old failure no longer holds the job.
    d = decide(observe(d.status, [pod(2)], runtime=RUNTIME, spec=fixed, generation=2, now=T0 + 3760))
    assert d.status["phase"] == "Running"


def test_exit_4_without_a_termination_message_names_the_specs_partitions() -> None:
    # restart.policy Never: the pod itself ends Failed with exit 4, and no message was written.
    d = decide(observe(running(), [pod(phase="Failed", ready=False, exit_code=4)], runtime=RUNTIME))
    assert d.status["phase"] == "Failed" and d.status["lastFailure"]["reason"] == "RescaleFailed"
    assert "could not repartition the state to 4 partitions (exit 4" in d.status["lastFailure"]["message"]


def test_a_rolled_back_upgrade_names_what_spark_refused() -> None:
    d, new = _upgraded_attempt()
    refused = pod(2, ready=False, phase="Failed", exit_code=4,
                  rescale_failure=RescaleFailure(source=4, target=2, reason="spark"))
    d = decide(observe(d.status, [refused], spec=new, generation=2, now=T0 + 30))
    assert d.status["phase"] == "Upgrading" and d.status["lastFailure"]["reason"] == "RescaleFailed"
    assert "from 4 to 2 partitions (spark)" in d.status["lastFailure"]["message"]
    assert "(4 partitions)" in d.status["lastFailure"]["message"]


def test_failure_text_as_far_as_the_message_says() -> None:
    assert rescale_failure_text(RescaleFailure(6, 3, "invalid-checkpoint"), 3) == \
        "from 6 to 3 partitions (invalid-checkpoint)"
    assert rescale_failure_text(RescaleFailure(target=3), 5) == "to 3 partitions"
    assert rescale_failure_text(None, 5) == "to 5 partitions"


def _hdfs(partitions: int, **over):
    return make_spec(spark={"stateStore": "hdfs", "shufflePartitions": partitions}, **over)


def test_a_partition_change_under_hdfs_is_refused_before_any_attempt_and_the_job_keeps_running() -> None:
    old, new = _hdfs(4), _hdfs(8)
    st = running(stableSpec=spec_key(old), stableSpecDoc=stable_doc(old))
    d = decide(observe(st, [pod()], runtime=RUNTIME, spec=new, generation=2))
    assert d.status["phase"] == "Running" and not d.of(StopRuntime) and not d.of(DeletePod)
    failure = d.status["lastFailure"]
    assert failure["reason"] == "SpecChangeRefused"
    assert "spec.spark.shufflePartitions cannot change while spec.spark.stateStore is hdfs" in failure["message"]
    (event,) = [a for a in d.of(Emit) if a.reason == "SpecChangeRefused"]
    assert event.type == "Warning" and event.message == failure["message"]
    # Said once: the next rounds keep running the stable spec quietly, no crash loop, no upgrade.
    d = decide(observe(d.status, [pod()], runtime=RUNTIME, spec=new, generation=2, now=T0 + 30))
    assert d.status["phase"] == "Running" and not d.of(StopRuntime)
    assert not [a for a in d.of(Emit) if a.reason in ("SpecChangeRefused", "UpgradeRejected")]
    # An edit that also starts without state is an upgrade again.
    fresh = _hdfs(8, restoreFrom={"fresh": "rescale-8"})
    d = decide(observe(d.status, [pod()], runtime=RUNTIME, spec=fresh, generation=3, now=T0 + 60))
    assert d.status["phase"] == "Upgrading"


def test_a_state_store_change_of_a_job_that_ran_is_refused_too() -> None:
    old, new = make_spec(spark={"stateStore": "rocksdb"}), make_spec(spark={"stateStore": "hdfs"})
    st = running(stableSpec=spec_key(old), stableSpecDoc=stable_doc(old))
    d = decide(observe(st, [pod()], runtime=RUNTIME, spec=new, generation=2))
    assert d.status["phase"] == "Running" and d.status["lastFailure"]["reason"] == "SpecChangeRefused"
    assert "spec.spark.stateStore cannot change" in d.status["lastFailure"]["message"]


def test_a_refused_repartition_under_hdfs_says_how_out_without_an_edit_the_crd_refuses() -> None:
    new = _hdfs(4)  # a new job at 4 partitions that resumed an earlier job's checkpoints at 2
    st = {"phase": "Pending", "attempt": 1, "pod": "job-1", "tracking": {"attemptSpec": spec_key(new)}}
    failed = pod(1, ready=False, restart_count=1, last_exit_code=4,
                 rescale_failure=RescaleFailure(source=2, target=4, reason="invalid-checkpoint"))
    d = decide(observe(st, [failed], spec=new))
    assert d.status["phase"] == "Failed" and d.status["lastFailure"]["reason"] == "RescaleFailed"
    message = d.status["lastFailure"]["message"]
    assert "from 2 to 4 partitions" in message and "create the job again" in message
    assert "edit the spec" not in message


def test_a_refused_state_change_lists_the_store_of_the_spec_the_job_keeps_running() -> None:
    """reconcile lists running_spec's store: with a storage URL edit beside a refused state change, the
    stable spec's (its drain's savepoint and newest checkpoint are there), not the CR's (issue 43's model run)."""
    def spec(url: str, store: str):  # type: ignore[no-untyped-def]
        return make_spec(checkpoint={"interval": "10s", "storage": {"url": url}}, spark={"stateStore": store})

    old = spec("s3://bucket-a/jobs", "rocksdb")
    tracking = parse_status(running(stableSpec=spec_key(old), stableSpecDoc=stable_doc(old))).tracking
    assert running_spec(spec("s3://bucket-b/jobs", "hdfs"), tracking).checkpoint.storage.url == "s3://bucket-a/jobs"
    upgrade = spec("s3://bucket-b/jobs", "rocksdb")  # an upgrade the job drains for: the CR's store
    assert running_spec(upgrade, tracking) is upgrade
