"""The state machine, table-driven: (phase, observation) -> (next phase, actions, events).

Each row is one line of docs/design.md §11 (or a case the issue names); most operator bugs are a
missing row. Actions are written compactly: create:N, delete:POD (delete!: forced), stop:NAME,
trigger, savepoint:NAME, result:RESULT.
"""

from __future__ import annotations

from typing import Any

import pytest

from sparkpoint.operator.decisions.machine import backoff_seconds, decide, spec_key
from sparkpoint.operator.decisions.model import (
    CheckpointFact,
    CheckpointResult,
    CreateAttempt,
    DeletePod,
    DeleteSavepoint,
    Emit,
    Observed,
    PodObs,
    StopRuntime,
    TriggerCheckpoint,
    TriggerSavepoint,
)
from sparkpoint.runtime.spec import parse_spec

T0 = 1_800_000_000.0


def make_spec(**over: Any):
    doc = {"job": {"entrypoint": "m:f"}, "checkpoint": {"interval": "10s"},
           "restart": {"maxRestarts": 3, "backoff": "10s", "maxBackoff": "40s"}}
    for key, value in over.items():
        doc[key] = value
    return parse_spec(doc)


SPEC = make_spec()
KEY = spec_key(SPEC)


def running(**tracking: Any) -> dict[str, Any]:
    tr = {"runningSince": T0 - 5, "podSeen": True, "podReady": True, "stableSpec": KEY,
          "lastTriggerAt": T0 - 5} | tracking
    return {"phase": "Running", "attempt": 1, "pod": "job-1", "tracking": tr}


def pod(attempt: int = 1, **kw: Any) -> PodObs:
    base = {"phase": "Running", "ready": True, "ip": "10.0.0.1"}
    return PodObs(name=f"job-{attempt}", attempt=attempt, **(base | kw))


RUNTIME = {"phase": "running", "recentCheckpoints": [], "latestCheckpoint": None}


def describe(action: Any) -> str | None:
    match action:
        case CreateAttempt(attempt=n):
            return f"create:{n}"
        case DeletePod(name=name, force=force):
            return f"delete{'!' if force else ''}:{name}"
        case StopRuntime(savepoint=name):
            return f"stop:{name}"
        case TriggerCheckpoint():
            return "trigger"
        case TriggerSavepoint(name=name):
            return f"savepoint:{name}"
        case CheckpointResult(result=r):
            return f"result:{r}"
        case DeleteSavepoint(name=name):
            return f"drop-savepoint:{name}"
    return None


def outcome(obs: Observed):
    d = decide(obs)
    actions = [s for s in map(describe, d.actions) if s]
    events = [a.reason for a in d.actions if isinstance(a, Emit)]
    return d, actions, events


