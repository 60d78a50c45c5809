"""Periodic savepoints (spec.savepoint.interval): when the next one is due, and which old ones go.
Pure; machine.py turns the answers into actions.

They are named `periodic-<unix seconds>`, so their names sort by age and never collide with the
savepoints of a nonce, a drain or a StreamingJobSavepoint, which are never pruned here.
"""

from __future__ import annotations

from typing import Any

from .status_model import Tracking

PREFIX = "periodic-"


def periodic_name(now: float) -> str:
    return f"{PREFIX}{int(now)}"


def periodic_due(tracking: Tracking, interval: float | None, now: float) -> bool:
    """True when a periodic savepoint should be requested now. The first one comes one interval
    after the job first runs with an interval set (that moment is recorded in tracking)."""
    if not interval:
        tracking.periodic_savepoint_at = None
        return False
    if tracking.periodic_savepoint_at is None:
        tracking.periodic_savepoint_at = now
    return now - tracking.periodic_savepoint_at >= interval


def to_prune(saved: list[dict[str, Any]] | None, retain: int, keep: set[str]) -> list[str]:
    """Periodic savepoints beyond the newest `retain` (0: keep all), except those in `keep` (a
    restore point in use), oldest first."""
    if not saved or retain <= 0:
        return []
    periodic = sorted((s["name"] for s in saved if s["name"].startswith(PREFIX)),
                      key=lambda n: int(n[len(PREFIX):]) if n[len(PREFIX):].isdigit() else -1)
    return [n for n in periodic[:-retain] if n not in keep]
