"""How a running attempt's pod failed, as the operator judges it (docs/design.md §11): lost (deleted,
node gone), its restore point unusable (exit 3), OOM-killed, failed otherwise, or restarted in
place (a local recovery). Pure: each rule reads the Step's observation and writes its status.
"""

from __future__ import annotations

from . import checkpoints as cp
from .model import RESTORE_FAILED_EXIT, PodObs
from .oom import OOM_KILLED, oom_kill_message
from .status_model import Drain, Failure, UpgradeInFlight
from .step import DRAIN_GRACE, Step, point_tag


def pod_lost(run: Step, pod: PodObs) -> bool:
    if pod.deleting:
        run.fail("PodDeleted", f"pod {pod.name} is being deleted")
    elif pod.node_lost or pod.phase == "Unknown":
        run.fail("NodeLost", f"pod {pod.name}'s node is not ready")
    elif RESTORE_FAILED_EXIT in (pod.exit_code, pod.last_exit_code):
        restore_failed(run, pod)
    elif oom := oom_kill_message(pod, run.tr.container_restarts, run.spec.spark.resources.memory):
        run.fail(OOM_KILLED, oom)
    elif pod.phase == "Failed" or (pod.exit_code not in (None, 0) and run.spec.restart.policy == "Never"):
        # (restart.policy Never: the kubelet does not restart the runtime, and the GC sidecar keeps
        # the pod Running, so the runtime's own exit is the failure.)
        code = pod.exit_code if pod.exit_code is not None else pod.last_exit_code
        what = f"pod {pod.name} failed" + (f" (exit {code})" if code is not None else "")
        if pod.known_cause is not None:
            run.fail(pod.known_cause.reason, f"{what}: {pod.known_cause.message}")  # (Recovering: its Event)
            if run.st.phase == "Failed":  # (whose Event names the restart limit, not the cause)
                run.d.emit("Warning", pod.known_cause.reason, f"{what}: {pod.known_cause.message}")
        else:
            run.fail(pod.reason or "PodFailed", what)
    else:
        return False
    return True


def restore_failed(run: Step, pod: PodObs) -> None:
    """Exit 3: blame exactly the points the attempt could not restore (the runtime names them in
    its termination message; else the explicit point it was given), never the newest checkpoint
    by guess. A start that failed for the job's own code names no point: nothing is blamed. The
    user's own spec.restoreFrom is never replaced: the job fails, saying so."""
    tr = run.tr
    given = point_tag(tr.attempt_point or tr.restore_from)  # (an older operator wrote no attemptPoint)
    blamed = list(pod.failed_points) if pod.failed_points is not None else (
        [given] if given and not given.startswith("fresh:") else [])
    if blamed:
        bad = [b for b in tr.bad_restore_points or [] if b not in blamed] + blamed
        tr.bad_restore_points = bad[-20:]
        ids = [run.st.latest_checkpoint.id if run.st.latest_checkpoint else ""] + [
            b.split(":", 1)[1] for b in blamed if b.startswith("checkpoint:")]
        tr.blamed_at_checkpoint = max(ids, key=cp.number)
    what = ", ".join(blamed) or "its restore point"
    users = point_tag(run.spec.restore_from)
    if users and users in blamed and run.lineage_point() == run.spec.restore_from:
        message = (f"attempt {run.attempt} could not restore spec.restoreFrom {users} (exit 3); it is not replaced "
                   "by another point: repair the store or change spec.restoreFrom")
        run.st.restarts += 1
        # The named point failed, not the spec it came with: no rollback of an upgrade on trial may
        # replace it later; the next attempt, after an edit, is on trial again, with the same point
        # to roll back to.
        if tr.upgrade_deadline is not None:
            tr.upgrade = UpgradeInFlight(rollback_point=tr.rollback_point)
        tr.clear("upgrade_deadline", "rollback_point", "upgrade_crash_loop")
        run.fail_for_good("RestoreFailed", message, "RestoreFailed", message)
        return
    run.fail("RestoreFailed", f"attempt {run.attempt} could not restore from {what} (exit 3)"
             + ("; the next attempt starts from an older point" if blamed else ""))


def local_restarts(run: Step, pod: PodObs) -> bool:
    """A container restarted in place recovered locally: count it (it spends restart budget)."""
    delta = restarts_unseen(run, pod)
    if delta:
        run.count_restart(delta)
    return run.st.phase == "Failed"


def restarts_unseen(run: Step, pod: PodObs) -> int:
    """Report in-place restarts of the runtime container no round has seen: a local recovery, or an
    OOM kill (which `pod_lost` turns into a failed attempt while the job runs; a suspend that begins
    now reports it and drains). How many there were; counting them is the caller's."""
    seen = run.tr.container_restarts or 0
    if pod.restart_count <= seen:
        return 0
    delta = pod.restart_count - seen
    run.tr.container_restarts = pod.restart_count
    code = f" (exit {pod.last_exit_code})" if pod.last_exit_code is not None else ""
    if oom := oom_kill_message(pod, seen, run.spec.spark.resources.memory):
        run.st.last_failure = Failure(reason=OOM_KILLED, at=cp.iso(run.now), message=oom)
        run.d.emit("Warning", OOM_KILLED, oom)
        return delta
    run.st.local_recoveries += delta
    if pod.known_cause is not None:  # a cause a restart in place will not cure: say what to do
        message = f"runtime container of {pod.name} restarted in place{code}: {pod.known_cause.message}"
        run.st.last_failure = Failure(reason=pod.known_cause.reason, at=cp.iso(run.now), message=message)
        run.d.emit("Warning", pod.known_cause.reason, message)
        return delta
    run.st.last_failure = Failure(reason="ContainerRestarted", at=cp.iso(run.now),
                                  message=f"runtime container of {pod.name} restarted in place{code}")
    run.d.emit("Warning", "LocalRecovery", f"runtime container of {pod.name} restarted in place{code}; "
                                           "recovering from the pod's hot checkpoint dir")
    return delta


def drain_interrupted(run: Step) -> None:
    """The runtime died while draining (OOM-killed, or crashed) and the kubelet restarted it in place:
    the restarted runtime knows nothing of the stop request, so the drain is over without its
    savepoint. Say so (an OOM kill names the memory limit) and end the drain's grace now, so the pod
    goes at once rather than after DRAIN_GRACE. Not counted toward maxRestarts: the attempt was
    being retired anyway."""
    pod, drain = run.current, run.tr.drain
    if pod is None or drain is None or drain.restarts is None or pod.restart_count <= drain.restarts:
        return
    seen = max(drain.restarts, run.tr.container_restarts or 0)
    run.tr.container_restarts = pod.restart_count
    run.tr.drain = Drain(at=min(drain.at, run.now - DRAIN_GRACE), restarts=pod.restart_count)
    target = run.tr.restore_target
    lost = f"; the drain's savepoint {target} was not taken" if target else ""
    oom = oom_kill_message(pod, seen, run.spec.spark.resources.memory)
    code = f" (exit {pod.last_exit_code})" if pod.last_exit_code is not None else ""
    reason, what = (OOM_KILLED, oom) if oom else (
        "DrainInterrupted", f"runtime container of {pod.name} restarted in place{code}")
    message = f"{what}, while draining{lost}"
    run.st.last_failure = Failure(reason=reason, at=cp.iso(run.now), message=message)
    run.d.emit("Warning", reason, message)