ROWS = [
    # id, status, pods, kwargs of Observed, expected phase, actions, events
    ("new job -> attempt 1", {}, [], {}, "Pending", ["create:1"], ["AttemptCreated"]),
    ("Pending, pod never created (operator died) -> create again",
     {"phase": "Pending", "attempt": 1, "tracking": {}}, [], {}, "Pending", ["create:1"], []),
    ("Pending, pod not ready -> wait", {"phase": "Pending", "attempt": 1, "tracking": {}},
     [pod(ready=False)], {}, "Pending", [], []),
    ("Pending, pod ready -> Running", {"phase": "Pending", "attempt": 1, "tracking": {}},
     [pod()], {"runtime": RUNTIME}, "Running", [], ["Running"]),
    ("Running, interval elapsed -> trigger", running(lastTriggerAt=T0 - 11), [pod()], {"runtime": RUNTIME},
     "Running", ["trigger"], []),
    ("Running, interval not elapsed -> nothing", running(lastTriggerAt=T0 - 3), [pod()], {"runtime": RUNTIME},
     "Running", [], []),
    ("Running, runtime unreachable -> no trigger", running(lastTriggerAt=T0 - 11), [pod()], {},
     "Running", [], []),
    ("Running, pending trigger completed", running(pendingTrigger={"at": T0 - 2, "id": "chk-000004"}),
     [pod()], {"runtime": RUNTIME | {"recentCheckpoints": [{"id": "chk-000004", "status": "completed"}]}},
     "Running", ["result:completed"], []),
    ("Running, pending trigger past timeout", running(pendingTrigger={"at": T0 - 700, "id": "req-000001"},
                                                     lastTriggerAt=T0 - 700, runningSince=T0 - 700),
     [pod()], {"runtime": RUNTIME}, "Running", ["result:timed_out", "trigger"], ["CheckpointUnhealthy"]),
    ("Running, container restarted in place -> local recovery, stay Running", running(),
     [pod(restart_count=1, last_exit_code=137)], {"runtime": RUNTIME}, "Running", [], ["LocalRecovery"]),
    ("Running, pod deleted -> Recovering", running(), [], {}, "Recovering", [], ["PodDeleted"]),
    ("Running, pod being deleted -> Recovering, wait", running(), [pod(deleting=True)], {},
     "Recovering", [], ["PodDeleted"]),
    ("Running, pod failed -> Recovering, delete it", running(), [pod(phase="Failed", exit_code=1)], {},
     "Recovering", ["delete:job-1"], ["PodFailed"]),
    ("Running, pod evicted -> Recovering", running(), [pod(phase="Failed", reason="Evicted")], {},
     "Recovering", ["delete:job-1"], ["Evicted"]),
    ("Running, node lost -> Recovering, force delete", running(), [pod(node_lost=True, phase="Unknown")], {},
     "Recovering", ["delete!:job-1"], ["NodeLost"]),
    ("Running, runtime exited 0 on its own -> Finished", running(), [pod(phase="Succeeded", ready=False)], {},
     "Finished", [], ["Finished"]),
    ("Recovering, old pod still there -> wait, never a second pod",
     {"phase": "Recovering", "attempt": 1, "tracking": {"nextAttemptAt": T0 - 1}}, [pod(deleting=True)], {},
     "Recovering", [], []),
    ("Recovering, pod gone, backoff not elapsed -> wait",
     {"phase": "Recovering", "attempt": 1, "tracking": {"nextAttemptAt": T0 + 5}}, [], {}, "Recovering", [], []),
    ("Recovering, pod gone, backoff elapsed -> attempt 2",
     {"phase": "Recovering", "attempt": 1, "tracking": {"nextAttemptAt": T0 - 1}}, [], {}, "Pending",
     ["create:2"], ["AttemptCreated"]),
    ("Running, restart budget exhausted -> Failed", running(restartTimes=[T0 - 30, T0 - 20, T0 - 10]),
     [pod(phase="Failed", exit_code=1)], {}, "Failed", ["delete:job-1"], ["RestartLimitExceeded"]),
    ("crash loop in place past the budget -> Failed, pod deleted", running(restartTimes=[T0 - 30, T0 - 20],
                                                                           containerRestarts=2),
     [pod(restart_count=4, last_exit_code=1, ready=False)], {}, "Failed", ["delete:job-1"],
     ["LocalRecovery", "RestartLimitExceeded"]),
    ("old restarts outside the window do not count", running(restartTimes=[T0 - 7200] * 3),
     [pod(phase="Failed", exit_code=1)], {}, "Recovering", ["delete:job-1"], ["PodFailed"]),
    ("restart.window 3h: restarts 2h ago still count -> Failed", running(restartTimes=[T0 - 7200] * 3),
     [pod(phase="Failed", exit_code=1)], {"spec": make_spec(restart={"maxRestarts": 3, "window": "3h"})},
     "Failed", ["delete:job-1"], ["RestartLimitExceeded"]),
    ("Failed stays Failed, keeps pods away", {"phase": "Failed", "attempt": 2, "tracking": {"failedGeneration": 1}},
     [pod(2, phase="Running")], {}, "Failed", ["delete:job-2"], []),
    ("Failed, spec edited -> a new attempt", {"phase": "Failed", "attempt": 2, "tracking": {"failedGeneration": 1}},
     [], {"generation": 2}, "Pending", ["create:3"], ["SpecChanged", "AttemptCreated"]),
    ("restore failed (exit 3) -> Recovering, remembered as bad", running(restoreFrom={"checkpoint": "chk-000005"}),
     [pod(phase="Failed", exit_code=3)], {}, "Recovering", ["delete:job-1"], ["RestoreFailed"]),
    ("restore failed, container already restarting in place -> Recovering, not a local recovery",
     running(), [pod(restart_count=1, last_exit_code=3, ready=False)], {}, "Recovering", ["delete:job-1"],
     ["RestoreFailed"]),
    ("savepoint nonce changed -> savepoint", running(savepointNonce=1), [pod()],
     {"runtime": RUNTIME, "spec": make_spec(savepoint={"triggerNonce": 2})}, "Running",
     ["savepoint:nonce-2"], ["SavepointTriggered"]),
    ("periodic savepoint due -> savepoint", running(periodicSavepointAt=T0 - 3600), [pod()],
     {"runtime": RUNTIME, "spec": make_spec(savepoint={"interval": "1h"})}, "Running",
     [f"savepoint:periodic-{int(T0)}"], ["SavepointTriggered"]),
    ("periodic savepoint not due yet -> nothing", running(periodicSavepointAt=T0 - 3000), [pod()],
     {"runtime": RUNTIME, "spec": make_spec(savepoint={"interval": "1h"})}, "Running", [], []),
    ("periodic savepoint: the first one comes an interval after the job runs", running(), [pod()],
     {"runtime": RUNTIME, "spec": make_spec(savepoint={"interval": "1h"})}, "Running", [], []),
    ("periodic savepoints beyond savepoint.retain -> oldest dropped, others kept",
     running(periodicSavepointAt=T0 - 60), [pod()],
     {"runtime": RUNTIME, "spec": make_spec(savepoint={"interval": "1h", "retain": 2}),
      "store_savepoints": [{"name": "periodic-100"}, {"name": "upgrade-2"}, {"name": "periodic-200"},
                           {"name": "periodic-300"}]},
     "Running", ["drop-savepoint:periodic-100"], []),
    ("suspend -> stop with a savepoint", running(), [pod()],
     {"runtime": RUNTIME, "spec": make_spec(state="suspended"), "generation": 2}, "Suspended",
     ["stop:suspend-2"], ["Suspending"]),
    ("Suspended, drained pod exited -> delete it",
     {"phase": "Suspended", "attempt": 1, "tracking": {"drain": {"at": T0 - 5}, "restoreTarget": "suspend-2"}},
     [pod(phase="Succeeded", ready=False)], {"spec": make_spec(state="suspended")}, "Suspended",
     ["delete:job-1"], []),
    ("suspend while Ready flaps -> still stop with a savepoint", running(), [pod(ready=False)],
     {"runtime": RUNTIME, "spec": make_spec(state="suspended"), "generation": 2}, "Suspended",
     ["stop:suspend-2"], ["Suspending"]),
    ("Suspended, runtime exited 0, GC sidecar still running -> delete",
     {"phase": "Suspended", "attempt": 1, "tracking": {"drain": {"at": T0 - 5}, "restoreTarget": "suspend-2"}},
     [pod(exit_code=0, ready=False)], {"spec": make_spec(state="suspended")}, "Suspended", ["delete:job-1"], []),
    ("Running, runtime exited 0 while the GC sidecar runs -> Finished", running(),
     [pod(exit_code=0, ready=False)], {}, "Finished", [], ["Finished"]),
    ("Suspended, drain too slow -> delete",
     {"phase": "Suspended", "attempt": 1, "tracking": {"drain": {"at": T0 - 500}}},
     [pod()], {"spec": make_spec(state="suspended")}, "Suspended", ["delete:job-1"], []),
    ("resume -> attempt 2 from the suspend savepoint",
     {"phase": "Suspended", "attempt": 1, "tracking": {"restoreTarget": "suspend-2"}}, [],
     {"store_savepoints": [{"name": "suspend-2"}]}, "Pending", ["create:2"], ["AttemptCreated"]),
    ("image changed -> Upgrading, stop with savepoint", running(), [pod()],
     {"runtime": RUNTIME, "spec": make_spec(image="sparkpoint:v2"), "generation": 3}, "Upgrading",
     ["stop:upgrade-3"], ["Upgrading"]),
    ("image changed, stateless -> delete at once", running(), [pod()],
     {"runtime": RUNTIME, "spec": make_spec(image="v2", upgradeMode="stateless")}, "Upgrading",
     ["delete:job-1"], ["Upgrading"]),
    ("Upgrading, pod gone -> new attempt without backoff",
     {"phase": "Upgrading", "attempt": 1, "tracking": {"restoreTarget": "upgrade-3", "drain": {"at": T0}}},
     [], {"store_savepoints": [{"name": "upgrade-3"}]}, "Pending", ["create:2"], ["AttemptCreated"]),
    ("Upgrading, pod gone, its savepoint not listed yet -> wait for the listing",
     {"phase": "Upgrading", "attempt": 1, "tracking": {"restoreTarget": "upgrade-3", "drain": {"at": T0 - 5}}},
     [], {"store_savepoints": []}, "Upgrading", [], []),
    ("restartNonce changed -> Recovering at once, the pod deleted, no savepoint", running(restartNonce=1),
     [pod()], {"runtime": RUNTIME, "spec": make_spec(restartNonce=2), "generation": 2}, "Recovering",
     ["delete:job-1"], ["RestartRequested"]),
    ("restartNonce set on a running job that had none -> restart", running(), [pod()],
     {"runtime": RUNTIME, "spec": make_spec(restartNonce=1), "generation": 2}, "Recovering",
     ["delete:job-1"], ["RestartRequested"]),
    ("restartNonce unchanged -> nothing", running(restartNonce=2, lastTriggerAt=T0 - 3), [pod()],
     {"runtime": RUNTIME, "spec": make_spec(restartNonce=2)}, "Running", [], []),
    ("checkpoint.triggerNonce changed -> trigger now, before the interval", running(checkpointNonce=1), [pod()],
     {"runtime": RUNTIME, "spec": make_spec(checkpoint={"interval": "10s", "triggerNonce": 2})}, "Running",
     ["trigger"], ["CheckpointTriggered"]),
    ("checkpoint.triggerNonce set on a job that had none -> trigger", running(), [pod()],
     {"runtime": RUNTIME, "spec": make_spec(checkpoint={"interval": "10s", "triggerNonce": 1})}, "Running",
     ["trigger"], ["CheckpointTriggered"]),
    ("checkpoint.triggerNonce and the interval due together -> one trigger",
     running(checkpointNonce=1, lastTriggerAt=T0 - 11), [pod()],
     {"runtime": RUNTIME, "spec": make_spec(checkpoint={"interval": "10s", "triggerNonce": 2})}, "Running",
     ["trigger"], ["CheckpointTriggered"]),
    ("checkpoint.triggerNonce changed while a trigger is in flight -> wait for it",
     running(checkpointNonce=1, pendingTrigger={"at": T0 - 2, "id": "chk-000004"}), [pod()],
     {"runtime": RUNTIME, "spec": make_spec(checkpoint={"interval": "10s", "triggerNonce": 2})}, "Running", [], []),
    ("checkpoint.triggerNonce unchanged -> nothing", running(checkpointNonce=2), [pod()],
     {"runtime": RUNTIME, "spec": make_spec(checkpoint={"interval": "10s", "triggerNonce": 2})}, "Running", [], []),
    ("checkpoint.triggerNonce changed, pod not ready -> no trigger yet", running(checkpointNonce=1),
     [pod(ready=False)], {"runtime": RUNTIME, "spec": make_spec(checkpoint={"interval": "10s", "triggerNonce": 2})},
     "Running", [], []),
    ("a pod newer than status (status write lost) is adopted, not duplicated",
     {"phase": "Recovering", "attempt": 1, "tracking": {}}, [pod(2, ready=False)], {}, "Pending", [], []),
]


