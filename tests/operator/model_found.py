"""The machine model's FOUND rows (test_machine_model.py replays each every run): sequences of its
rules that broke an invariant once, shrunk, and rows someone thought of that keep a decision exercised.
shrink_model.py and fuzz_model.py print new ones in this shape.
"""

from __future__ import annotations

from model_world import IMAGES

# Violations the model found, replayed every run (docs/reliability.md, "The machine model").
FOUND = {
    "index loses a draining pod: a second attempt beside it": [
        ("edit_upgrade_mode", {"mode": "last-checkpoint"}), ("world_goes_quiet", {}),
        ("edit_image", {"image": IMAGES[1]}), ("operator_round", {}),
        ("pod_vanishes_from_index", {"i": 0}), ("operator_round", {})],
    "restoreFrom named after a suspend's drain: the suspend savepoint wins": [
        ("world_goes_quiet", {}), ("suspend_or_resume", {"state": "suspended"}), ("world_goes_quiet", {}),
        ("suspend_or_resume", {"state": "running"}), ("edit_restore_from", {"kind": "checkpoint", "i": 0}),
        ("world_goes_quiet", {})],
    "restoreFrom named during a stateless upgrade: never applied": [
        ("world_goes_quiet", {}), ("world_progresses", {"n": 8}), ("edit_upgrade_mode", {"mode": "stateless"}),
        ("operator_round", {}),
        ("edit_restore_from", {"kind": "checkpoint", "i": 0}), ("world_goes_quiet", {})],
    "rollback of an upgrade that changed the storage URL: the stable spec starts without state": [
        ("edit_upgrade_mode", {"mode": "last-checkpoint"}), ("world_goes_quiet", {}), ("world_progresses", {"n": 8}),
        ("edit_storage_url", {"i": 1}), ("edit_image", {"image": IMAGES[2]}), ("world_goes_quiet", {})],
    "back to an earlier storage URL: the lineage of the other store names an older checkpoint here": [
        ("edit_storage_url", {"i": 1}), ("world_goes_quiet", {}), ("world_progresses", {"n": 4}),
        ("edit_storage_url", {"i": 0}), ("world_goes_quiet", {}), ("world_progresses", {"n": 8}),
        ("edit_image", {"image": IMAGES[1]}), ("world_goes_quiet", {}), ("world_progresses", {"n": 8}),
        ("edit_storage_url", {"i": 1}), ("world_goes_quiet", {}), ("world_progresses", {"n": 8}),
        ("edit_storage_url", {"i": 0}), ("world_goes_quiet", {})],
}

# Found by 100,000 steps (seed-free runs of make test-full, 2026-11-25), shrunk by hand-run delta debugging:
FOUND["a rollback to a spec on another storage URL: the operator listed the CR's store, mixing its ids in"] = [
    ("edit_storage_url", {"i": 1}), ("world_progresses", {"n": 8}), ("edit_storage_url", {"i": 0}),
    ("world_goes_quiet", {}), ("edit_image", {"image": IMAGES[2]}), ("edit_storage_url", {"i": 1}),
    ("world_goes_quiet", {}), ("edit_storage_url", {"i": 0}), ("world_progresses", {"n": 8})]
FOUND["after a rollback across stores, an upgrade's drain savepoint is not seen and an older one restored"] = [
    ("edit_storage_url", {"i": 1}), ("world_progresses", {"n": 8}), ("edit_image", {"image": IMAGES[2]}),
    ("edit_storage_url", {"i": 0}), ("world_goes_quiet", {}), ("edit_image", {"image": IMAGES[1]}),
    ("operator_rounds", {"n": 2}), ("edit_image", {"image": IMAGES[2]}), ("world_goes_quiet", {})]
FOUND["a spec edited during a rollback is not on trial, and the rejected spec re-applied is not reported"] = [
    ("edit_storage_url", {"i": 1}), ("world_progresses", {"n": 7}), ("edit_image", {"image": IMAGES[2]}),
    ("operator_rounds", {"n": 2}), ("world_progresses", {"n": 6}), ("edit_storage_url", {"i": 0}),
    ("world_goes_quiet", {}), ("edit_storage_url", {"i": 1}), ("world_goes_quiet", {})]

FOUND["a failed spec.restoreFrom named again after an edit is skipped for a checkpoint, silently"] = [
    ("world_progresses", {"n": 4}), ("edit_restore_from", {"i": 0, "kind": "missing"}),
    ("pod_deleted_externally", {"i": 1}), ("world_goes_quiet", {}), ("edit_restore_from", {"i": 6, "kind": "savepoint"}),
    ("edit_restore_from", {"i": 5, "kind": "missing"}), ("world_goes_quiet", {})]
