"""The machine, issue 25 round 2: each test is a case where a job lost its point, rewound, stuck or
failed for nothing (each failed before its fix). Helpers as in test_machine.py."""

from __future__ import annotations

from test_machine import RUNTIME, SPEC, T0, make_spec, observe, pod, running

from sparkpoint.operator.decisions.checkpoints import iso
from sparkpoint.operator.decisions.machine import decide, spec_key
from sparkpoint.operator.decisions.model import (
    CheckpointFact,
    CreateAttempt,
    DeletePod,
    Emit,
    PodObs,
    StopRuntime,
)
from sparkpoint.operator.decisions.step import stable_doc


def facts(*numbers: int, at: float | None = None) -> list[CheckpointFact]:
    """Checkpoints completed long before T0, or at `at` (the last one only)."""
    made = [CheckpointFact(f"chk-{n:06d}", n, f"2026-01-01T00:00:{n:02d}Z") for n in numbers]
    if at is not None:
        made[-1] = CheckpointFact(made[-1].id, made[-1].batch, iso(at))
    return made


def after_backoff(status: dict) -> dict:
    status["tracking"]["nextAttemptAt"] = T0 - 1
    return status


def reasons(d) -> list[str]:
    return [a.reason for a in d.of(Emit)]


# --- 3: exit 3 blames the point the attempt used ----------------------------------------------------
def test_a_failed_savepoint_restore_blames_the_savepoint_not_the_newest_checkpoint():
    st = running(restoreFrom={"savepoint": "upgrade-2"}, attemptPoint={"savepoint": "upgrade-2"},
                 lineage={"point": {"savepoint": "upgrade-2"}, "over": None})
    st["latestCheckpoint"] = {"id": "chk-000005", "batch": 5, "completedAt": "2026-01-01T00:00:05Z"}
    d = decide(observe(st, [pod(phase="Failed", exit_code=3)]))
    assert d.status["tracking"]["badRestorePoints"] == ["savepoint:upgrade-2"]
    d = decide(observe(after_backoff(d.status), [], store_checkpoints=facts(3, 4, 5)))
    (create,) = d.of(CreateAttempt)
    assert create.restore_from.checkpoint == "chk-000005"  # the healthy newest, not one older


def test_the_runtime_names_the_points_it_could_not_restore():
    failed = pod(phase="Failed", exit_code=3, failed_points=("checkpoint:chk-000005", "checkpoint:chk-000004"))
    d = decide(observe(running(), [failed]))
    assert d.status["tracking"]["badRestorePoints"] == ["checkpoint:chk-000005", "checkpoint:chk-000004"]
    d = decide(observe(after_backoff(d.status), [], store_checkpoints=facts(3, 4, 5)))
    (create,) = d.of(CreateAttempt)
    assert create.restore_from.checkpoint == "chk-000003"


def test_a_start_that_failed_in_the_jobs_own_code_blames_no_checkpoint():
    # exit 3 "the previous start from it failed before committing a batch": the runtime names no point.
    d = decide(observe(running(), [pod(phase="Failed", exit_code=3, failed_points=())]))
    assert "badRestorePoints" not in d.status["tracking"]
    d = decide(observe(after_backoff(d.status), [], store_checkpoints=facts(3, 4, 5)))
    (create,) = d.of(CreateAttempt)
    assert create.restore_from is None  # the runtime picks the newest itself


def test_the_users_restore_from_is_never_replaced_silently():
    spec = make_spec(restoreFrom={"checkpoint": "chk-000004"})
    st = running(attemptPoint={"checkpoint": "chk-000004"}, stableSpec=spec_key(spec))
    d = decide(observe(st, [pod(phase="Failed", exit_code=3)], spec=spec, store_checkpoints=facts(3, 4, 5)))
    assert d.status["phase"] == "Failed" and d.status["lastFailure"]["reason"] == "RestoreFailed"
    assert "spec.restoreFrom checkpoint:chk-000004" in d.status["lastFailure"]["message"]
    assert not d.of(CreateAttempt)


def test_blame_is_cleared_once_a_newer_checkpoint_completes():
    st = running(badRestorePoints=["checkpoint:chk-000005"], blamedAtCheckpoint="chk-000005")
    rt = RUNTIME | {"latestCheckpoint": {"id": "chk-000006", "batchId": 6, "completed": "2026-01-01T00:00:06Z"}}
    d = decide(observe(st, [pod()], runtime=rt))
    assert "badRestorePoints" not in d.status["tracking"]


