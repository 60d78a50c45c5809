"""spec.standby: a second pod of the job, promoted as the next attempt instead of a cold pod (docs/design.md
§11, "Standby attempts"; the runtime's half is runtime/service/standby.py). Pure: reads the Step's
observation, writes its status and actions.

`tend(run)`, every round after the machine: one standby for attempt N+1 while attempt N runs the spec
it was started for; a standby that no longer fits (another attempt or spec, the job suspended, failed or
upgrading, spec.standby off) is deleted; one that died is replaced after a backoff of its own (never the
job's restart budget); status.standby says what would be promoted and, if nothing, why.

`promotion(run, point)`, where start_attempt would create attempt N+1's pod: the standby to promote
instead, or None for a cold pod (the standby is then deleted, with an Event saying why). A promotion is a
new attempt in every other respect (status.attempt, lastFailure, the restart budget, restore points): the
runtime claims the fence and restores exactly as a new pod's start would, so the standby must have been
started for the same spec and restore point as the pod the machine would create.

`follow_promotion(run, pod)`: the current attempt's pod is a standby being promoted: POST /promote again
while its runtime still says it is a standby (an operator killed between its status write and the call),
and give the attempt up (PromotionFailed: a disruption, the next attempt is a cold pod) if it refused.
"""

from __future__ import annotations

from sparkpoint.runtime.spec import JobSpec, RestoreFrom, parse_duration

from .model import CreateAttempt, CreateStandby, DeletePod, PodObs, PromoteStandby
from .spec_key import is_spec, spec_key
from .status_model import StandbyRecord, StandbyTrack
from .step import POLL, Step, point_tag, stuck_terminating

SEEN_WITHIN = 30.0  # a standby created this long ago and not among the job's pods is gone
PROMOTION_FAILED = "PromotionFailed"  # in step.DISRUPTIONS: the next attempt starts at once, no restart budget


def started_for(spec: JobSpec) -> str:
    """What a standby was started for (its annotation): the spec key, and the restartNonce, which asks for
    new processes (a changed Secret or ConfigMap is read at start) as much as a spec change does."""
    key = spec_key(spec)
    return key if spec.restart_nonce is None else f"{key}.{spec.restart_nonce}"


def enabled(run: Step) -> bool:
    return run.spec.standby is not None and run.spec.standby.enabled


def _track(run: Step) -> StandbyTrack:
    if run.tr.standby is None:
        run.tr.standby = StandbyTrack()
    return run.tr.standby


# --- health: would this standby be promoted now? -------------------------------------------------------
def health(run: Step, pod: PodObs | None) -> str | None:
    """None when the standby's runtime follows the store (answers, no error, not stale), else why not."""
    if pod is None:
        return "no standby pod"
    if pod.deleting:
        return f"standby {pod.name} is being deleted"
    if pod.phase != "Running" or not pod.ip or pod.exit_code is not None:
        return f"standby {pod.name} is not running (pod {pod.phase})"
    doc = run.obs.standby_runtime.get(pod.name)
    if doc is None:
        return f"the runtime of standby {pod.name} does not answer"
    following = doc.get("standby")
    if not isinstance(following, dict) or following.get("promoted"):
        return f"the runtime of {pod.name} is no standby (phase {doc.get('phase')})"
    if following.get("lastError"):
        return f"standby {pod.name}'s last look at the store failed: {str(following['lastError'])[:200]}"
    lag = following.get("lastRoundSecondsAgo")
    if not isinstance(lag, (int, float)):
        return f"standby {pod.name} has not looked at the store yet"
    bound = run.spec.standby.max_lag if run.spec.standby else "60s"
    if lag > parse_duration(bound):
        return f"standby {pod.name} is stale: its last look at the store ended {lag:.0f}s ago (standby.maxLag {bound})"
    return None


def _unfit(pod: PodObs, attempt: int, key: str, point: str | None) -> str | None:
    """Why this standby cannot become `attempt` with this spec key and restore point, or None."""
    if pod.attempt != attempt:
        return f"it was started for attempt {pod.attempt}, the next attempt is {attempt}"
    if pod.standby_spec != key:
        return "it runs the spec (and restartNonce) it was started with, not the job's current one"
    if pod.standby_point != point:
        return (f"it was started to restore from {pod.standby_point or 'the newest checkpoint'}, the next "
                f"attempt restores from {point or 'the newest checkpoint'}")
    return None


