"""Pure checkpoint bookkeeping: when to trigger, how a trigger ended, what status records.

Facts come from two places: the runtime's GET /status (while the pod is up) and the store's
manifests (the only source after an operator restart or while the runtime is unreachable).
Both are merged by checkpoint id, so neither order nor repetition matters.
"""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

from .model import CheckpointFact
from .status_model import JobStatus, PendingTrigger, Tracking

HISTORY = 10  # status.checkpoints keeps the newest this many
UNHEALTHY_INTERVALS = 3  # no completed checkpoint for this many intervals -> CheckpointHealthy=False
FINAL = ("completed", "failed", "timed_out", "skipped")


def iso(ts: float) -> str:
    return datetime.fromtimestamp(int(ts), UTC).isoformat().replace("+00:00", "Z")


def parse_time(text: str | None) -> float | None:
    if not text:
        return None
    try:
        return datetime.fromisoformat(text.replace("Z", "+00:00")).timestamp()
    except ValueError:
        return None


def number(cid: str) -> int:
    try:
        return int(cid.rsplit("-", 1)[1])
    except (IndexError, ValueError):
        return -1


def fact_from_runtime(latest: dict[str, Any] | None) -> CheckpointFact | None:
    """The runtime's `latestCheckpoint` ({id, batchId, completed, bytes, newBytes}) as a fact."""
    if not latest or not latest.get("id"):
        return None
    return CheckpointFact(id=latest["id"], batch=latest.get("batchId"), completed_at=latest.get("completed", ""),
                          bytes=latest.get("bytes"), new_bytes=latest.get("newBytes"))


def merge_history(status: JobStatus, *sources: list[CheckpointFact]) -> list[CheckpointFact]:
    """Known checkpoints, oldest first, bounded; a newer source never loses an older record."""
    by_id: dict[str, CheckpointFact] = {}
    for rec in status.checkpoints or []:
        by_id[rec.id] = CheckpointFact.from_record(rec)
    latest = status.latest_checkpoint
    if latest and latest.id:
        by_id.setdefault(latest.id, CheckpointFact.from_record(latest))
    for facts in sources:
        for fact in facts:
            by_id[fact.id] = fact
    return sorted(by_id.values(), key=lambda f: number(f.id))[-HISTORY:]


def trigger_lag(tracking: Tracking, interval: float, now: float) -> float | None:
    """Seconds past due if a checkpoint trigger is due now, else None. One trigger at a time: the
    next is scheduled one interval after the previous one was made (or after the job got Running)."""
    if tracking.pending_trigger:
        return None
    last = tracking.last_trigger_at or tracking.running_since
    if last is None:
        return None
    due = last + interval
    return now - due if now >= due else None


def next_trigger_in(tracking: Tracking, interval: float, now: float) -> float:
    last = tracking.last_trigger_at or tracking.running_since or now
    return max(0.0, last + interval - now)


TRIGGER_BOOKKEEPING = frozenset({"lastTriggerAt", "pendingTrigger"})


def only_trigger_bookkeeping(patch: dict[str, Any]) -> bool:
    """A status merge patch that records no more than a trigger being made: it may wait for the
    trigger's completion to be written with it (an operator restarted meanwhile triggers again at
    once: one extra checkpoint, never a lost record)."""
    tracking = patch.get("tracking")
    return set(patch) == {"tracking"} and isinstance(tracking, dict) and set(tracking) <= TRIGGER_BOOKKEEPING


def follow_trigger(pending: PendingTrigger, runtime: dict[str, Any] | None, latest_completed_at: float | None,
                   timeout: float, now: float) -> str | None:
    """How the pending trigger ended (completed | failed | timed_out | skipped) or None if open."""
    wanted = pending.id
    for req in (runtime or {}).get("recentCheckpoints") or []:
        if wanted and wanted in (req.get("id"), req.get("requestId")) and req.get("status") in FINAL:
            return req["status"]
    # The request id may be unknown (the operator died before recording it) or gone from the
    # runtime's short history: a checkpoint completed after the trigger answers it as well.
    if latest_completed_at is not None and latest_completed_at > pending.at:
        return "completed"
    if now - pending.at > timeout:
        return "timed_out"
    return None


def checkpoint_healthy(latest_completed_at: float | None, running_since: float | None, interval: float,
                       now: float) -> tuple[bool, str]:
    """(healthy, reason): unhealthy after UNHEALTHY_INTERVALS intervals without a completed
    checkpoint, counted from the later of the last completion and the start of this run."""
    times = [t for t in (latest_completed_at, running_since) if t is not None]
    if running_since is None or not times:
        return True, "NotRunning"
    since = max(times)
    if now - since > UNHEALTHY_INTERVALS * interval:
        return False, "NoRecentCheckpoint"
    return True, "CheckpointCompleted" if latest_completed_at else "WaitingForFirstCheckpoint"