@pytest.mark.parametrize("row", ROWS, ids=[r[0] for r in ROWS])
def test_row(row):
    _, status, pods, kwargs, phase, actions, events = row
    obs = Observed(**({"spec": SPEC, "generation": 1, "status": status, "pods": pods, "now": T0,
                       "name": "job"} | kwargs))
    d, got_actions, got_events = outcome(obs)
    assert d.status["phase"] == phase
    assert got_actions == actions
    assert got_events == events


def observe(status, pods, **kw) -> Observed:
    return Observed(**({"spec": SPEC, "generation": 1, "status": status, "pods": pods, "now": T0,
                        "name": "job"} | kw))


def test_backoff_doubles_up_to_max():
    assert [backoff_seconds(SPEC, n) for n in (1, 2, 3, 4, 5)] == [10, 20, 40, 40, 40]


def test_recovering_waits_the_backoff():
    d = decide(observe(running(restartTimes=[T0 - 100], failureStreak=1), [pod(phase="Failed", exit_code=1)]))
    assert d.status["tracking"]["nextAttemptAt"] == T0 + 20  # the second failure in a row
    assert d.status["restarts"] == 1 and d.status["lastFailure"]["reason"] == "PodFailed"


def test_restore_failure_starts_next_attempt_from_an_older_checkpoint():
    d = decide(observe(running(restoreFrom={"checkpoint": "chk-000005"}), [pod(phase="Failed", exit_code=3)]))
    st = d.status
    assert st["tracking"]["badRestorePoints"] == ["checkpoint:chk-000005"]
    st["tracking"]["nextAttemptAt"] = T0 - 1
    store = [CheckpointFact(f"chk-00000{i}", i, "2026-01-01T00:00:0{i}Z") for i in (3, 4, 5)]
    d2 = decide(observe(st, [], store_checkpoints=store))
    (create,) = d2.of(CreateAttempt)
    assert create.attempt == 2 and create.restore_from.checkpoint == "chk-000004"


