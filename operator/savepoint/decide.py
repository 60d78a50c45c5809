"""What to do next for one StreamingJobSavepoint: a pure function of what was observed.

The handlers observe (the resource, its job and pod, the store, the runtime's answer about the
request being followed) and act on the returned Decision; a restarted operator observes again and
gets the same answer. The store is the truth: a savepoint whose manifest exists is Completed, so
nothing is ever triggered twice for the same name.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from sparkpoint.operator.savepoint.model import COMPLETED, FAILED, IN_PROGRESS, PENDING, SavepointStatus

# A savepoint resource applied together with its job may reach us first.
JOB_MISSING_GRACE = 30.0
# How long a savepoint may wait for its job to be Running before it fails.
WAIT_RUNNING_TIMEOUT = 600.0
# A savepoint is a checkpoint plus a server-side copy: allow twice the job's checkpoint timeout,
# counted from the first trigger.
TIMEOUT_FACTOR = 2.0
# Requests lost with their pod (the job restarted meanwhile) are triggered again, this often at most.
MAX_TRIGGERS = 3
RETRY_SHORT, RETRY_LONG = 2.0, 10.0


@dataclass(frozen=True)
class JobView:
    """The named StreamingJob as observed: its phase, current pod, and that pod's IP once Running."""

    phase: str | None
    pod: str | None
    pod_ip: str | None
    checkpoint_timeout: float


@dataclass(frozen=True)
class Stored:
    """The savepoint's manifest in the store."""

    checkpoint: str | None
    size_bytes: int
    completed_at: str


@dataclass(frozen=True)
class RuntimeAnswer:
    """The runtime's answer about the request being followed: its status field, or `lost` when the
    runtime does not know it (404: a new attempt) and `unreachable` when it did not answer."""

    status: str  # queued|freezing|uploading|completed|failed|timed_out|skipped|lost|unreachable
    error: str | None = None


@dataclass(frozen=True)
class Observed:
    now: datetime
    created: datetime
    status: SavepointStatus
    job: JobView | None  # None: no such StreamingJob
    stored: Stored | None  # None: no manifest (or the store was not readable: see store_error)
    store_error: str | None = None
    runtime: RuntimeAnswer | None = None  # only when a request is being followed in the current pod


# Actions
NONE = "none"  # terminal: nothing to do
WAIT = "wait"  # look again after `delay`
TRIGGER = "trigger"  # POST /savepoints to the job's pod, then follow the request
COPY_LATEST = "copy-latest"  # the runtime had nothing new to checkpoint: copy its latest checkpoint
RECORD = "record"  # the store holds it: record Completed from `stored`
FAIL = "fail"


@dataclass(frozen=True)
class Decision:
    action: str
    state: str
    reason: str
    message: str = ""
    delay: float = 0.0
    extra: dict = field(default_factory=dict)


def _age(now: datetime, since: str | datetime | None) -> float:
    if since is None:
        return 0.0
    moment = datetime.fromisoformat(since) if isinstance(since, str) else since
    return (now - moment).total_seconds()


def decide(o: Observed) -> Decision:
    st = o.status
    if st.state in (COMPLETED, FAILED):
        return Decision(NONE, st.state, "Done")
    if o.stored is not None:  # done, whoever made it (this operator before a restart, or the runtime)
        adopted = st.triggers == 0 and st.triggered_at is None
        return Decision(RECORD, COMPLETED, "SavepointCompleted", "the savepoint's manifest is in the store"
                        + (" (it existed before this resource asked for it: adopted, never deleted by it)"
                           if adopted else ""), extra={"adopted": adopted})
    if st.state == IN_PROGRESS:
        return _follow(o)
    return _start(o)


def _start(o: Observed) -> Decision:
    job = o.job
    if job is None:
        if _age(o.now, o.created) < JOB_MISSING_GRACE:
            return Decision(WAIT, PENDING, "JobNotFound", "waiting for the StreamingJob to exist", RETRY_LONG)
        return Decision(FAIL, FAILED, "JobNotFound", "the StreamingJob named by spec.jobName does not exist")
    if o.store_error:
        return _or_timeout(o, Decision(WAIT, PENDING, "StoreUnavailable", o.store_error, RETRY_LONG))
    if job.phase != "Running" or not job.pod or not job.pod_ip:
        return _or_timeout(o, Decision(WAIT, PENDING, "JobNotRunning",
                                       f"waiting for the job to be Running (phase {job.phase or 'unknown'})",
                                       RETRY_LONG))
    return Decision(TRIGGER, IN_PROGRESS, "Triggered", f"savepoint requested from pod {job.pod}", RETRY_SHORT)