def test_a_stale_listing_never_picks_a_point_older_than_the_drained_final_checkpoint():
    st = running(badRestorePoints=["savepoint:upgrade-2"], lineage={"point": {"savepoint": "upgrade-2"}, "over": None})
    st.update(phase="Recovering", checkpoints=[f.to_status() for f in facts(4, 5, 6)])
    d = decide(observe(after_backoff(st), [], store_checkpoints=facts(4, 5)))  # the listing lags chk-6
    (create,) = d.of(CreateAttempt)
    assert create.restore_from.checkpoint == "chk-000006"


# --- 4: rolling back a stateless upgrade -----------------------------------------------------------
def test_rolling_back_a_stateless_upgrade_restores_the_old_specs_newest_checkpoint():
    old, new = make_spec(image="v1", upgradeMode="stateless"), make_spec(image="v2", upgradeMode="stateless")
    st = running(stableSpec=spec_key(old), stableSpecDoc=stable_doc(old))
    d = decide(observe(st, [pod()], runtime=RUNTIME, spec=new, generation=2, store_checkpoints=facts(7, 8)))
    d = decide(observe(d.status, [], spec=new, generation=2, now=T0 + 5, store_checkpoints=facts(7, 8)))
    (create,) = d.of(CreateAttempt)
    assert create.restore_from.fresh == "upgrade-2"
    # attempt 2 (v2) is never Ready: roll back after the deadline
    v2s = facts(7, 8, 9, at=T0 + 300)  # attempt 2 checkpointed, but was never Ready
    d = decide(observe(d.status, [pod(2, ready=False)], spec=new, generation=2, now=T0 + 400, store_checkpoints=v2s))
    assert "UpgradeRolledBack" in reasons(d)
    d = decide(observe(d.status, [], spec=new, generation=2, now=T0 + 410, store_checkpoints=v2s))
    (create,) = d.of(CreateAttempt)
    assert create.spec.image == "v1" and create.restore_from.checkpoint == "chk-000008"  # not empty, not v2's



def test_a_trial_begun_without_a_known_checkpoint_rolls_back_to_the_newest_made_before_it():
    """The store's newest manifest was unreadable when the trial began (no rollback point known):
    the rollback restores the newest checkpoint completed before the trial, not empty state."""
    old, new = (make_spec(image=image, upgradeMode="last-checkpoint") for image in ("v1", "v2"))
    st = running(stableSpec=spec_key(old), stableSpecDoc=stable_doc(old))
    d = decide(observe(st, [pod()], runtime=RUNTIME, spec=new, generation=2, store_checkpoints=[]))
    d = decide(observe(d.status, [], spec=new, generation=2, now=T0 + 5, store_checkpoints=[]))
    assert d.of(CreateAttempt)
    readable = facts(7, 8)  # made by v1 before the trial (both older than T0)
    d = decide(observe(d.status, [pod(2, ready=False)], spec=new, generation=2, now=T0 + 400,
                       store_checkpoints=readable))
    assert "UpgradeRolledBack" in reasons(d)
    d = decide(observe(d.status, [], spec=new, generation=2, now=T0 + 410, store_checkpoints=readable))
    (create,) = d.of(CreateAttempt)
    assert create.spec.image == "v1" and create.restore_from.checkpoint == "chk-000008"

# --- 5: resume while the suspend drain still runs ------------------------------------------------------
def test_resuming_during_the_suspend_drain_keeps_the_savepoint_target():
    suspended = make_spec(state="suspended")
    d = decide(observe(running(), [pod()], runtime=RUNTIME, spec=suspended, generation=2))
    assert [a.savepoint for a in d.of(StopRuntime)] == ["suspend-2"]
    # resumed at once: the pod is still draining, the savepoint not yet listed
    d = decide(observe(d.status, [pod()], spec=SPEC, generation=3, now=T0 + 1, store_savepoints=[]))
    assert not d.of(CreateAttempt) and not d.of(DeletePod)  # the drain may finish
    d = decide(observe(d.status, [], spec=SPEC, generation=3, now=T0 + 5, store_savepoints=[]))
    assert not d.of(CreateAttempt)  # the listing lags the runtime's exit: wait for it
    d = decide(observe(d.status, [], spec=SPEC, generation=3, now=T0 + 6, store_savepoints=[{"name": "suspend-2"}]))
    (create,) = d.of(CreateAttempt)
    assert create.restore_from.savepoint == "suspend-2"


