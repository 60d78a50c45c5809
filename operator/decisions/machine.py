"""The operator's decisions as one pure function: `decide(observed) -> Decision` (docs/design.md §11).

The Decision holds the whole next status and a list of small idempotent actions; reconcile.py
applies the status first, then the actions, so an operator killed in between finds in status what
it meant to do and does it again (creating an existing pod is a no-op), never a second attempt.
Bookkeeping that must survive an operator restart lives in status.tracking.
"""

from __future__ import annotations

from sparkpoint.runtime.spec import RestoreFrom, parse_duration

from . import checkpoints as cp
from . import standby
from .hot_node import pin_hot_volume_node
from .job_savepoints import follow_savepoint, periodic_savepoints
from .lost_attempt import attempt_lost, forget_gone_pods
from .model import (
    CheckpointResult,
    CreateAttempt,
    Decision,
    Observed,
    PinCheckpoints,
    PodObs,
    PromoteStandby,
    StopRuntime,
    TriggerCheckpoint,
    TriggerSavepoint,
)
from .pod_failures import drain_interrupted, local_restarts, pod_lost, restarts_unseen
from .rescale import refuse_state_change, report_rescale, rescale_failed
from .status import apply_conditions
from .status_model import (
    Drain,
    PendingSavepoint,
    PendingTrigger,
    Point,
    SavepointRecord,
    UpgradeInFlight,
)
from .step import (  # noqa: F401  (spec_key, backoff_seconds, DRAIN_GRACE: used by reconcile and tests)
    DRAIN_GRACE,
    POLL,
    SAVEPOINTS_SHOWN,
    Step,
    backoff_seconds,
    drain_then_remove,
    is_spec,
    point_tag,
    spec_key,
)
from .upgrade import (
    begin_upgrade,
    mark_stable,
    note_rejected_spec,
    replace_pending,
    roll_back_if_late,
    roll_back_unstarted,
)


def decide(obs: Observed) -> Decision:
    run = Step(obs)
    refuse_state_change(run)  # before anything reads run.spec
    run.st.restarts = run.st.restarts  # always written: the Restarts printer column
    _record_store_facts(run)
    _adopt_newer_attempt(run)
    forget_gone_pods(run)
    pin_hot_volume_node(run)
    note_rejected_spec(run)
    drain_interrupted(run)
    phase = run.st.phase
    if phase is None:
        _note_inherited_state(run)
        _start_when_clear(run)
    elif phase in ("Failed", "Finished"):
        _terminal(run)
    elif obs.spec.state == "suspended" or phase == "Suspended":
        _suspend_or_resume(run)
    elif phase in ("Recovering", "Upgrading"):
        _between_attempts(run)
    else:
        _attempt_running(run)
    standby.tend(run)
    _pin_restore_points(run)
    run.st.observed_generation = obs.generation
    apply_conditions(run.st, obs.generation, obs.now)
    run.d.status, run.d.state = run.st.document(), run.st
    return run.d


def _pin_restore_points(run: Step) -> None:
    """Checkpoints an attempt may still be started from (the user's restoreFrom, the lineage, a
    next or rollback point) are pinned in the GC sidecar, so retention does not prune one before
    the attempt that needs it starts."""
    tr = run.tr
    points: list[RestoreFrom | Point | None] = [
        run.spec.restore_from, tr.lineage.point if tr.lineage else None, tr.next_point, tr.rollback_point,
        tr.upgrade.rollback_point if tr.upgrade else None, tr.attempt_point]
    pins = sorted({p.checkpoint for p in points if p is not None and p.checkpoint})
    if pins == (tr.gc_pins or []):
        return
    tr.gc_pins = pins or None
    # a new attempt's ConfigMap has them (a promoted standby's attempt has no new ConfigMap)
    if (run.current is not None or run.d.of(PromoteStandby)) and not run.d.of(CreateAttempt):
        run.d.actions.append(PinCheckpoints(tuple(pins)))


def _note_inherited_state(run: Step) -> None:
    """A new job whose store prefix already holds checkpoints (an earlier StreamingJob of the same
    name and namespace, deleted with gc.onDelete retain) resumes from them, as the runtime does
    without restoreFrom; say so, and how to start without state instead."""
    if run.attempt or run.spec.restore_from or not run.obs.store_checkpoints:
        return
    newest = run.obs.store_checkpoints[-1]
    run.d.emit("Normal", "ResumingExistingCheckpoints",
               f"the store already holds checkpoints of this job (newest {newest.id}, batch {newest.batch}), "
               "left by an earlier StreamingJob of this name: attempt 1 resumes from them. To start "
               "without state, set spec.restoreFrom.fresh to a new name")