# --- the promotion (in place of start_attempt's pod) ----------------------------------------------------
def promote_instead(run: Step) -> None:
    """The round's CreateAttempt (start_attempt's, status already advanced to the new attempt) becomes
    the standby's promotion when one fits: the same status, restart accounting and restore point."""
    create = next((a for a in run.d.of(CreateAttempt) if a.attempt == run.attempt), None)
    if create is None:
        return
    pod = promotion(run, create.restore_from)
    if pod is not None:
        run.d.actions = [PromoteStandby(pod.name, run.attempt, pod.ip) if a is create else a for a in run.d.actions]
        run.st.pod = pod.name
        # Its container's restarts as a standby are not the attempt's (no local recovery, no restart budget).
        run.tr.container_restarts = pod.restart_count or None


def promotion(run: Step, passed: RestoreFrom | None) -> PodObs | None:
    """Call with run.attempt already the new attempt's number and `passed` its restore point."""
    candidates = [p for p in run.obs.standbys if p.attempt == run.attempt and not p.deleting]
    pod = candidates[0] if candidates else None
    if not enabled(run):
        return None  # (tend deletes standbys that are no longer wanted)
    why = health(run, pod) or (pod is not None and _unfit(pod, run.attempt, started_for(run.spec), point_tag(passed))) \
        or None
    if why is None and pod is not None:
        track = _track(run)
        track.clear("pod", "created_at", "promote_refused")
        track.failures = 0
        run.d.emit("Normal", "StandbyPromoted", f"attempt {run.attempt}: standby {pod.name} promoted "
                                                "instead of starting a new pod")
        return pod
    if pod is not None or (run.tr.standby is not None and run.tr.standby.pod):  # (a first attempt had none to promote)
        run.d.emit("Warning", "StandbyNotPromoted", f"attempt {run.attempt} starts as a new pod: {why}")
    if pod is not None:
        run.d.actions.append(DeletePod(pod.name))
        _track(run).clear("pod", "created_at")
    return None


def follow_promotion(run: Step, pod: PodObs) -> bool:
    """True when the promotion failed and the attempt was given up (the round is decided)."""
    if not pod.standby:
        return False
    track = run.tr.standby
    refused = track.promote_refused if track else None
    if track is not None and refused is not None and refused.attempt == run.attempt:
        track.clear("promote_refused")
        run.fail(PROMOTION_FAILED, f"standby {pod.name} refused its promotion to attempt {run.attempt}: "
                                   f"{refused.message or refused.reason}; the next attempt starts as a new pod")
        return True
    runtime = run.obs.runtime or {}
    following = runtime.get("standby")
    if isinstance(following, dict) and not following.get("promoted") and runtime.get("phase") == "standby":
        run.d.actions.append(PromoteStandby(pod.name, run.attempt, pod.ip))  # (idempotent: 202/200 again)
    return False


# --- keeping one (every round) --------------------------------------------------------------------------
def _may_create(run: Step) -> bool:
    """Attempt N runs, Ready, the spec it was started for, no drain or upgrade in flight."""
    pod, tr = run.current, run.tr
    return (enabled(run) and run.st.phase == "Running" and run.obs.spec.state == "running" and pod is not None
            and pod.ready and not pod.deleting and tr.drain is None and is_spec(tr.attempt_spec, run.spec)
            and not run.obs.deleting)


def _keepable(run: Step) -> bool:
    """A standby is kept while the job may still start attempt N+1 from it."""
    return enabled(run) and run.obs.spec.state == "running" and run.st.phase in ("Running", "Pending", "Recovering")


def _failed(pod: PodObs) -> bool:
    return pod.phase in ("Failed", "Succeeded", "Unknown") or pod.exit_code is not None or pod.node_lost


def _died(run: Step, track: StandbyTrack) -> None:
    """A standby died (failed, hung, or gone without the operator deleting it): the next waits the backoff."""
    track.failures += 1
    wait = run.spec.restart.backoff_seconds(track.failures)
    track.next_at = run.now + wait
    track.clear("pod", "created_at", "unhealthy_since")


