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
from .step import DRAIN_GRACE, Step, drain_then_remove, spec_key, stable_doc


def begin_upgrade(run: Step, pod: PodObs) -> None:
    mode = run.spec.upgrade_mode
    run.tr.pop("restoreTarget", None)
    run.tr.pop("freshStart", None)
    if mode == "stateless":  # the new attempt starts without state, not from the latest checkpoint
        run.tr["freshStart"] = f"upgrade-{run.obs.generation}"
    if pod.can_drain and mode in ("savepoint", "last-checkpoint"):
        name = f"upgrade-{run.obs.generation}" if mode == "savepoint" else None
        run.d.actions.append(StopRuntime(savepoint=name))
        run.tr["drain"] = {"at": run.now}
        if name:
            run.tr["restoreTarget"] = name
    else:
        run.tr["drain"] = {"at": run.now - DRAIN_GRACE}  # nothing to drain: delete at once
    run.tr.pop("nextAttemptAt", None)
    run.tr["upgrade"] = {"restore": run.tr.get("restoreTarget")}
    run.set_phase("Upgrading", "Upgrading", f"spec changed (generation {run.obs.generation}); upgradeMode {mode}")
    drain_then_remove(run)


def roll_back_if_late(run: Step, pod: PodObs) -> bool:
    """The upgraded attempt is not Ready in time: go back to the last stable spec and the restore
    point the upgrade started from. True if a rollback began."""
    deadline = run.tr.get("upgradeDeadline")
    if deadline is None or pod.ready or run.now < deadline or not run.tr.get("stableSpecDoc"):
        return False
    rejected = spec_key(run.obs.spec)
    run.tr.update(rejectedSpec=rejected, drain={"at": run.now - DRAIN_GRACE})
    run.tr.pop("upgradeDeadline")
    restore = (run.tr.get("restoreFrom") or {}).get("savepoint")
    if restore:
        run.tr["restoreTarget"] = restore
    crashes = run.tr.pop("upgradeCrashLoop", None)
    why = (f"restarted {crashes} times before it was Ready" if crashes
           else f"was not Ready within {run.upgrade_timeout():g}s")
    message = (f"attempt {run.attempt} with the new spec {why}; "
               f"rolling back to the last stable spec" + (f" from savepoint {restore}" if restore else ""))
    run.st["lastFailure"] = {"reason": "UpgradeFailed" if crashes else "UpgradeTimeout", "message": message,
                             "at": cp.iso(run.now)}
    run.set_phase("Upgrading", "UpgradeRolledBack", message, warning=True)
    drain_then_remove(run)
    return True


def mark_stable(run: Step) -> None:
    """The attempt is Ready: its spec becomes the one to roll back to."""
    run.tr.pop("upgradeDeadline", None)
    run.tr["stableSpec"] = spec_key(run.spec)
    if not run.rolled_back:
        run.tr["stableSpecDoc"] = stable_doc(run.spec)
        run.tr.pop("rejectedSpec", None)
