"""The operator's decisions as one pure function: `decide(observed) -> Decision` (DESIGN.md §11).

The Decision holds the whole next status and a list of small idempotent actions; reconcile.py
applies the status first, then the actions, so an operator killed in between finds in status what
it meant to do and does it again (creating an existing pod is a no-op), never a second attempt.
Bookkeeping that must survive an operator restart lives in status.tracking.
"""

from __future__ import annotations

import copy
import hashlib
import json
from typing import Any

from sparkpoint.runtime.config import JobSpec, RestoreFrom, parse_duration

from . import checkpoints as cp
from .model import (
    RESTORE_FAILED_EXIT,
    CheckpointResult,
    CreateAttempt,
    Decision,
    DeletePod,
    Observed,
    PodObs,
    StopRuntime,
    TriggerCheckpoint,
    TriggerSavepoint,
)
from .status import apply_conditions

RESTART_WINDOW = 3600.0  # restart.maxRestarts counts restarts within this many seconds
DRAIN_GRACE = 90.0  # how long a requested drain (POST /stop) may take before the pod is deleted
SAVEPOINTS_SHOWN = 20
POLL = 2.0  # requeue while waiting for a pod to come or go
# Spec sections whose change needs a new pod (an upgrade); the rest is read by the operator only.
_NOT_UPGRADES = ("state", "savepoint", "restart", "restoreFrom")


def spec_key(spec: JobSpec) -> str:
    doc = spec.model_dump(by_alias=True, mode="json")
    for name in _NOT_UPGRADES:
        doc.pop(name, None)
    return hashlib.sha256(json.dumps(doc, sort_keys=True).encode()).hexdigest()[:16]


def backoff_seconds(spec: JobSpec, restarts_in_window: int) -> float:
    """restart.backoff, doubled per restart within the window, capped at restart.maxBackoff."""
    base, cap = parse_duration(spec.restart.backoff), parse_duration(spec.restart.max_backoff)
    return min(cap, base * 2 ** max(0, restarts_in_window - 1))


def restarts_in_window(tracking: dict[str, Any], now: float) -> int:
    return sum(1 for t in tracking.get("restartTimes", []) if now - t <= RESTART_WINDOW)