# --- 6: a new storage URL --------------------------------------------------------------------------
def test_latest_checkpoint_follows_a_new_storage_url():
    old = make_spec(checkpoint={"interval": "10s", "storage": {"url": "s3://old/jobs"}})
    new = make_spec(checkpoint={"interval": "10s", "storage": {"url": "s3://new/jobs"}})
    st = running(stableSpec=spec_key(old), historyStorage="s3://old/jobs", attemptStorage="s3://old/jobs")
    st["checkpoints"] = [f.to_status() for f in facts(*range(40, 50))]
    st["latestCheckpoint"] = st["checkpoints"][-1]
    d = decide(observe(st, [pod()], spec=new, generation=2, store_checkpoints=facts(1, 2)))
    assert d.status["latestCheckpoint"]["id"] == "chk-000002"
    assert [c["id"] for c in d.status["checkpoints"]] == ["chk-000001", "chk-000002"]



def test_a_storage_move_does_not_wait_for_the_drain_savepoint_in_the_new_store():
    """The drain's savepoint is written to the old storage URL: the new store's listing never shows
    it, so the new attempt starts at once (not after the 120 s listing wait)."""
    old = make_spec(checkpoint={"interval": "10s", "storage": {"url": "s3://old/jobs"}})
    new = make_spec(checkpoint={"interval": "10s", "storage": {"url": "s3://new/jobs"}})
    st = running(stableSpec=spec_key(old), stableSpecDoc=stable_doc(old), historyStorage="s3://old/jobs",
                 attemptStorage="s3://old/jobs")
    d = decide(observe(st, [pod()], runtime=RUNTIME, spec=new, generation=2, store_savepoints=[]))
    assert [a.savepoint for a in d.of(StopRuntime)] == ["upgrade-2"]
    d = decide(observe(d.status, [], spec=new, generation=2, now=T0 + 5, store_savepoints=[]))
    (create,) = d.of(CreateAttempt)
    assert create.attempt == 2

# --- 7: Failed/Finished + an edit while pods remain ----------------------------------------------------
def test_an_edit_after_failed_is_not_forgotten_while_a_pod_lingers():
    st = {"phase": "Failed", "attempt": 2, "pod": "job-2", "tracking": {"failedGeneration": 1}}
    lingering = pod(2, phase="Running", deleting=True)
    d = decide(observe(st, [lingering], generation=2))
    assert not d.of(CreateAttempt)
    for t in (5, 10):  # the pod takes its time to go; the edit stays recorded
        d = decide(observe(d.status, [lingering], generation=2, now=T0 + t))
    d = decide(observe(d.status, [], generation=2, now=T0 + 15))
    (create,) = d.of(CreateAttempt)
    assert create.attempt == 3


def test_an_edit_after_finished_is_not_forgotten_while_a_pod_lingers():
    st = {"phase": "Finished", "attempt": 1, "pod": "job-1", "observedGeneration": 1, "tracking": {}}
    sidecar = pod(1, phase="Running", exit_code=0)
    d = decide(observe(st, [sidecar], generation=2))
    d = decide(observe(d.status, [pod(1, phase="Running", exit_code=0, deleting=True)], generation=2, now=T0 + 2))
    d = decide(observe(d.status, [], generation=2, now=T0 + 4))
    assert [a.attempt for a in d.of(CreateAttempt)] == [2]


# --- 8: a Pending attempt and a spec edit ------------------------------------------------------------
def test_a_pending_attempt_is_replaced_when_the_spec_is_edited():
    typo, fixed = make_spec(image="sparkpoint:typo"), make_spec(image="sparkpoint:v1")
    d = decide(observe({}, [], spec=typo))
    stuck = PodObs(name="job-1", attempt=1, phase="Pending")  # ImagePullBackOff
    d = decide(observe(d.status, [stuck], spec=typo, now=T0 + 30))
    d = decide(observe(d.status, [stuck], spec=fixed, generation=2, now=T0 + 60))
    assert [describe.name for describe in d.of(DeletePod)] == ["job-1"] and "SpecChanged" in reasons(d)
    d = decide(observe(d.status, [], spec=fixed, generation=2, now=T0 + 62))
    (create,) = d.of(CreateAttempt)
    assert create.attempt == 2 and d.status["restarts"] == 0


def test_a_fix_during_an_upgrade_is_run_not_recorded_as_rejected():
    old, bad, fix = make_spec(image="v1"), make_spec(image="v2-typo"), make_spec(image="v2")
    st = running(stableSpec=spec_key(old), stableSpecDoc=stable_doc(old))
    d = decide(observe(st, [pod()], runtime=RUNTIME, spec=bad, generation=2))
    d = decide(observe(d.status, [], spec=bad, generation=2, now=T0 + 5, store_savepoints=[{"name": "upgrade-2"}]))
    stuck = PodObs(name="job-2", attempt=2, phase="Pending")
    d = decide(observe(d.status, [stuck], spec=fix, generation=3, now=T0 + 20))
    assert "SpecChanged" in reasons(d) and "rejectedSpec" not in d.status["tracking"]
    d = decide(observe(d.status, [], spec=fix, generation=3, now=T0 + 25, store_savepoints=[{"name": "upgrade-2"}]))
    (create,) = d.of(CreateAttempt)
    assert create.spec is None and create.restore_from.savepoint == "upgrade-2"  # the fix, from the same point
    assert d.status["tracking"]["upgradeDeadline"] == T0 + 25 + 300  # still on trial


