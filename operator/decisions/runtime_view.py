"""When a round may decide on the runtime's last answer to GET /status instead of asking again.

At 1,000 jobs the runtime's GET /status was the largest share of the operator's event loop (a
round per job for each checkpoint trigger and one more for its completion). A round that only
triggers the next checkpoint learns nothing from a fresh answer that the last one did not say:
the previous trigger has completed (that round asked), no savepoint or drain is pending, the pod
is the same and has not restarted, and nothing woke the job (a pod event or a spec change always
asks again). If the runtime has died meanwhile, the trigger's POST fails and the next round asks.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from .model import PodObs
from .status_model import JobStatus

REUSE_MAX_AGE = 60.0  # an answer older than this is never reused


@dataclass(frozen=True)
class Answer:
    pod: str
    restarts: int
    at: float
    doc: dict[str, Any]


def may_reuse(last: Answer | None, pod: PodObs, status: JobStatus, woken: bool, now: float) -> bool:
    if last is None or woken or not pod.ready:
        return False
    if last.pod != pod.name or last.restarts != pod.restart_count or not 0 <= now - last.at <= REUSE_MAX_AGE:
        return False
    tr = status.tracking
    return status.phase == "Running" and not (tr.pending_trigger or tr.pending_savepoint or tr.drain)