def test_local_recovery_is_counted_once():
    d = decide(observe(running(), [pod(restart_count=1, last_exit_code=137)], runtime=RUNTIME))
    assert d.status["restarts"] == 1 and d.status["localRecoveries"] == 1
    again = decide(observe(d.status, [pod(restart_count=1, last_exit_code=137)], runtime=RUNTIME, now=T0 + 1))
    assert again.status["restarts"] == 1 and not [a for a in again.actions if isinstance(a, Emit)]


def test_checkpoints_from_runtime_and_store_merge_bounded():
    store = [CheckpointFact(f"chk-{i:06d}", i, f"2026-01-01T00:00:{i:02d}Z", 10, 1) for i in range(1, 13)]
    rt = RUNTIME | {"latestCheckpoint": {"id": "chk-000013", "batchId": 20, "completed": "2026-01-01T00:01:00Z",
                                         "bytes": 5, "newBytes": 2}}
    d = decide(observe(running(), [pod()], runtime=rt, store_checkpoints=store))
    assert d.status["latestCheckpoint"] == {"id": "chk-000013", "batch": 20, "completedAt": "2026-01-01T00:01:00Z",
                                            "bytes": 5, "newBytes": 2}
    assert [c["id"] for c in d.status["checkpoints"]] == [f"chk-{i:06d}" for i in range(4, 14)]


