"""The savepoints the operator asks a running job for: a triggerNonce's, followed until it is in the
store or given up (SAVEPOINT_TRIES), and the periodic ones (spec.savepoint.interval) with their
pruning. Pure parts of machine.decide's Running row."""

from __future__ import annotations

from sparkpoint.runtime.spec import parse_duration

from .model import DeleteSavepoint, TriggerSavepoint
from .periodic import periodic_due, periodic_name, to_prune
from .status_model import PendingSavepoint
from .step import POLL, Step

PRUNE_RETRY = 300.0  # a periodic savepoint still listed this long after its deletion is deleted again


def periodic_savepoints(run: Step) -> None:
    """spec.savepoint.interval: one savepoint per interval (one request at a time), and the periodic
    ones beyond savepoint.retain deleted, never one a restore may still need."""
    sp, tr, now = run.spec.savepoint, run.tr, run.now
    if periodic_due(tr, parse_duration(sp.interval) if sp.interval else None, now) and not tr.pending_savepoint:
        name = periodic_name(now)
        tr.periodic_savepoint_at = now
        tr.pending_savepoint = PendingSavepoint(name=name, at=now, tries=1)
        run.d.actions.append(TriggerSavepoint(name))
        run.d.emit("Normal", "SavepointTriggered", f"savepoint {name} (savepoint.interval {sp.interval})")
    lineage = tr.lineage.point.savepoint if tr.lineage and tr.lineage.point else None
    keep = {n for n in (run.spec.restore_from and run.spec.restore_from.savepoint, lineage, tr.restore_target) if n}
    listed = {s["name"] for s in run.obs.store_savepoints or []}
    pruned = {n: at for n, at in (tr.pruned_savepoints or {}).items() if n in listed}
    for name in to_prune(run.obs.store_savepoints, sp.retain, keep):
        if now - pruned.get(name, -PRUNE_RETRY) >= PRUNE_RETRY:
            pruned[name] = now
            run.d.actions.append(DeleteSavepoint(name))
    if pruned or tr.pruned_savepoints is not None:
        tr.pruned_savepoints = pruned


SAVEPOINT_TRIES = 5
SAVEPOINT_UNSEEN = 30.0  # a request the runtime does not know (it restarted) is retried after this


def follow_savepoint(run: Step) -> None:
    """A requested savepoint counts once it is in the store; a request that failed or was skipped
    (no new batch yet) is made again, up to SAVEPOINT_TRIES times."""
    sp = run.tr.pending_savepoint
    if not sp:
        return
    if sp.name in {s["name"] for s in run.obs.store_savepoints or []}:
        run.tr.clear("pending_savepoint")
        run.d.emit("Normal", "SavepointCompleted", f"savepoint {sp.name} is in the store")
        return
    requests = [r for r in (run.obs.runtime or {}).get("recentCheckpoints") or [] if r.get("savepoint") == sp.name]
    status = requests[-1].get("status") if requests else None
    if status not in ("failed", "skipped", "timed_out") and (requests or run.now - sp.at < SAVEPOINT_UNSEEN):
        run.requeue(POLL)
        return
    if sp.tries >= SAVEPOINT_TRIES:
        run.tr.clear("pending_savepoint")
        run.d.emit("Warning", "SavepointFailed", f"savepoint {sp.name} not taken after {sp.tries} tries "
                                                 f"(last: {status or 'unknown to the runtime'})")
        return
    run.tr.pending_savepoint = PendingSavepoint(name=sp.name, at=run.now, tries=sp.tries + 1)
    run.d.actions.append(TriggerSavepoint(sp.name))