def _adopt_newer_attempt(run: Step) -> None:
    """A pod newer than status.attempt means a status write was lost after its pod was created:
    take it as the current attempt rather than start yet another one."""
    newest = max((p.attempt for p in run.obs.pods), default=0)
    if newest > run.attempt:
        run.attempt = newest
        run.current = next(p for p in run.obs.pods if p.attempt == newest)
        run.st.attempt, run.st.pod = newest, run.current.name
        if run.st.phase in (None, "Recovering", "Upgrading"):
            run.st.phase = "Pending"


def _record_store_facts(run: Step) -> None:
    """Merge what the store lists and the runtime reports into status. History belongs to one
    storage URL: after checkpoint.storage.url changes, the old store's (higher) ids would otherwise
    keep the newest ten places and latestCheckpoint would never move again."""
    obs, tr, url = run.obs, run.tr, run.storage_url()
    if (tr.history_storage or url) != url:
        run.st.clear("checkpoints", "latest_checkpoint")
        tr.clear("bad_restore_points")
    tr.history_storage = url
    runtime_fact = cp.fact_from_runtime((obs.runtime or {}).get("latestCheckpoint"))
    if (tr.attempt_storage or url) != url:  # an attempt still writing to the old storage
        runtime_fact = None
    history = cp.merge_history(run.st, obs.store_checkpoints or [], [runtime_fact] if runtime_fact else [])
    if history:
        run.st.checkpoints = [f.to_record() for f in history]
        run.st.latest_checkpoint = history[-1].to_record()
    if tr.bad_restore_points and runtime_fact and cp.number(runtime_fact.id) > cp.number(
            tr.blamed_at_checkpoint or ""):
        # The runtime completed a checkpoint newer than any known at the blame: the history moved
        # on from the blamed points, and the blame would only skew the next choice.
        tr.clear("bad_restore_points", "blamed_at_checkpoint")
    if obs.store_savepoints is not None:
        run.st.savepoints = [SavepointRecord.model_validate(s) for s in obs.store_savepoints[-SAVEPOINTS_SHOWN:]]


def _pods_gone(run: Step, drain: bool) -> bool:
    """Remove the job's pods (a draining one may finish its drain first); True once none is left."""
    if drain:
        drain_then_remove(run)
    else:
        run.remove_pods()
    return not run.pods_left()


def _start_when_clear(run: Step, drain: bool = False) -> None:
    """Start the next attempt once no pod is left and a drain's savepoint is listed; until then
    wait, keeping the chosen point's bookkeeping."""
    if not _pods_gone(run, drain):
        return
    if run.awaiting_savepoint():
        run.requeue(POLL)
        return
    run.start_attempt(run.restore_point())
    standby.promote_instead(run)  # spec.standby: a fitting standby becomes the new attempt instead of a pod


def _terminal(run: Step) -> None:
    """Failed/Finished stay so until the user changes the spec (a new generation). The edit is
    recorded as Recovering at once, so pods that are slow to go (a sidecar, Terminating) delay
    the new attempt but never make the edit forgotten."""
    failed = run.tr.failed_generation
    if (failed is not None and run.obs.generation != failed) or (
            run.st.phase == "Finished" and run.obs.generation != run.st.observed_generation):
        run.tr.restart_times = []
        run.tr.failure_streak = 0
        run.tr.clear("failed_generation")
        # The edit answers "repair the store or change spec.restoreFrom": the point the spec names
        # now is tried again (it fails again naming it), never skipped silently for an older one.
        users = point_tag(run.spec.restore_from)
        if users and users in (run.tr.bad_restore_points or []):
            run.tr.bad_restore_points = [b for b in run.tr.bad_restore_points or [] if b != users] or None
        run.tr.next_attempt_at = run.now
        run.set_phase("Recovering", "SpecChanged", f"spec generation {run.obs.generation} edited after "
                                                   f"{run.st.phase}: starting a new attempt")
        _between_attempts(run)
        return
    run.remove_pods()
    run.requeue(60)