def test_same_observation_same_decision_after_an_operator_restart():
    first = decide(observe(running(lastTriggerAt=T0 - 11), [pod()], runtime=RUNTIME))
    # The operator dies after writing status, before acting: the next decision sees the pending
    # trigger and does not trigger twice.
    second = decide(observe(first.status, [pod()], runtime=RUNTIME, now=T0 + 1))
    assert [describe(a) for a in first.actions if describe(a)] == ["trigger"]
    assert [describe(a) for a in second.actions if describe(a)] == []


def test_runtime_restore_fallback_is_recorded_once():
    fallbacks = [{"checkpoint": "chk-000003", "error": "object x is corrupt"}]  # as GET /status has them
    rt = RUNTIME | {"restore": {"source": "remote", "checkpoint": "chk-000002", "fallbacks": fallbacks}}
    d = decide(observe(running(), [pod()], runtime=rt))
    assert d.status["restore"]["fallbacks"] == fallbacks
    (event,) = [a for a in d.actions if isinstance(a, Emit)]
    assert event.reason == "RestoreFallback"
    assert event.message == "attempt 1 restored from chk-000002 after failing: chk-000003: object x is corrupt"
    d2 = decide(observe(d.status, [pod()], runtime=rt, now=T0 + 1))
    assert not [a for a in d2.actions if isinstance(a, Emit)]