FOUND["a failed spec.restoreFrom that came with an upgrade is replaced by its rollback after an edit"] = [
    ("world_progresses", {"n": 8}), ("pod_deleted_externally", {"i": 0}), ("edit_job_args", {"n": 1}),
    ("edit_restore_from", {"i": 4, "kind": "missing"}), ("world_goes_quiet", {}), ("time_passes", {"seconds": 600.0}),
    ("savepoint_nonce", {}), ("world_goes_quiet", {})]

FOUND["restoreFrom removed while suspended: the suspend savepoint is dropped for no point at all"] = [
    ("edit_restore_from", {"i": 5, "kind": "fresh"}), ("suspend_or_resume", {"state": "suspended"}),
    ("world_goes_quiet", {}), ("edit_restore_from", {"i": 0, "kind": "none"}),
    ("suspend_or_resume", {"state": "running"}), ("operator_rounds", {"n": 3})]
FOUND["a new spec suspended while on trial: the trial's deadline runs out while suspended, a rollback starts empty"] = [
    ("world_progresses", {"n": 3}), ("edit_restart_policy", {"policy": "Never"}), ("runtime_crashes", {"code": 1, "i": 0}),
    ("operator_rounds", {"n": 2}), ("suspend_or_resume", {"state": "suspended"}), ("edit_job_args", {"n": 2}),
    ("world_progresses", {"n": 5}), ("world_progresses", {"n": 3}), ("suspend_or_resume", {"state": "running"}),
    ("operator_rounds", {"n": 4}), ("world_progresses", {"n": 1})]

FOUND["restoreFrom named while a resumed attempt is Pending and replaced: the suspend savepoint wins"] = [
    ("suspend_or_resume", {"state": "suspended"}), ("world_goes_quiet", {}), ("suspend_or_resume", {"state": "running"}),
    ("operator_round", {}), ("edit_image", {"image": IMAGES[1]}), ("edit_restore_from", {"i": 0, "kind": "checkpoint"}),
    ("world_goes_quiet", {})]

FOUND["a restoreFrom named during a trial whose pods are refused: the rollback starts empty over it"] = [
    ("edit_storage_url", {"i": 1}), ("world_goes_quiet", {}), ("edit_image", {"image": IMAGES[1]}),
    ("pod_deleted_externally", {"i": 0}), ("operator_rounds", {"n": 4}), ("terminations_finish", {}),
    ("api_server_refuses_pod_creates", {"refuse": True}), ("operator_round", {}),
    ("edit_restore_from", {"i": 0, "kind": "missing"}), ("operator_rounds", {"n": 6}), ("world_progresses", {"n": 7}),
    ("api_server_refuses_pod_creates", {"refuse": False}), ("edit_restore_from", {"i": 0, "kind": "none"}),
    ("edit_restore_from", {"i": 0, "kind": "missing"}), ("world_progresses", {"n": 1})]
FOUND["the rejected spec re-applied while the runtime restarts in place: reported by Event"] = [
    ("world_progresses", {"n": 5}), ("edit_image", {"image": IMAGES[2]}), ("world_goes_quiet", {}),
    ("edit_storage_url", {"i": 1}), ("runtime_crashes", {"code": 137, "i": 0}), ("edit_storage_url", {"i": 0}),
    ("world_goes_quiet", {})]

FOUND["a savepoint named again after the history moved on: a new pod resumed its first application's checkpoint"] = [
    ("edit_job_args", {"n": 1}), ("world_goes_quiet", {}), ("edit_job_args", {"n": 2}), ("world_goes_quiet", {}),
    ("edit_restart_policy", {"policy": "Never"}), ("edit_job_args", {"n": 1}), ("world_goes_quiet", {}),
    ("edit_image", {"image": IMAGES[2]}), ("world_goes_quiet", {}), ("edit_restore_from", {"i": 5, "kind": "savepoint"}),
    ("edit_image", {"image": IMAGES[0]}), ("world_goes_quiet", {}), ("node_lost", {"i": 0}), ("world_goes_quiet", {})]

FOUND["resumed onto another storage URL whose pods are refused: the rollback skips the suspend savepoint"] = [
    ("world_progresses", {"n": 7}), ("suspend_or_resume", {"state": "suspended"}), ("world_goes_quiet", {}),
    ("api_server_refuses_pod_creates", {"refuse": True}), ("edit_storage_url", {"i": 1}), ("world_progresses", {"n": 5}),
    ("time_passes", {"seconds": 60.0}), ("suspend_or_resume", {"state": "running"}), ("world_progresses", {"n": 6}),
    ("world_goes_quiet", {})]
