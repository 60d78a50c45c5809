"""Upgrades (a spec change that needs a new pod) and their rollback. Pure.

upgradeMode savepoint drains with a savepoint the new attempt restores; last-checkpoint drains
with a final checkpoint; stateless deletes the pod at once and starts the new attempt without state
(restoreFrom.fresh). If the new attempt is not Ready within the upgrade timeout, or crash-loops
past maxRestarts before it was ever Ready, the job rolls back to the last spec that ran (kept in
status.tracking) and the restore point the upgrade started from, and that failed spec is not tried
again until edited.
"""

from __future__ import annotations

from . import checkpoints as cp
from .model import PodObs, StopRuntime
from .status_model import Drain, Failure, Point, UpgradeInFlight, same_point
from .step import DRAIN_GRACE, POLL, Step, drain_then_remove, point_tag, spec_key, stable_doc


def begin_upgrade(run: Step, pod: PodObs) -> None:
    mode = run.spec.upgrade_mode
    run.tr.clear("restore_target", "fresh_start")
    if mode == "stateless":  # the new attempt starts without state, not from the latest checkpoint
        run.choose_point("fresh_start", f"upgrade-{run.obs.generation}")
    if pod.can_drain and mode in ("savepoint", "last-checkpoint"):
        name = f"upgrade-{run.obs.generation}" if mode == "savepoint" else None
        run.d.actions.append(StopRuntime(savepoint=name))
        run.tr.drain = Drain(at=run.now, restarts=pod.restart_count)
        if name:
            run.choose_point("restore_target", name)
    else:
        run.tr.drain = Drain(at=run.now - DRAIN_GRACE)  # nothing to drain: delete at once
    run.tr.clear("next_attempt_at")
    # The stable spec's own point to roll back to: its drain's savepoint; else (chosen when the new
    # attempt starts, after the drain's final checkpoint) its newest checkpoint.
    target = run.tr.restore_target
    run.tr.upgrade = UpgradeInFlight(rollback_point=Point(savepoint=target) if target else None)
    run.set_phase("Upgrading", "Upgrading", f"spec changed (generation {run.obs.generation}); upgradeMode {mode}")
    drain_then_remove(run)


def roll_back_if_late(run: Step, pod: PodObs | None) -> bool:
    """The upgraded attempt is not Ready in time: go back to the last stable spec and the stable
    spec's own restore point (rollbackPoint: not the new spec's state, nor empty state after a
    stateless upgrade). True if a rollback began."""
    deadline = run.tr.upgrade_deadline
    if deadline is None or (pod is not None and pod.ready) or run.now < deadline or not run.tr.stable_spec_doc:
        return False
    run.tr.rejected_spec, run.tr.drain = spec_key(run.obs.spec), Drain(at=run.now - DRAIN_GRACE)
    run.tr.rejected_generation = run.obs.generation
    point = later_of(run.tr.rollback_point, newest_before_trial(run)) or Point(fresh=f"rollback-{run.attempt}")
    crashes = run.tr.upgrade_crash_loop
    run.tr.clear("upgrade_deadline", "rollback_point", "fresh_start", "restore_target", "next_point",
                 "upgrade_crash_loop")
    users = run.spec.restore_from
    if users is not None and run.lineage_point() == users:
        # The user named a point during the trial that no attempt has applied yet: the stable spec
        # starts from it (lineage_point), not from a point chosen over it. The stable spec's own point
        # is kept as chosen over no point: it stands if the user removes theirs before the next attempt.
        if point.newest_in is None:
            run.tr.next_point, run.tr.chosen_over = point, Point()
        point = Point.of(users) or point
    elif point.newest_in is None:  # (else the stable spec's own store: its runtime restores the newest there)
        run.choose_point("next_point", point)
    refused = run.st.phase == "Recovering"
    why = (f"restarted {crashes} times before it was Ready" if crashes
           else "could not start" if refused else f"was not Ready within {run.upgrade_timeout():g}s")
    message = (f"attempt {run.attempt} with the new spec {why}; rolling back to the last stable spec from "
               f"{point_tag(point) or 'the newest checkpoint in ' + str(point.newest_in)}")
    run.st.last_failure = Failure(reason="UpgradeFailed" if crashes or refused else "UpgradeTimeout",
                                  message=message, at=cp.iso(run.now))
    run.tr.next_attempt_at = run.now
    run.set_phase("Upgrading", "UpgradeRolledBack", message, warning=True)
    drain_then_remove(run)
    run.requeue(POLL)
    return True