def test_upgrade_not_ready_in_time_rolls_back_to_the_stable_spec_and_its_savepoint():
    old = make_spec(image="sparkpoint:v1")
    new = make_spec(image="sparkpoint:v2")
    from sparkpoint.operator.decisions.step import stable_doc

    # Running on v1; the CR is edited to v2 (generation 2): drain with a savepoint.
    st = running(stableSpec=spec_key(old), stableSpecDoc=stable_doc(old))
    d = decide(observe(st, [pod()], runtime=RUNTIME, spec=new, generation=2))
    assert d.status["phase"] == "Upgrading" and [describe(a) for a in d.of(StopRuntime)] == ["stop:upgrade-2"]
    # The old pod is gone: attempt 2 with v2 from the savepoint, with a deadline.
    d = decide(observe(d.status, [], spec=new, generation=2, now=T0 + 10, store_savepoints=[{"name": "upgrade-2"}]))
    (create,) = d.of(CreateAttempt)
    assert create.attempt == 2 and create.spec is None and create.restore_from.savepoint == "upgrade-2"
    assert d.status["tracking"]["upgradeDeadline"] == T0 + 10 + 300
    # Not Ready before the deadline: roll back.
    d = decide(observe(d.status, [pod(2, ready=False)], spec=new, generation=2, now=T0 + 400))
    assert d.status["phase"] == "Upgrading" and [describe(a) for a in d.of(DeletePod)] == ["delete:job-2"]
    assert "UpgradeRolledBack" in [a.reason for a in d.of(Emit)]
    assert d.status["lastFailure"]["reason"] == "UpgradeTimeout"
    # Attempt 3 runs v1 again from the same savepoint, though the CR still says v2.
    d = decide(observe(d.status, [], spec=new, generation=2, now=T0 + 410, store_savepoints=[{"name": "upgrade-2"}]))
    (create,) = d.of(CreateAttempt)
    assert create.attempt == 3 and create.spec.image == "sparkpoint:v1"
    assert create.restore_from.savepoint == "upgrade-2"
    assert "upgradeDeadline" not in d.status["tracking"]
    # Ready on v1: Running, and the rejected v2 is not tried again...
    d = decide(observe(d.status, [pod(3)], runtime=RUNTIME, spec=new, generation=2, now=T0 + 450))
    assert d.status["phase"] == "Running"
    d = decide(observe(d.status, [pod(3)], runtime=RUNTIME, spec=new, generation=2, now=T0 + 460))
    assert d.status["phase"] == "Running" and not d.of(StopRuntime)
    # ...until the CR is edited again.
    d = decide(observe(d.status, [pod(3)], runtime=RUNTIME, spec=make_spec(image="sparkpoint:v3"), generation=3,
                       now=T0 + 470))
    assert d.status["phase"] == "Upgrading"


def test_stateless_upgrade_starts_the_new_attempt_fresh_and_keeps_that_history():
    old, new = make_spec(image="v1", upgradeMode="stateless"), make_spec(image="v2", upgradeMode="stateless")
    d = decide(observe(running(stableSpec=spec_key(old)), [pod()], runtime=RUNTIME, spec=new, generation=4))
    assert d.status["phase"] == "Upgrading" and not d.of(StopRuntime)  # no drain, no savepoint
    d = decide(observe(d.status, [], spec=new, generation=4, now=T0 + 5, store_savepoints=[]))
    (create,) = d.of(CreateAttempt)
    assert create.attempt == 2 and create.restore_from.fresh == "upgrade-4"  # not the latest checkpoint
    # The fresh attempt's pod is deleted: attempt 3 continues the new history, not the old one.
    d = decide(observe(d.status, [pod(2)], runtime=RUNTIME, spec=new, generation=4, now=T0 + 20))
    d = decide(observe(d.status, [], spec=new, generation=4, now=T0 + 30))
    d.status["tracking"]["nextAttemptAt"] = T0
    d = decide(observe(d.status, [], spec=new, generation=4, now=T0 + 40))
    (create,) = d.of(CreateAttempt)
    assert create.attempt == 3 and create.restore_from.fresh == "upgrade-4"


def test_upgrade_timeout_of_the_spec_wins_over_the_operator_default():
    old, new = make_spec(image="v1"), make_spec(image="v2", upgradeTimeout="90s")
    d = decide(observe(running(stableSpec=spec_key(old)), [pod()], runtime=RUNTIME, spec=new, generation=2))
    d = decide(observe(d.status, [], spec=new, generation=2, now=T0 + 10, store_savepoints=[{"name": "upgrade-2"}]))
    assert d.status["tracking"]["upgradeDeadline"] == T0 + 10 + 90  # not the operator's 300 s
    assert spec_key(new) == spec_key(make_spec(image="v2"))  # editing the timeout alone is no upgrade


def test_rolled_back_job_still_follows_suspend():
    old, new = make_spec(image="v1"), make_spec(image="v2")
    from sparkpoint.operator.decisions.status_model import Tracking
    from sparkpoint.operator.decisions.step import effective_spec, stable_doc

    tracking = {"stableSpecDoc": stable_doc(old), "rejectedSpec": spec_key(new)}
    suspended = make_spec(image="v2", state="suspended")
    eff = effective_spec(suspended, Tracking.model_validate(tracking))
    assert eff.image == "v1" and eff.state == "suspended"