def _suspend_or_resume(run: Step) -> None:
    if run.spec.state == "running":  # resume from the suspend savepoint (or the latest checkpoint)
        _start_when_clear(run, drain=True)
        return
    if run.st.phase != "Suspended":
        pod = run.current
        if pod:
            restarts_unseen(run, pod)  # (an OOM kill before the suspend is reported, never lost)
        if pod and pod.can_drain:
            name = f"suspend-{run.obs.generation}"
            run.d.actions.append(StopRuntime(savepoint=name))
            run.tr.drain = Drain(at=run.now, restarts=pod.restart_count)
            run.choose_point("restore_target", name)
        if run.tr.upgrade_deadline is not None:
            # A new spec on trial is suspended before it was Ready: its trial starts again, with a new
            # deadline, at the attempt the resume creates (not the time spent suspended).
            run.tr.upgrade = UpgradeInFlight(rollback_point=run.tr.rollback_point)
            run.tr.clear("upgrade_deadline", "rollback_point")
        run.set_phase("Suspended", "Suspending", "draining with a savepoint" if pod and pod.can_drain else "no running pod")
    drain_then_remove(run)


def _between_attempts(run: Step) -> None:
    if not _pods_gone(run, drain=run.st.phase == "Upgrading"):
        return
    if roll_back_unstarted(run):  # an upgrade whose pods never even started (refused, crash loop)
        return
    wait = (run.tr.next_attempt_at or 0) - run.now
    if wait > 0:
        run.requeue(wait)
        return
    _start_when_clear(run)


def _attempt_running(run: Step) -> None:
    obs, tr, pod = run.obs, run.tr, run.current
    if pod is None:
        refused = tr.create_failed
        if refused and refused.attempt == run.attempt:  # the API server refused the pod
            tr.clear("create_failed")
            run.fail(refused.reason or "CreateFailed",
                     f"pod {run.st.pod} could not be created: {refused.message or ''}".strip())
        elif tr.pod_seen:
            run.fail("PodDeleted", f"pod {run.st.pod} is gone")
        else:  # status says the attempt exists but its pod was never created (or not yet seen)
            run.st.pod = f"{run.obs_name()}-{run.attempt}"  # (a standby promoted as it, gone unseen: a cold pod)
            run.d.actions.append(run.create_action(run.recreate_point()))
            run.requeue(POLL)
        return
    if not tr.pod_seen:
        run.consumed_points()
    tr.pod_seen = True
    if rescale_failed(run, pod) or pod_lost(run, pod) or attempt_lost(run, pod) or standby.follow_promotion(run, pod):
        return
    if local_restarts(run, pod):
        return
    if pod.phase == "Succeeded" or pod.exit_code == 0:  # exit 0 is not restarted; the GC sidecar may still run
        if run.spec.restart.policy == "Always":
            run.fail("Exited", f"the runtime of {pod.name} stopped on its own (exit 0); restart.policy Always",
                     budget=False)
        else:
            run.set_phase("Finished", "Finished", "the runtime stopped on its own (exit 0)")
        return
    tr.pod_ready = pod.ready
    if run.st.phase == "Pending":
        if roll_back_if_late(run, pod):
            return
        if tr.attempt_spec is not None and not is_spec(tr.attempt_spec, run.spec):
            replace_pending(run)  # an edit fixes what keeps this attempt from starting (image, resources)
            return
        if not pod.ready:
            _note_store_wait(run)
            run.requeue(POLL)
            return
        tr.running_since = obs.now
        mark_stable(run)
        run.set_phase("Running", "Running", f"attempt {run.attempt} is ready")
    if tr.stable_spec is None:
        mark_stable(run)
    if not is_spec(tr.stable_spec, run.spec):
        begin_upgrade(run, pod)
        return
    if _restart_requested(run):
        return
    _report_restore(run)
    report_rescale(run)
    _checkpoints(run, pod)


def _restart_requested(run: Step) -> bool:
    """spec.restartNonce changed since the attempt started: a new attempt from the latest checkpoint
    (the runtime's own choice, as after any restart), no savepoint, no spec change, no restart budget
    spent. The pod goes at once, as a lost pod's would: what it did since its last checkpoint is
    replayed from the sources."""
    nonce = run.spec.restart_nonce
    if nonce == run.tr.restart_nonce:
        return False
    run.tr.restart_nonce = nonce
    run.tr.next_attempt_at = run.now
    run.set_phase("Recovering", "RestartRequested",
                  f"spec.restartNonce changed to {nonce}: restarting from the latest checkpoint")
    run.remove_pods()
    return True