FOUND["a failed restoreFrom that came with a storage move: the later rollback lost the drain's savepoint"] = [
    ("savepoint_nonce", {}), ("world_progresses", {"n": 3}), ("edit_restore_from", {"i": 0, "kind": "savepoint"}),
    ("edit_storage_url", {"i": 1}), ("world_goes_quiet", {}), ("api_server_refuses_pod_creates", {"refuse": True}),
    ("edit_restore_from", {"i": 0, "kind": "none"}), ("world_progresses", {"n": 1}), ("time_passes", {"seconds": 60.0}),
    ("world_goes_quiet", {})]

FOUND["created again with restoreFrom a savepoint the earlier job applied: the earlier job's record said applied"] = [
    ("world_progresses", {"n": 8}), ("edit_job_args", {"n": 3}), ("world_progresses", {"n": 7}), ("delete_job", {}),
    ("world_goes_quiet", {}), ("edit_restore_from", {"i": 4, "kind": "savepoint"}), ("delete_job", {}),
    ("world_goes_quiet", {})]

FOUND["a trial begun while the newest manifest was unreadable: its rollback started empty over a readable checkpoint"] = [
    ("savepoint_nonce", {}), ("world_goes_quiet", {}), ("node_lost", {"i": 0}),
    ("api_server_refuses_pod_creates", {"refuse": True}), ("edit_job_args", {"n": 1}), ("newest_manifest_unreadable", {}),
    ("world_progresses", {"n": 4}), ("manifests_readable_again", {}), ("world_progresses", {"n": 6}),
    ("world_goes_quiet", {})]
FOUND["the same after a re-created job: the rollback point chosen then was older than the unreadable newest"] = [
    ("savepoint_nonce", {}), ("world_progresses", {"n": 4}), ("delete_job", {}), ("world_goes_quiet", {}),
    ("node_lost", {"i": 0}), ("api_server_refuses_pod_creates", {"refuse": True}), ("edit_job_args", {"n": 1}),
    ("newest_manifest_unreadable", {}), ("world_progresses", {"n": 4}), ("manifests_readable_again", {}),
    ("world_progresses", {"n": 6}), ("world_goes_quiet", {})]
FOUND["a failed restoreFrom named again after another point was applied: skipped for the newest checkpoint"] = [
    ("world_progresses", {"n": 8}), ("edit_restore_from", {"i": 0, "kind": "missing"}), ("pod_deleted_externally", {"i": 0}),
    ("world_progresses", {"n": 7}), ("edit_restore_from", {"i": 8, "kind": "checkpoint"}), ("world_goes_quiet", {}),
    ("edit_restore_from", {"i": 4, "kind": "missing"}), ("pod_deleted_externally", {"i": 0}), ("world_goes_quiet", {})]
FOUND["a rollback onto a restoreFrom named during the trial, removed before the attempt: the drain's savepoint lost"] = [
    ("edit_storage_url", {"i": 1}), ("world_goes_quiet", {}), ("api_server_refuses_pod_creates", {"refuse": True}),
    ("edit_storage_url", {"i": 0}), ("world_progresses", {"n": 8}), ("operator_rounds", {"n": 3}),
    ("edit_restore_from", {"i": 1, "kind": "fresh"}), ("time_passes", {"seconds": 60.0}), ("operator_round", {}),
    ("api_server_refuses_pod_creates", {"refuse": False}), ("edit_restore_from", {"i": 4, "kind": "savepoint"}),
    ("world_progresses", {"n": 4})]
FOUND["the same when the rollback's attempt is refused: its create consumed the stable spec's point"] = [
    ("edit_storage_url", {"i": 1}), ("world_goes_quiet", {}), ("api_server_refuses_pod_creates", {"refuse": True}),
    ("edit_storage_url", {"i": 0}), ("world_progresses", {"n": 8}), ("edit_restore_from", {"i": 1, "kind": "fresh"}),
    ("time_passes", {"seconds": 60.0}), ("world_progresses", {"n": 3}), ("operator_round", {}),
    ("api_server_refuses_pod_creates", {"refuse": False}), ("edit_restore_from", {"i": 4, "kind": "savepoint"}),
    ("world_progresses", {"n": 4})]