def test_a_skipped_savepoint_is_requested_again_until_it_is_in_the_store():
    spec = make_spec(savepoint={"triggerNonce": 1})
    d = decide(observe(running(), [pod()], runtime=RUNTIME, spec=spec))
    assert [describe(a) for a in d.of(TriggerSavepoint)] == ["savepoint:nonce-1"]
    skipped = RUNTIME | {"recentCheckpoints": [{"kind": "savepoint", "savepoint": "nonce-1", "status": "skipped"}]}
    d = decide(observe(d.status, [pod()], runtime=skipped, spec=spec, now=T0 + 1, store_savepoints=[]))
    assert [describe(a) for a in d.of(TriggerSavepoint)] == ["savepoint:nonce-1"]
    assert d.status["tracking"]["pendingSavepoint"]["tries"] == 2
    running_req = RUNTIME | {"recentCheckpoints": [{"kind": "savepoint", "savepoint": "nonce-1", "status": "uploading"}]}
    d = decide(observe(d.status, [pod()], runtime=running_req, spec=spec, now=T0 + 2, store_savepoints=[]))
    assert not d.of(TriggerSavepoint)
    d = decide(observe(d.status, [pod()], runtime=running_req, spec=spec, now=T0 + 3,
                       store_savepoints=[{"name": "nonce-1"}]))
    assert "pendingSavepoint" not in d.status["tracking"]
    assert [a.reason for a in d.of(Emit)] == ["SavepointCompleted"]


def test_an_upgrade_that_crash_loops_rolls_back_instead_of_failing_the_job():
    """Seen in e2e: a new entrypoint that does not exist made the runtime exit 2 again and again;
    maxRestarts ran out long before the upgrade timeout, and the job went Failed although its last
    stable spec ran fine. A crash loop of an attempt that was never Ready rolls back at once."""
    old, new = make_spec(image="sparkpoint:v1"), make_spec(image="sparkpoint:v2")
    from sparkpoint.operator.decisions.step import stable_doc

    st = running(stableSpec=spec_key(old), stableSpecDoc=stable_doc(old))
    d = decide(observe(st, [pod()], runtime=RUNTIME, spec=new, generation=2))
    d = decide(observe(d.status, [], spec=new, generation=2, now=T0 + 10, store_savepoints=[{"name": "upgrade-2"}]))
    assert d.status["tracking"]["upgradeDeadline"] == T0 + 10 + 300
    max_restarts = new.restart.max_restarts
    # The new attempt's runtime keeps exiting 2 in place, well before the deadline.
    for n in range(1, max_restarts + 2):
        d = decide(observe(d.status, [pod(2, ready=False, restart_count=n, last_exit_code=2)], spec=new,
                           generation=2, now=T0 + 20 + n))
        if d.status["phase"] != "Pending":
            break
    assert d.status["phase"] == "Upgrading", d.status.get("lastFailure")
    assert [describe(a) for a in d.of(DeletePod)] == ["delete:job-2"]
    assert "UpgradeRolledBack" in [a.reason for a in d.of(Emit)]
    assert d.status["lastFailure"]["reason"] == "UpgradeFailed"
    assert f"restarted {max_restarts + 1} times before it was Ready" in d.status["lastFailure"]["message"]
    # Attempt 3 runs the old spec from the upgrade's savepoint, with the restart budget the old spec had.
    d = decide(observe(d.status, [], spec=new, generation=2, now=T0 + 60, store_savepoints=[{"name": "upgrade-2"}]))
    (create,) = d.of(CreateAttempt)
    assert create.attempt == 3 and create.spec.image == "sparkpoint:v1" and create.restore_from.savepoint == "upgrade-2"
    d = decide(observe(d.status, [pod(3)], runtime=RUNTIME, spec=new, generation=2, now=T0 + 90))
    assert d.status["phase"] == "Running"
    # One crash of the rolled-back attempt is an ordinary local recovery, not the end of the job.
    d = decide(observe(d.status, [pod(3, restart_count=1, last_exit_code=137)], runtime=RUNTIME, spec=new,
                       generation=2, now=T0 + 100))
    assert d.status["phase"] == "Running"


def test_a_crash_loop_without_an_upgrade_still_fails_the_job():
    spec = make_spec()
    d = decide(observe(running(stableSpec=spec_key(spec)), [pod()], runtime=RUNTIME, spec=spec))
    for n in range(1, spec.restart.max_restarts + 2):
        d = decide(observe(d.status, [pod(restart_count=n, last_exit_code=2)], runtime=RUNTIME, spec=spec,
                           now=T0 + n))
    assert d.status["phase"] == "Failed" and "exceeded" in d.status["lastFailure"]["message"]


