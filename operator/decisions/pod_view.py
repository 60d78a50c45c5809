"""When a round must not trust kopf's pod index alone.

The index is fed by the pod watch. A pod deleted while the watch was down can stay in it after the
re-list (so a job waits on a pod that is gone, Recovering or "Running" forever), and a pod the
index has lost must never be taken as gone (a second attempt would start beside it). So a round
reads the job's pods from the API server directly when the index says the current pod is gone, and
every CONFIRM_AFTER seconds while the job waits on pods that do not change (pods to go, or a
runtime that does not answer).
"""

from __future__ import annotations

from .model import PodObs
from .runtime_pod import STANDBY_SUFFIX
from .status_model import JobStatus

CONFIRM_AFTER = 30.0
_WAITING_PHASES = ("Recovering", "Upgrading", "Suspended", "Failed", "Finished", "Pending")


def owned_pods(pods: list[PodObs], job: str, uid: str) -> list[PodObs]:
    """The pods that are the job's: controlled by this StreamingJob (its uid, so not a forged pod
    that copies the job's labels and attempt annotation, nor a same-named job's before it was
    re-created) and named as the operator names the attempt's pod. Only these are watched, drained,
    deleted or sent the job's control token."""
    return [p for p in pods if p.owner_uid == uid and uid and (
        p.name == f"{job}-{p.attempt}" or (p.standby and p.name == f"{job}-{p.attempt}{STANDBY_SUFFIX}"))]


def split_standbys(pods: list[PodObs], status: JobStatus) -> tuple[list[PodObs], list[PodObs]]:
    """(the attempts' pods, the standbys). A pod started as a standby is one while its attempt is ahead of
    status.attempt (or equal to it under another name than status.pod: a cold pod was started instead);
    once status names it (promoted), or the job has moved past its number, it is an attempt's pod like
    any other: rules about attempts (never two at once, wait for the old pods to go) then see it."""
    def standby(p: PodObs) -> bool:
        return p.standby and (p.attempt > status.attempt or (p.attempt == status.attempt and p.name != status.pod))
    return [p for p in pods if not standby(p)], [p for p in pods if standby(p)]


def confirm_before_create(status: JobStatus, creates: bool, read_directly: bool) -> bool:
    """A round about to create the next attempt (or promote a standby as it) on the index's word that no pod is left reads the
    pods from the API first (an index that lost a draining pod would start a second attempt beside
    it). A job's first attempt has no pod to lose: the 1,000-job ramp pays nothing for this."""
    return creates and not read_directly and bool(status.attempt)


def needs_direct_read(status: JobStatus, pods: list[PodObs], runtime_answered: bool,
                      doubt_since: float | None, now: float) -> tuple[bool, float | None]:
    """(read the API now, the new doubt_since). Pure."""
    attempt, phase = status.attempt, status.phase
    current = next((p for p in pods if p.attempt == attempt), None)
    if attempt and phase in ("Running", "Pending") and current is None and status.tracking.pod_seen:
        return True, None  # the index says the attempt's pod is gone: make sure before acting on it
    waiting = bool(pods) and (phase in _WAITING_PHASES or (phase == "Running" and not runtime_answered))
    if not waiting:
        return False, None
    if doubt_since is None:
        return False, now
    if now - doubt_since >= CONFIRM_AFTER:
        return True, now
    return False, doubt_since