# --- 9: a pod the API server refuses ---------------------------------------------------------------------
def test_a_refused_pod_counts_as_a_failed_start():
    d = decide(observe({}, []))
    st = d.status
    st["tracking"]["createFailed"] = {"attempt": 1, "reason": "Forbidden", "message": "exceeded quota"}
    d = decide(observe(st, [], now=T0 + 1))
    assert d.status["phase"] == "Recovering" and d.status["lastFailure"]["reason"] == "Forbidden"
    assert "exceeded quota" in d.status["lastFailure"]["message"] and d.status["restarts"] == 1
    assert d.status["tracking"]["nextAttemptAt"] == T0 + 1 + 10 and d.status["nextAttemptAt"]


def test_an_upgrade_whose_pods_are_refused_rolls_back():
    old, new = make_spec(image="v1"), make_spec(image="v2", restart={"maxRestarts": 1, "backoff": "10s"})
    st = running(stableSpec=spec_key(old), stableSpecDoc=stable_doc(old))
    d = decide(observe(st, [pod()], runtime=RUNTIME, spec=new, generation=2))
    now = T0 + 5
    d = decide(observe(d.status, [], spec=new, generation=2, now=now, store_savepoints=[{"name": "upgrade-2"}]))
    for _ in range(3):
        attempt = d.status["attempt"]
        d.status["tracking"]["createFailed"] = {"attempt": attempt, "reason": "Forbidden", "message": "quota"}
        now += 60
        d = decide(observe(d.status, [], spec=new, generation=2, now=now, store_savepoints=[{"name": "upgrade-2"}]))
        if "UpgradeRolledBack" in reasons(d):
            break
        now += 60
        d = decide(observe(d.status, [], spec=new, generation=2, now=now, store_savepoints=[{"name": "upgrade-2"}]))
    assert d.status["phase"] != "Failed"
    now += 5
    d = decide(observe(d.status, [], spec=new, generation=2, now=now, store_savepoints=[{"name": "upgrade-2"}]))
    (create,) = d.of(CreateAttempt)
    assert create.spec.image == "v1" and create.restore_from.savepoint == "upgrade-2"


# --- 12: restart.policy Always ------------------------------------------------------------------------
def test_always_restarts_a_runtime_that_exited_zero():
    always = make_spec(restart={"policy": "Always", "backoff": "10s"})
    d = decide(observe(running(stableSpec=spec_key(always)), [pod(exit_code=0)], spec=always))
    assert d.status["phase"] == "Recovering" and d.status["tracking"].get("restartTimes", []) == []


# --- 13: disruptions are not crashes -------------------------------------------------------------------
def test_a_deleted_pod_restarts_at_once_and_spends_no_budget():
    st = running(restartTimes=[T0 - 50, T0 - 40, T0 - 30], failureStreak=3)
    d = decide(observe(st, [pod(deleting=True)]))
    assert d.status["phase"] == "Recovering" and d.status["tracking"]["nextAttemptAt"] == T0
    assert d.status["tracking"]["restartTimes"] == [T0 - 50, T0 - 40, T0 - 30]  # maxRestarts 3 not exceeded
    d = decide(observe(d.status, [], now=T0 + 0.5))
    assert [a.attempt for a in d.of(CreateAttempt)] == [2]


def test_eleven_drains_do_not_fail_a_healthy_job():
    spec = make_spec(restart={"maxRestarts": 10, "backoff": "10s"})
    st, now = running(stableSpec=spec_key(spec)), T0
    for n in range(11):
        current = PodObs(name=f"job-{n + 1}", attempt=n + 1, phase="Running", ready=True, ip="10.0.0.1")
        d = decide(observe(st, [current], runtime=RUNTIME, spec=spec, now=now))
        now += 40
        d = decide(observe(d.status, [PodObs(name=current.name, attempt=n + 1, phase="Running", deleting=True)],
                           spec=spec, now=now))
        d = decide(observe(d.status, [], spec=spec, now=now + 1))
        assert d.of(CreateAttempt), f"drain {n + 1}: no new attempt within a second"
        st = d.status
    assert st["phase"] != "Failed" and st["restarts"] == 11