FOUND["an attempt's pod deleted before it was seen, restoreFrom named meanwhile: created again from the old point"] = [
    ("world_progresses", {"n": 4}), ("node_lost", {"i": 3}), ("edit_restore_from", {"i": 6, "kind": "missing"}),
    ("world_goes_quiet", {}), ("world_progresses", {"n": 3}), ("edit_restore_from", {"i": 1, "kind": "savepoint"}),
    ("operator_round", {}), ("pod_deleted_externally", {"i": 3}), ("edit_restore_from", {"i": 3, "kind": "fresh"}),
    ("world_goes_quiet", {})]
FOUND["the user's restoreFrom applied, then removed: an older lineage point of the operator's came back"] = [
    ("world_progresses", {"n": 7}), ("edit_restore_from", {"i": 0, "kind": "missing"}), ("node_lost", {"i": 0}),
    ("world_goes_quiet", {}), ("edit_restore_from", {"i": 3, "kind": "none"}), ("suspend_or_resume", {"state": "suspended"}),
    ("world_goes_quiet", {}), ("edit_restore_from", {"i": 0, "kind": "savepoint"}),
    ("suspend_or_resume", {"state": "running"}), ("world_goes_quiet", {}), ("node_lost", {"i": 0}),
    ("edit_restore_from", {"i": 2, "kind": "none"}), ("world_progresses", {"n": 6})]
# A modelling error: crashes in place the operator sees only after a long absence are counted when seen.
FOUND["four crashes in place seen at once 20 minutes later: over the budget, as the operator counts them"] = [
    ("world_goes_quiet", {}), ("runtime_crashes", {"code": 1, "i": 0}), ("runtime_crashes", {"code": 137, "i": 1}),
    ("runtime_crashes", {"code": 137, "i": 2}), ("runtime_crashes", {"code": 137, "i": 3}),
    ("time_passes", {"seconds": 600.0}), ("time_passes", {"seconds": 30.0}), ("time_passes", {"seconds": 600.0}),
    ("world_goes_quiet", {})]
FOUND["a crash seen 20 minutes late, then three more: four failures in the window as the operator counts them"] = [
    ("world_goes_quiet", {}), ("runtime_crashes", {"code": 137, "i": 2}), ("time_passes", {"seconds": 600.0}),
    ("time_passes", {"seconds": 600.0}), ("world_goes_quiet", {}), ("runtime_crashes", {"code": 137, "i": 1}),
    ("runtime_crashes", {"code": 137, "i": 0}), ("runtime_crashes", {"code": 1, "i": 3}), ("world_goes_quiet", {})]

# A modelling error: the kubelet reports only a container's newest termination, so an OOM kill followed
# by another crash before any round looks is invisible to the operator (and to any client).
FOUND["an OOM kill overwritten by a crash in place before a round saw it: not held against the operator"] = [
    ("edit_image", {"image": IMAGES[2]}), ("status_writes_fail", {"n": 3}), ("world_progresses", {"n": 6}),
    ("runtime_oom_killed", {"i": 2}), ("world_goes_quiet", {})]
FOUND["the runtime OOM-killed while draining for an upgrade: reported as nothing, the drain waited its grace"] = [
    ("edit_image", {"image": IMAGES[2]}), ("world_progresses", {"n": 4}), ("edit_image", {"image": IMAGES[0]}),
    ("operator_rounds", {"n": 2}), ("world_progresses", {"n": 1}), ("world_progresses", {"n": 1}),
    ("edit_job_args", {"n": 1}), ("operator_rounds", {"n": 2}), ("runtime_oom_killed", {"i": 0}), ("operator_round", {})]
FOUND["an OOM kill in place no round saw, then a suspend: the drain began and the kill was never reported"] = [
    ("world_goes_quiet", {}), ("runtime_crashes", {"i": 0, "code": 1}), ("world_goes_quiet", {}),
    ("suspend_or_resume", {"state": "suspended"}), ("runtime_oom_killed", {"i": 1}), ("world_goes_quiet", {})]

# The finalizer's hot-volume cleanup (model_hot_volume.py), found by the short run once it was modelled:
FOUND["deleted again while the earlier job's cleanup pod of the name is Terminating: its success taken for this job's"] = [
    ("delete_job", {}), ("operator_round", {}), ("cleanup_pod_sticks_in_terminating", {"stuck": True}),
    ("time_passes", {"seconds": 600.0}), ("cleanup_pod_runs", {}), ("operator_rounds", {"n": 6}), ("delete_job", {}),
    ("world_goes_quiet", {})]