class _Run:
    """One decision in progress: the observation, the new status and the actions so far."""

    def __init__(self, obs: Observed):
        self.obs, self.spec, self.now = obs, obs.spec, obs.now
        self.st: dict[str, Any] = copy.deepcopy(obs.status)
        self.tr: dict[str, Any] = self.st.setdefault("tracking", {})
        self.d = Decision(status=self.st)
        self.attempt: int = self.st.get("attempt", 0)
        self.current: PodObs | None = next((p for p in obs.pods if p.attempt == self.attempt and self.attempt), None)

    # --- helpers ----------------------------------------------------------------------------------
    def set_phase(self, phase: str, reason: str, message: str, warning: bool = False) -> None:
        old = self.st.get("phase")
        self.st["phase"] = phase
        if old != phase:
            self.d.emit("Warning" if warning else "Normal", reason, f"{old or 'New'} -> {phase}: {message}")

    def requeue(self, seconds: float) -> None:
        self.d.requeue_after = max(0.5, min(self.d.requeue_after, seconds))

    def remove_pods(self) -> bool:
        """Delete every pod of the job; True once none is left (deleted ones still count)."""
        for pod in self.obs.pods:
            if not pod.deleting:
                self.d.actions.append(DeletePod(pod.name, force=pod.node_lost or pod.phase == "Unknown"))
            elif pod.node_lost:
                self.d.actions.append(DeletePod(pod.name, force=True))
        if self.obs.pods:
            self.requeue(POLL)
        return not self.obs.pods

    def start_attempt(self, restore_from: RestoreFrom | None) -> None:
        """Attempt N+1, only once no pod of the job is left (never two attempts at once)."""
        if not self.remove_pods():
            return
        self.attempt += 1
        self.st.update(attempt=self.attempt, pod=f"{self.obs_name()}-{self.attempt}")
        for key in ("runningSince", "pendingTrigger", "lastTriggerAt", "drain", "podSeen", "podReady",
                    "containerRestarts", "nextAttemptAt", "fallbackReported"):
            self.tr.pop(key, None)
        self.tr["restoreFrom"] = restore_from.model_dump(by_alias=True, exclude_none=True) if restore_from else None
        self.set_phase("Pending", "AttemptCreated", f"attempt {self.attempt}"
                       + (f" restoring from {self.tr['restoreFrom']}" if restore_from else ""))
        self.d.actions.append(CreateAttempt(self.attempt, restore_from or self.spec.restore_from))
        self.requeue(POLL)

    def obs_name(self) -> str:
        return self.obs.name

    def fail(self, reason: str, message: str) -> None:
        """The attempt is lost: count it, Recovering with backoff, or Failed once over budget."""
        self.st["lastFailure"] = {"reason": reason, "message": message, "at": cp.iso(self.now)}
        self.count_restart(1)
        if self.st.get("phase") == "Failed":
            return
        n = restarts_in_window(self.tr, self.now)
        wait = backoff_seconds(self.spec, n)
        self.tr["nextAttemptAt"] = self.now + wait
        self.set_phase("Recovering", reason, f"{message}; next attempt in {wait:g}s", warning=True)
        self.remove_pods()

    def count_restart(self, n: int) -> None:
        self.st["restarts"] = self.st.get("restarts", 0) + n
        times = self.tr.setdefault("restartTimes", [])
        times.extend([self.now] * n)
        del times[: max(0, len(times) - (self.spec.restart.max_restarts + 2))]  # bounded
        over = restarts_in_window(self.tr, self.now) > self.spec.restart.max_restarts
        if over or self.spec.restart.policy == "Never":
            why = (f"{self.spec.restart.max_restarts} restarts within {RESTART_WINDOW:g}s exceeded" if over
                   else "restart.policy is Never")
            last = self.st.get("lastFailure") or {}
            self.st["lastFailure"] = {"reason": last.get("reason", "RestartLimit"),
                                      "message": f"{last.get('message', '')} ({why})".strip(), "at": cp.iso(self.now)}
            self.tr["failedGeneration"] = self.obs.generation
            self.set_phase("Failed", "RestartLimitExceeded", why, warning=True)
            self.remove_pods()

    def restore_point(self) -> RestoreFrom | None:
        """Where the next attempt starts: a drain's savepoint, else past a restore that failed,
        the newest checkpoint not known to be bad, else what the spec says (None: the latest)."""
        target = self.tr.pop("restoreTarget", None)
        saved = self.obs.store_savepoints
        if target and (saved is None or target in [s["name"] for s in saved]):
            return RestoreFrom(savepoint=target)
        bad = set(self.tr.get("badRestorePoints", []))
        if bad and self.obs.store_checkpoints:
            for fact in reversed(self.obs.store_checkpoints):
                if fact.id not in bad:
                    return RestoreFrom(checkpoint=fact.id)
        return None


def decide(obs: Observed) -> Decision:
    run = _Run(obs)
    _record_store_facts(run)
    _adopt_newer_attempt(run)
    phase = run.st.get("phase")
    if phase is None:
        run.start_attempt(run.restore_point())
    elif phase in ("Failed", "Finished"):
        _terminal(run)
    elif obs.spec.state == "suspended" or phase == "Suspended":
        _suspend_or_resume(run)
    elif phase in ("Recovering", "Upgrading"):
        _between_attempts(run)
    else:
        _attempt_running(run)
    run.st["observedGeneration"] = obs.generation
    apply_conditions(run.st, obs.generation, obs.now)
    return run.d


def _adopt_newer_attempt(run: _Run) -> None:
    """A pod newer than status.attempt means a status write was lost after its pod was created:
    take it as the current attempt rather than start yet another one."""
    newest = max((p.attempt for p in run.obs.pods), default=0)
    if newest > run.attempt:
        run.attempt = newest
        run.current = next(p for p in run.obs.pods if p.attempt == newest)
        run.st.update(attempt=newest, pod=run.current.name)
        if run.st.get("phase") in (None, "Recovering", "Upgrading"):
            run.st["phase"] = "Pending"


def _record_store_facts(run: _Run) -> None:
    obs = run.obs
    runtime_fact = cp.fact_from_runtime((obs.runtime or {}).get("latestCheckpoint"))
    history = cp.merge_history(run.st, obs.store_checkpoints or [], [runtime_fact] if runtime_fact else [])
    if history:
        run.st["checkpoints"] = [f.to_status() for f in history]
        run.st["latestCheckpoint"] = history[-1].to_status()
    if obs.store_savepoints is not None:
        run.st["savepoints"] = obs.store_savepoints[-SAVEPOINTS_SHOWN:]