def newest_before_trial(run: Step) -> Point | None:
    """A rollback point for a trial that began knowing none (the store's newest manifest was
    unreadable then): the newest checkpoint now known that completed before the trial's first
    attempt was created, so the stable spec's own state, not the new spec's."""
    since, bad = run.tr.trial_since, run.bad_points()
    if since is None or (run.tr.attempt_storage or run.storage_url()) != run.storage_url():
        return None
    older = [f for f in run.known_checkpoints() if f"checkpoint:{f.id}" not in bad
             and (cp.parse_time(f.completed_at) or since + 1) <= since]
    return Point(checkpoint=older[-1].id) if older else None


def later_of(chosen: Point | None, before_trial: Point | None) -> Point | None:
    """The rollback point chosen when the trial began, unless a checkpoint completed before the
    trial is newer: the store's newest manifest may have been unreadable when the trial began."""
    if before_trial is None or chosen is not None and not chosen.checkpoint:
        return chosen  # (a drain's savepoint is the stable spec's last word)
    if chosen is None or cp.number(before_trial.checkpoint or "") > cp.number(chosen.checkpoint or ""):
        return before_trial
    return chosen


def roll_back_unstarted(run: Step) -> bool:
    """Between attempts of an upgrade whose deadline passed without a Ready attempt (its pods were
    refused, or it crash-looped past maxRestarts): roll back now. The next round runs the stable
    spec (effective_spec sees rejectedSpec)."""
    return run.upgrade_unproven() and roll_back_if_late(run, None)


def replace_pending(run: Step) -> None:
    """The spec changed while the attempt was not yet Ready: a new attempt with the new spec from the
    same point (not counted as a restart). If there is a stable spec, the new one is on trial as
    an upgrade (a deadline, then rollback), never recorded as rejected before it ran."""
    point = run.tr.restore_from  # a point the operator chose; the spec's own is chosen again anyway
    over = run.tr.lineage.over if run.tr.lineage else None
    if point and same_point(over or Point(), run._spec_point() or Point()):  # (else the user named one since)
        run.choose_point("next_point", point)  # restore_point takes it for exactly the next attempt
    if run.tr.stable_spec_doc:
        run.tr.upgrade = UpgradeInFlight(rollback_point=run.tr.rollback_point)
        run.tr.clear("rejected_spec")
    run.tr.clear("upgrade_deadline")
    run.tr.next_attempt_at = run.now
    run.set_phase("Recovering", "SpecChanged", f"spec generation {run.obs.generation} changed before attempt "
                                               f"{run.attempt} was Ready: replacing it")
    run.remove_pods()


def mark_stable(run: Step) -> None:
    """The attempt is Ready: its spec becomes the one to roll back to."""
    run.tr.clear("upgrade_deadline", "rollback_point")
    run.tr.stable_spec = spec_key(run.spec)
    if not run.rolled_back:
        run.tr.stable_spec_doc = stable_doc(run.spec)
        run.tr.clear("rejected_spec")


def note_rejected_spec(run: Step) -> None:
    """The CR was edited back to a spec an upgrade rolled back from: the job keeps running the
    last stable spec. Say so once per generation, or the edit looks ignored."""
    if run.rolled_back and not run.change_refused and run.tr.rejected_generation not in (None, run.obs.generation):
        run.tr.rejected_generation = run.obs.generation
        message = (f"spec generation {run.obs.generation} is the spec an upgrade rolled back from; the job "
                   "keeps running the last stable spec until the spec is edited")
        run.st.last_failure = Failure(reason="UpgradeRejected", message=message, at=cp.iso(run.now))
        run.d.emit("Warning", "UpgradeRejected", message)