def test_a_new_job_on_a_prefix_with_checkpoints_says_it_resumes_them():
    store = [CheckpointFact(f"chk-{i:06d}", i, f"2026-01-01T00:00:{i:02d}Z") for i in (7, 8)]
    d = decide(observe({}, [], store_checkpoints=store))
    (create,) = d.of(CreateAttempt)
    assert create.attempt == 1 and create.restore_from is None  # the runtime resumes from chk-000008
    (note,) = [a for a in d.of(Emit) if a.reason == "ResumingExistingCheckpoints"]
    assert "chk-000008" in note.message and "restoreFrom.fresh" in note.message
    assert d.status["latestCheckpoint"]["id"] == "chk-000008"
    for quiet in (decide(observe({}, [], store_checkpoints=[])),  # nothing inherited
                  decide(Observed(**{**observe({}, [], store_checkpoints=store).__dict__,
                                     "spec": make_spec(restoreFrom={"fresh": "again"})}))):  # the user chose
        assert not [a for a in quiet.of(Emit) if a.reason == "ResumingExistingCheckpoints"]


def test_an_attempt_waiting_for_its_store_is_reported_once():
    pending = {"phase": "Pending", "attempt": 2, "pod": "job-2", "tracking": {"podSeen": True}}
    waiting = {"phase": "waiting_for_store", "recentCheckpoints": [], "latestCheckpoint": None}
    d = decide(observe(pending, [pod(attempt=2, ready=False)], runtime=waiting))
    assert d.status["phase"] == "Pending"
    assert [a.reason for a in d.of(Emit)] == ["WaitingForStore"]
    again = decide(observe(d.status, [pod(attempt=2, ready=False)], runtime=waiting, now=T0 + 2))
    assert not again.of(Emit)


def test_a_restart_nonce_restarts_from_the_latest_checkpoint_with_no_budget_spent():
    spec = make_spec(restartNonce=5)
    d, _, _ = outcome(observe(running(restartNonce=4), [pod()], runtime=RUNTIME, spec=spec, generation=2))
    assert d.status["restarts"] == 0 and d.status["tracking"]["restartNonce"] == 5
    d, actions, _ = outcome(observe(d.status, [], spec=spec, generation=2))
    create = next(a for a in d.actions if isinstance(a, CreateAttempt))
    assert actions == ["create:2"] and create.restore_from is None  # the runtime takes the latest checkpoint
    assert d.status["tracking"]["restartNonce"] == 5


def test_a_new_job_with_a_restart_nonce_starts_once():
    spec = make_spec(restartNonce=3)
    d, actions, _ = outcome(observe({}, [], spec=spec))
    assert actions == ["create:1"] and d.status["tracking"]["restartNonce"] == 3
    status = d.status | {"phase": "Running", "tracking": d.status["tracking"] | {
        "podSeen": True, "podReady": True, "stableSpec": spec_key(spec), "runningSince": T0, "lastTriggerAt": T0}}
    d, actions, events = outcome(observe(status, [pod()], runtime=RUNTIME, spec=spec))
    assert "RestartRequested" not in events and d.status["phase"] == "Running"


def test_a_checkpoint_trigger_nonce_is_answered_once_then_after_the_trigger_in_flight():
    spec = make_spec(checkpoint={"interval": "10s", "triggerNonce": 2})
    d, actions, _ = outcome(observe(running(checkpointNonce=1), [pod()], runtime=RUNTIME, spec=spec))
    assert actions == ["trigger"] and d.status["tracking"]["checkpointNonce"] == 2
    assert d.status["tracking"]["pendingTrigger"]["at"] == T0
    # the same nonce, the trigger answered: no second checkpoint before the interval
    status = d.status | {"tracking": {k: v for k, v in d.status["tracking"].items() if k != "pendingTrigger"}}
    d, actions, events = outcome(observe(status, [pod()], runtime=RUNTIME, spec=spec, now=T0 + 2))
    assert actions == [] and events == []
    # a nonce changed while a trigger is in flight is answered once that one ends
    busy = running(checkpointNonce=1, pendingTrigger={"at": T0 - 2, "id": "chk-000004"})
    d, actions, _ = outcome(observe(busy, [pod()], runtime=RUNTIME, spec=spec))
    assert actions == [] and d.status["tracking"]["checkpointNonce"] == 1
    done = {"phase": "running", "recentCheckpoints": [{"id": "chk-000004", "status": "completed"}]}
    d, actions, events = outcome(observe(d.status, [pod()], runtime=done, spec=spec, now=T0 + 1))
    assert actions == ["result:completed", "trigger"] and events == ["CheckpointTriggered"]
    assert d.status["tracking"]["checkpointNonce"] == 2