def _hung(run: Step, pod: PodObs) -> str | None:
    """A standby that would not have been promoted for twice standby.maxLag (it does not answer, stays
    stale or failing, never got scheduled) is as good as dead: replaced, so a job does not keep one that
    can never be promoted. The first bound covers its start (JVM, session, the first download)."""
    why, track = health(run, pod), _track(run)
    if why is None:
        track.clear("unhealthy_since")
        return None
    since = track.unhealthy_since = track.unhealthy_since or run.now
    bound = 2 * parse_duration(run.spec.standby.max_lag if run.spec.standby else "60s")
    return f"{why} for {run.now - since:.0f}s" if run.now - since > bound else None


def tend(run: Step) -> None:
    track = run.tr.standby
    names = {p.name for p in run.obs.standbys} | {p.name for p in run.obs.pods}
    # gone without the operator deleting it (after a grace: a pod just created may not be indexed yet,
    # and a refused create never appears)
    if track is not None and track.pod and track.pod not in names and run.now - (track.created_at or 0) > SEEN_WITHIN:
        _died(run, track)
        run.d.emit("Warning", "StandbyFailed", f"standby {track.pod} is gone; a new one in "
                                               f"{max(0.0, (track.next_at or run.now) - run.now):g}s")
    key, point = started_for(run.spec), point_tag(run.tr.attempt_point.restore_from() if run.tr.attempt_point else None)
    keep = None
    for pod in run.obs.standbys:
        if pod.name == run.st.pod:
            continue  # promoted this round: the attempt's pod now
        if pod.deleting:
            if pod.node_lost or stuck_terminating(pod, run.now):
                run.d.actions.append(DeletePod(pod.name, force=True))
            continue
        why = None if _keepable(run) else "the job no longer wants a standby"
        if why is None and _failed(pod):
            _died(run, _track(run))
            why = f"its pod failed ({pod.phase}, exit {pod.exit_code}); a new one after the backoff"
            run.d.emit("Warning", "StandbyFailed", f"standby {pod.name}: {why}")
        why = why or _unfit(pod, run.attempt + 1, key, point) or ("another standby is kept" if keep else None)
        if why is None and (hung := _hung(run, pod)):
            _died(run, _track(run))
            why = hung
            run.d.emit("Warning", "StandbyFailed", f"standby {pod.name} replaced: {why}")
        if why is None:
            keep = pod
            continue
        run.d.actions.append(DeletePod(pod.name))
        if run.tr.standby is not None and run.tr.standby.pod == pod.name:
            run.tr.standby.clear("pod", "created_at")
    want, track = run.attempt + 1, run.tr.standby
    if keep is None and _may_create(run):
        wait = (track.next_at or 0) - run.now if track is not None else 0
        name = f"{run.obs_name()}-{want}-standby"
        if wait > 0:
            run.requeue(wait)  # backing off after standbys that died
        elif name in names:
            run.requeue(POLL)  # the name's earlier pod is still terminating
        else:
            track = _track(run)
            track.pod, track.created_at = name, run.now
            track.clear("next_at", "unhealthy_since")
            run.d.actions.append(CreateStandby(want, key, point, run.spec if run.rolled_back else None))
            run.d.emit("Normal", "StandbyCreated", f"standby {name} for attempt {want}")
    _report(run, keep)


def _report(run: Step, pod: PodObs | None) -> None:
    if not enabled(run):
        run.st.clear("standby")
        if run.tr.standby is not None and not run.obs.standbys:
            run.tr.clear("standby")
        return
    why = health(run, pod)
    following = (run.obs.standby_runtime.get(pod.name) or {}).get("standby") if pod is not None else None
    following = following if isinstance(following, dict) else {}
    if why is None and run.tr.standby is not None:
        run.tr.standby.failures = 0  # it follows the store: the next that dies backs off from the start
    run.st.standby = StandbyRecord(
        pod=pod.name if pod else (run.tr.standby.pod if run.tr.standby else None),
        attempt=pod.attempt if pod else None, ready=why is None, checkpoint=following.get("checkpoint"),
        behind_checkpoints=following.get("behindCheckpoints"), message=why)