def _checkpoint_requested(run: Step) -> bool:
    """spec.checkpoint.triggerNonce changed since the operator last answered it: a checkpoint now, once
    the trigger in flight (if any) has ended, as that one may have begun before the request. One
    trigger answers both a due interval and the nonce."""
    nonce = run.spec.checkpoint.trigger_nonce
    if nonce is None or nonce == run.tr.checkpoint_nonce or run.tr.pending_trigger:
        return False
    run.tr.checkpoint_nonce = nonce
    run.d.emit("Normal", "CheckpointTriggered", f"checkpoint requested (checkpoint.triggerNonce {nonce})")
    return True


def _note_store_wait(run: Step) -> None:
    """The runtime waits for an unreachable checkpoint store before it restores (rather than
    crash-looping through the restart budget): say so once per attempt."""
    if (run.obs.runtime or {}).get("phase") == "waiting_for_store" and run.tr.store_wait_reported != run.attempt:
        run.tr.store_wait_reported = run.attempt
        run.d.emit("Warning", "WaitingForStore", f"attempt {run.attempt} waits for its checkpoint store, which is "
                                                 "unreachable; it restores and starts once the store answers")


def _report_restore(run: Step) -> None:
    restore = (run.obs.runtime or {}).get("restore")
    if not restore:
        return
    run.st.restore = restore
    if restore.get("fallbacks") and run.tr.fallback_reported != run.attempt:
        run.tr.fallback_reported = run.attempt
        failed = "; ".join(f"{f.get('checkpoint') or f.get('savepoint')}: {f.get('error')}" if isinstance(f, dict)
                           else str(f) for f in restore["fallbacks"])
        run.d.emit("Warning", "RestoreFallback", f"attempt {run.attempt} restored from "
                                                 f"{restore.get('checkpoint') or restore.get('source')} after failing: {failed}")


def _checkpoints(run: Step, pod: PodObs) -> None:
    spec, tr, now = run.spec, run.tr, run.now
    interval, timeout = parse_duration(spec.checkpoint.interval), parse_duration(spec.checkpoint.timeout)
    latest_at = cp.parse_time(run.st.latest_checkpoint.completed_at if run.st.latest_checkpoint else None)
    pending = tr.pending_trigger
    if pending:
        result = cp.follow_trigger(pending, run.obs.runtime, latest_at, timeout, now)
        if result:
            run.d.actions.append(CheckpointResult(result))
            tr.clear("pending_trigger")
        else:
            run.requeue(POLL)
    if pod.ready and run.obs.runtime is not None:
        lag = cp.trigger_lag(tr, interval, now)
        if _checkpoint_requested(run) and lag is None:
            lag = 0.0  # asked for now: not late
        if lag is not None:
            run.d.actions.append(TriggerCheckpoint(lag))
            tr.last_trigger_at, tr.pending_trigger = now, PendingTrigger(at=now)
            run.requeue(POLL)
        nonce = spec.savepoint.trigger_nonce
        if nonce is not None and nonce != tr.savepoint_nonce:
            tr.savepoint_nonce = nonce
            tr.pending_savepoint = PendingSavepoint(name=f"nonce-{nonce}", at=now, tries=1)
            run.d.actions.append(TriggerSavepoint(f"nonce-{nonce}"))
            run.d.emit("Normal", "SavepointTriggered", f"savepoint nonce-{nonce} (triggerNonce {nonce})")
        else:
            follow_savepoint(run)
            periodic_savepoints(run)
    run.requeue(max(POLL, cp.next_trigger_in(tr, interval, now)))
    healthy, reason = cp.checkpoint_healthy(latest_at, tr.running_since, interval, now)
    was = tr.checkpoint_healthy
    tr.checkpoint_healthy, tr.checkpoint_reason = healthy, reason
    if was and not healthy:
        run.d.emit("Warning", "CheckpointUnhealthy",
                   f"no completed checkpoint for {cp.UNHEALTHY_INTERVALS} intervals of {spec.checkpoint.interval}")
    elif healthy and not was:
        run.d.emit("Normal", "CheckpointHealthy", "checkpoints complete again")