# Rows someone thought of, replayed beside the found ones: a decision the model must keep exercising.
# The hot volume's cleanup: executors outlive their driver pod for a garbage collector's pass, a cleanup
# pod fails or never starts (given up on after CLEANUP_FOR: the finalizer always goes).
RUNNING_DELETED = [("world_goes_quiet", {}), ("delete_job", {}), ("world_progresses", {"n": 3})]  # driver pod gone
FOUND["executors outlive their driver pod: the cleanup pod waits for them"] = [*RUNNING_DELETED, ("world_goes_quiet", {})]
FOUND["the cleanup pod fails: the directory stays with a Warning, the finalizer goes"] = [
    *RUNNING_DELETED, ("world_progresses", {"n": 2}), ("cleanup_pod_fails", {}), ("operator_round", {}),
    ("world_goes_quiet", {})]
FOUND["the cleanup pod never starts: given up on after CLEANUP_FOR"] = [
    *RUNNING_DELETED, ("world_progresses", {"n": 2}), ("cleanup_pod_hangs", {}), ("world_goes_quiet", {})]
FOUND["an executor stuck in Terminating: given up on after CLEANUP_FOR, the next job of the name removes it"] = [
    *RUNNING_DELETED, ("executor_sticks_in_terminating", {}), ("world_goes_quiet", {}), ("executors_let_go", {}),
    ("world_goes_quiet", {})]
FOUND["restoreFrom named while a pod runs: its checkpoint is pinned in the GC at once"] = [
    ("world_goes_quiet", {}), ("world_progresses", {"n": 6}), ("edit_restore_from", {"kind": "checkpoint", "i": 1}),
    ("operator_round", {})]

# Issue 43 (lost attempts): the rule set grew, and the derandomized run met an older gap.
FOUND["checkpoint.triggerNonce edited after a rollback: answered on the stable spec the job runs"] = [
    ("world_goes_quiet", {}), ("checkpoint_nonce", {}), ("edit_image", {"image": "sparkpoint:broken"}),
    ("world_progresses", {"n": 8}), ("checkpoint_nonce", {}), ("world_goes_quiet", {})]
FOUND["frozen past restart.lostAfter and thawed beside the next attempt: fenced out"] = [
    ("world_goes_quiet", {}), ("checkpoints_complete", {}), ("runtime_frozen_for", {"i": 0, "seconds": 30.0,
                                                                                    "thaw": True}),
    ("world_goes_quiet", {})]

# Issue 43 (standby attempts): found by the long random run.
FOUND["a frozen standby stuck in Terminating: its name is free again once it is force-deleted"] = [
    ("job_with_a_standby", {"on": True}), ("world_progresses", {"n": 6}), ("runtime_freezes", {"i": 0}),
    ("pod_sticks_in_terminating", {"i": 0}), ("world_goes_quiet", {})]
FOUND["restartNonce with a standby: new processes, not the standby started before the nonce"] = [
    ("job_with_a_standby", {"on": True}), ("world_goes_quiet", {}), ("restart_nonce_changes", {}),
    ("operator_round", {}), ("world_goes_quiet", {})]
FOUND["a standby restarted in place before its promotion: those restarts are not the attempt's failures"] = [
    ("job_with_a_standby", {"on": True}), ("world_goes_quiet", {}), *[("runtime_crashes", {"i": 0, "code": 1})] * 4,
    ("pod_deleted_externally", {"i": 1}), ("world_goes_quiet", {})]
# Both of its long run's standby findings (2026-11-28), shrunk: no standby needed. A state change refused
# (rescale.refuse_state_change) keeps the stable spec running, but reconcile listed the CR's store.
FOUND["a storage URL edit refused with a state store edit: the drain's savepoint in the stable store not restored"] = [
    ("world_goes_quiet", {}), ("edit_storage_url", {"i": 1}), ("operator_round", {}),
    ("edit_state_store_or_partitions", {"fresh": False, "partitions": 4, "store": "hdfs"}), ("world_goes_quiet", {})]
FOUND["the same edits while running: status.latestCheckpoint taken from the CR's store, not the stable one's"] = [
    ("world_progresses", {"n": 8}), ("edit_storage_url", {"i": 1}), ("world_goes_quiet", {}),
    ("edit_state_store_or_partitions", {"fresh": False, "partitions": 2, "store": "hdfs"}),
    ("edit_storage_url", {"i": 0}), ("operator_round", {}), ("edit_storage_url", {"i": 1}),
    ("world_progresses", {"n": 3})]