def _or_timeout(o: Observed, wait: Decision) -> Decision:
    if _age(o.now, o.created) >= WAIT_RUNNING_TIMEOUT:
        return Decision(FAIL, FAILED, wait.reason, f"gave up after {WAIT_RUNNING_TIMEOUT:.0f}s: {wait.message}")
    return wait


def _follow(o: Observed) -> Decision:
    st, job = o.status, o.job
    limit = TIMEOUT_FACTOR * (job.checkpoint_timeout if job else 600.0)
    if _age(o.now, st.triggered_at) > limit:
        return Decision(FAIL, FAILED, "Timeout", f"no completed savepoint {limit:.0f}s after the trigger")
    if o.store_error:
        return Decision(WAIT, IN_PROGRESS, "StoreUnavailable", o.store_error, RETRY_LONG)
    same_pod = job is not None and job.pod == st.pod and job.pod_ip
    answer = o.runtime if same_pod else RuntimeAnswer("lost")
    if answer is None or answer.status in ("queued", "freezing", "uploading", "unreachable"):
        return Decision(WAIT, IN_PROGRESS, "InProgress", "the runtime is taking the savepoint", RETRY_SHORT)
    if answer.status == "completed":
        # Completed in the runtime but no manifest yet: the copy is done before the request
        # completes, so only a store read racing it lands here; look again.
        return Decision(WAIT, IN_PROGRESS, "InProgress", "waiting for the manifest in the store", RETRY_SHORT)
    if answer.status == "skipped":
        # Nothing new since the latest checkpoint, which therefore is the job's current state.
        if "already checkpointed" in (answer.error or ""):
            return Decision(COPY_LATEST, IN_PROGRESS, "CopyLatest",
                            "no new batch since the latest checkpoint: copying it")
        # No batch committed yet: ask again a little later; bounded by the timeout, not by MAX_TRIGGERS.
        return _retrigger(o, f"the runtime skipped the savepoint: {answer.error or 'no reason given'}",
                          counted=False, delay=RETRY_LONG)
    if answer.status in ("failed", "timed_out"):
        return Decision(FAIL, FAILED, "RuntimeFailed",
                        f"the runtime reports the savepoint {answer.status}: {answer.error or 'no reason given'}")
    # lost: the pod that had the request is gone (new attempt) or forgot it.
    return _retrigger(o, "the request was lost with its pod")


def _retrigger(o: Observed, why: str, *, counted: bool = True, delay: float = RETRY_SHORT) -> Decision:
    if counted and o.status.triggers >= MAX_TRIGGERS:
        return Decision(FAIL, FAILED, "TooManyAttempts", f"{why}; gave up after {o.status.triggers} triggers")
    job = o.job
    if job is None:
        return Decision(FAIL, FAILED, "JobNotFound", f"{why}, and the StreamingJob no longer exists")
    if job.phase != "Running" or not job.pod_ip:
        return Decision(WAIT, IN_PROGRESS, "JobNotRunning", f"{why}; waiting for the job to be Running",
                        RETRY_LONG)
    return Decision(TRIGGER, IN_PROGRESS, "Retriggered", f"{why}; triggering again in pod {job.pod}", delay,
                    extra={"counted": counted})


def savepoints_named(job_spec: dict[str, Any] | None, job_status: dict[str, Any] | None) -> set[str]:
    """Savepoints a StreamingJob may still restore from: its spec.restoreFrom, the lineage its
    attempts continue, a drain's target, the next or rollback point the operator chose."""
    tracking = (job_status or {}).get("tracking") or {}
    points = [((job_spec or {}).get("restoreFrom") or {}), (tracking.get("lineage") or {}).get("point") or {}]
    points += [tracking.get(k) or {} for k in ("nextPoint", "rollbackPoint", "attemptPoint", "restoreFrom")]
    names = {p.get("savepoint") for p in points if isinstance(p, dict)}
    names.add(tracking.get("restoreTarget"))
    names.add(((tracking.get("upgrade") or {}).get("rollbackPoint") or {}).get("savepoint"))
    return {n for n in names if isinstance(n, str) and n}


def decide_delete(status: SavepointStatus, retain: bool, now: datetime, checkpoint_timeout: float,
                  in_use: bool = False) -> str:
    """On deletion: 'keep' the data, 'delete' it, or 'wait' while a triggered savepoint may still be
    written (deleting first would leave the late copy behind, unowned). `in_use`: the job still
    names it (savepoints_named), so deleting it could take away the point an attempt restores."""
    if retain or status.storage is None or status.adopted or in_use:
        return "keep"  # retained, not ours, or still needed: nothing to delete
    in_flight = status.state == IN_PROGRESS and status.triggered_at is not None
    if in_flight and _age(now, status.triggered_at) <= TIMEOUT_FACTOR * checkpoint_timeout:
        return "wait"
    return "delete"