def test_backoff_starts_over_after_a_stable_run():
    spec = make_spec(restart={"maxRestarts": 10, "backoff": "10s", "maxBackoff": "5m", "stableAfter": "5m"})
    st = running(stableSpec=spec_key(spec), failureStreak=4, runningSince=T0 - 600)
    d = decide(observe(st, [pod(phase="Failed", exit_code=1)], spec=spec))
    assert d.status["tracking"]["nextAttemptAt"] == T0 + 10  # not 10 * 2**4
    st = running(stableSpec=spec_key(spec), failureStreak=4, runningSince=T0 - 60)
    d = decide(observe(st, [pod(phase="Failed", exit_code=1)], spec=spec))
    assert d.status["tracking"]["nextAttemptAt"] == T0 + 160  # a crash loop keeps doubling


# --- 12c: the GC keeps what an attempt may restore from ---------------------------------------------
def test_a_restore_from_checkpoint_is_pinned_in_the_gc_sidecar():
    from sparkpoint.operator.decisions.model import PinCheckpoints

    spec = make_spec(restoreFrom={"checkpoint": "chk-000004"})
    d = decide(observe(running(stableSpec=spec_key(spec)), [pod()], runtime=RUNTIME, spec=spec))
    assert d.of(PinCheckpoints) == [PinCheckpoints(("chk-000004",))]
    assert d.status["tracking"]["gcPins"] == ["chk-000004"]
    again = decide(observe(d.status, [pod()], runtime=RUNTIME, spec=spec, now=T0 + 1))
    assert not again.of(PinCheckpoints)  # written once
    d = decide(observe(d.status, [pod()], runtime=RUNTIME, spec=SPEC, now=T0 + 2))
    assert d.of(PinCheckpoints) == [PinCheckpoints(())] and "gcPins" not in d.status["tracking"]


def test_a_new_attempt_carries_its_pins_in_its_config_map():
    from sparkpoint.operator.decisions.model import PinCheckpoints

    spec = make_spec(restoreFrom={"checkpoint": "chk-000004"})
    d = decide(observe({}, [], spec=spec))
    assert d.of(CreateAttempt) and not d.of(PinCheckpoints)
    assert d.status["tracking"]["gcPins"] == ["chk-000004"]


def test_a_runtime_that_exits_under_policy_never_fails_though_the_gc_sidecar_keeps_the_pod_running():
    never = make_spec(restart={"policy": "Never"})
    d = decide(observe(running(stableSpec=spec_key(never)), [pod(exit_code=2, ready=False)], spec=never))
    assert d.status["phase"] == "Failed" and "exit 2" in d.status["lastFailure"]["message"]
    assert [a.name for a in d.of(DeletePod)] == ["job-1"]


# --- upgradeMode says how to upgrade: changing it alone is no upgrade ----------------------------------
def test_an_upgrade_mode_edit_alone_does_not_restart_the_job():
    old = make_spec(upgradeMode="savepoint")
    st = running(stableSpec=spec_key(old), stableSpecDoc=stable_doc(old), attemptSpec=spec_key(old))
    d = decide(observe(st, [pod()], runtime=RUNTIME, spec=make_spec(upgradeMode="last-checkpoint"), generation=2))
    assert d.status["phase"] == "Running" and not d.of(StopRuntime) and not d.of(DeletePod)


def test_spec_keys_an_earlier_operator_wrote_still_name_the_running_spec():
    """Earlier operators hashed upgradeMode into the key: their status must not read as a spec change
    (an operator upgrade would restart every job)."""
    import hashlib
    import json

    spec = make_spec()
    doc = spec.model_dump(by_alias=True, mode="json")
    for name in ("state", "savepoint", "restart", "restoreFrom", "upgradeTimeout",
                 "podTemplate", "restartNonce", "serviceAccountName", "standby"):  # (the last four: fields those operators did not have)
        doc.pop(name, None)
    doc["checkpoint"].pop("triggerNonce")  # nor this one (issue 44)
    doc["gc"].pop("memory")  # nor this one (issue 39)
    legacy = hashlib.sha256(json.dumps(doc, sort_keys=True).encode()).hexdigest()[:16]
    assert legacy != spec_key(spec)
    st = running(stableSpec=legacy, stableSpecDoc=stable_doc(spec), attemptSpec=legacy)
    d = decide(observe(st, [pod()], runtime=RUNTIME, spec=spec))
    assert d.status["phase"] == "Running" and not d.of(StopRuntime) and not d.of(DeletePod)
