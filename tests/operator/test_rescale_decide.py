"""Rescaling state as the operator decides it (issue 26; operator/rescale.py): a shufflePartitions
edit is an upgrade, the runtime's repartition lands in status.lastRescale with one Rescaled event,
and a repartition Spark refused (exit 4) rolls the upgrade back at once to the old partition count
and the upgrade's restore point."""

from __future__ import annotations

from test_machine import RUNTIME, T0, make_spec, observe, pod, running

from sparkpoint.operator.machine import decide, spec_key
from sparkpoint.operator.model import CreateAttempt, DeletePod, Emit, StopRuntime
from sparkpoint.operator.step import stable_doc


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


def test_exit_4_outside_an_upgrade_is_an_ordinary_failure() -> None:
    d = decide(observe(running(), [pod(restart_count=1, last_exit_code=4)], runtime=RUNTIME))
    assert d.status["phase"] == "Running"  # a local recovery, counted; no rollback without a trial
    assert "RescaleFailed" not in [a.reason for a in d.of(Emit)]