def _terminal(run: _Run) -> None:
    """Failed/Finished stay so until the user changes the spec (a new generation)."""
    if run.obs.generation != run.tr.get("failedGeneration", run.obs.generation) or (
            run.st["phase"] == "Finished" and run.obs.generation != run.st.get("observedGeneration")):
        run.tr["restartTimes"] = []
        run.tr.pop("failedGeneration", None)
        run.start_attempt(run.restore_point())
        return
    run.remove_pods()
    run.requeue(60)


def _suspend_or_resume(run: _Run) -> None:
    if run.spec.state == "running":  # resume from the suspend savepoint (or the latest checkpoint)
        run.start_attempt(run.restore_point())
        return
    if run.st.get("phase") != "Suspended":
        pod = run.current
        if pod and pod.ready and not pod.deleting:
            name = f"suspend-{run.obs.generation}"
            run.d.actions.append(StopRuntime(savepoint=name))
            run.tr.update(drain={"at": run.now}, restoreTarget=name)
        run.set_phase("Suspended", "Suspending", "draining with a savepoint" if pod and pod.ready else "no running pod")
    _drain_then_remove(run)


def _drain_then_remove(run: _Run) -> None:
    """A drain ends with the runtime exiting 0; a pod that is not draining (or takes too long) is deleted."""
    drain = run.tr.get("drain")
    for pod in run.obs.pods:
        draining = drain and pod is run.current and pod.phase in ("Running", "Pending") and \
            run.now - drain["at"] < DRAIN_GRACE
        if not draining and not pod.deleting:
            run.d.actions.append(DeletePod(pod.name, force=pod.node_lost))
    if run.obs.pods:
        run.requeue(POLL)


def _between_attempts(run: _Run) -> None:
    if run.st["phase"] == "Upgrading":
        _drain_then_remove(run)
    elif not run.remove_pods():
        return
    if run.obs.pods:
        return
    wait = run.tr.get("nextAttemptAt", 0) - run.now
    if wait > 0:
        run.requeue(wait)
        return
    run.start_attempt(run.restore_point())


def _attempt_running(run: _Run) -> None:
    obs, tr, pod = run.obs, run.tr, run.current
    if pod is None:
        if tr.get("podSeen"):
            run.fail("PodDeleted", f"pod {run.st.get('pod')} is gone")
        else:  # status says the attempt exists but its pod was never created (or not yet seen)
            run.d.actions.append(CreateAttempt(run.attempt, _restore_from_tracking(run)))
            run.requeue(POLL)
        return
    tr["podSeen"] = True
    if _pod_lost(run, pod):
        return
    if _local_restarts(run, pod):
        return
    if pod.phase == "Succeeded":
        run.set_phase("Finished", "Finished", "the runtime stopped on its own (exit 0)")
        return
    tr["podReady"] = pod.ready
    if run.st["phase"] == "Pending":
        if not pod.ready:
            run.requeue(POLL)
            return
        tr.update(runningSince=obs.now, stableSpec=spec_key(run.spec))
        run.set_phase("Running", "Running", f"attempt {run.attempt} is ready")
    tr.setdefault("stableSpec", spec_key(run.spec))
    if tr["stableSpec"] != spec_key(run.spec):
        _begin_upgrade(run, pod)
        return
    _report_restore(run)
    _checkpoints(run, pod)


def _restore_from_tracking(run: _Run) -> RestoreFrom | None:
    chosen = run.tr.get("restoreFrom")
    return RestoreFrom.model_validate(chosen) if chosen else run.spec.restore_from


def _pod_lost(run: _Run, pod: PodObs) -> bool:
    if pod.deleting:
        run.fail("PodDeleted", f"pod {pod.name} is being deleted")
    elif pod.node_lost or pod.phase == "Unknown":
        run.fail("NodeLost", f"pod {pod.name}'s node is not ready")
    elif pod.exit_code == RESTORE_FAILED_EXIT or (pod.phase == "Failed" and pod.last_exit_code == RESTORE_FAILED_EXIT):
        point = run.tr.get("restoreFrom") or {}
        bad = point.get("checkpoint") or (run.st.get("latestCheckpoint") or {}).get("id")
        if bad:
            run.tr.setdefault("badRestorePoints", []).append(bad)
            run.tr["badRestorePoints"] = run.tr["badRestorePoints"][-20:]
        run.fail("RestoreFailed", f"attempt {run.attempt} could not restore from {bad or 'its restore point'}"
                                  " (exit 3); the next attempt starts from an older checkpoint")
    elif pod.phase == "Failed":
        code = pod.exit_code if pod.exit_code is not None else pod.last_exit_code
        reason = pod.reason or "PodFailed"
        run.fail(reason, f"pod {pod.name} failed" + (f" (exit {code})" if code is not None else ""))
    else:
        return False
    return True


def _local_restarts(run: _Run, pod: PodObs) -> bool:
    """A container restarted in place recovered locally: count it (it spends restart budget)."""
    seen = run.tr.get("containerRestarts", 0)
    if pod.restart_count <= seen:
        return False
    delta = pod.restart_count - seen
    run.tr["containerRestarts"] = pod.restart_count
    run.st["localRecoveries"] = run.st.get("localRecoveries", 0) + delta
    code = f" (exit {pod.last_exit_code})" if pod.last_exit_code is not None else ""
    run.st["lastFailure"] = {"reason": "ContainerRestarted", "at": cp.iso(run.now),
                             "message": f"runtime container of {pod.name} restarted in place{code}"}
    run.d.emit("Warning", "LocalRecovery", f"runtime container of {pod.name} restarted in place{code}; "
                                           "recovering from the pod's hot checkpoint dir")
    run.count_restart(delta)
    return run.st["phase"] == "Failed"


def _begin_upgrade(run: _Run, pod: PodObs) -> None:
    mode = run.spec.upgrade_mode
    run.tr.pop("restoreTarget", None)
    if pod.ready and mode in ("savepoint", "last-checkpoint"):
        name = f"upgrade-{run.obs.generation}" if mode == "savepoint" else None
        run.d.actions.append(StopRuntime(savepoint=name))
        run.tr["drain"] = {"at": run.now}
        if name:
            run.tr["restoreTarget"] = name
    else:
        run.tr["drain"] = {"at": run.now - DRAIN_GRACE}  # nothing to drain: delete at once
    run.tr.pop("nextAttemptAt", None)
    run.set_phase("Upgrading", "Upgrading", f"spec changed (generation {run.obs.generation}); upgradeMode {mode}")
    _drain_then_remove(run)


def _report_restore(run: _Run) -> None:
    restore = (run.obs.runtime or {}).get("restore")
    if not restore:
        return
    run.st["restore"] = restore
    if restore.get("fallbacks") and run.tr.get("fallbackReported") != run.attempt:
        run.tr["fallbackReported"] = run.attempt
        run.d.emit("Warning", "RestoreFallback", f"attempt {run.attempt} restored from {restore.get('checkpoint')} "
                                                 f"after failing: {restore['fallbacks']}")


def _checkpoints(run: _Run, pod: PodObs) -> None:
    spec, tr, now = run.spec, run.tr, run.now
    interval, timeout = parse_duration(spec.checkpoint.interval), parse_duration(spec.checkpoint.timeout)
    latest_at = cp.parse_time((run.st.get("latestCheckpoint") or {}).get("completedAt"))
    pending = tr.get("pendingTrigger")
    if pending:
        result = cp.follow_trigger(pending, run.obs.runtime, latest_at, timeout, now)
        if result:
            run.d.actions.append(CheckpointResult(result))
            tr.pop("pendingTrigger")
        else:
            run.requeue(POLL)
    if pod.ready and run.obs.runtime is not None:
        lag = cp.trigger_lag(tr, interval, now)
        if lag is not None:
            run.d.actions.append(TriggerCheckpoint(lag))
            tr.update(lastTriggerAt=now, pendingTrigger={"at": now, "id": None})
            run.requeue(POLL)
        nonce = spec.savepoint.trigger_nonce
        if nonce is not None and nonce != tr.get("savepointNonce"):
            tr["savepointNonce"] = nonce
            run.d.actions.append(TriggerSavepoint(f"nonce-{nonce}"))
            run.d.emit("Normal", "SavepointTriggered", f"savepoint nonce-{nonce} (triggerNonce {nonce})")
    run.requeue(max(POLL, cp.next_trigger_in(tr, interval, now)))
    healthy, reason = cp.checkpoint_healthy(latest_at, tr.get("runningSince"), interval, now)
    was = tr.get("checkpointHealthy", True)
    tr["checkpointHealthy"], tr["checkpointReason"] = healthy, reason
    if was and not healthy:
        run.d.emit("Warning", "CheckpointUnhealthy",
                   f"no completed checkpoint for {cp.UNHEALTHY_INTERVALS} intervals of {spec.checkpoint.interval}")
    elif healthy and not was:
        run.d.emit("Normal", "CheckpointHealthy", "checkpoints complete again")
