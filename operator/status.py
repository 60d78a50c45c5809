"""Status conditions (Ready, CheckpointHealthy, Progressing, Degraded) from the decided status.

Pure. A condition's lastTransitionTime changes only when its status does, so
`kubectl wait --for=condition=Ready` and alerting see real transitions, not every reconcile.
"""

from __future__ import annotations

from typing import Any

from .checkpoints import iso

CONDITION_TYPES = ("Ready", "CheckpointHealthy", "Progressing", "Degraded")
OWN_STATUS_SKIP = ("kopf",)  # kopf's bookkeeping in status is not ours (to diff, or to decide on)
PHASES = ("Pending", "Running", "Recovering", "Upgrading", "Suspended", "Failed", "Finished")


def _bool(value: bool) -> str:
    return "True" if value else "False"


def desired_conditions(status: dict[str, Any]) -> dict[str, tuple[str, str, str]]:
    """type -> (status, reason, message) for the status the machine decided."""
    phase = status.get("phase") or "Pending"
    tr = status.get("tracking") or {}
    ready = phase == "Running" and bool(tr.get("podReady"))
    running = phase == "Running"
    healthy = bool(tr.get("checkpointHealthy", True)) if running else True
    latest = (status.get("latestCheckpoint") or {}).get("id")
    failure = status.get("lastFailure") or {}
    out = {
        "Ready": (_bool(ready), "Running" if ready else phase,
                  f"attempt {status.get('attempt')} is running" if ready else f"job is {phase}"),
        "CheckpointHealthy": (_bool(healthy), tr.get("checkpointReason", "NotRunning") if running else "NotRunning",
                              f"latest checkpoint {latest}" if latest else "no checkpoint yet"),
        "Progressing": (_bool(phase in ("Pending", "Recovering", "Upgrading")), phase,
                        f"job is {phase}"),
    }
    degraded = phase in ("Failed", "Recovering") or not healthy
    if phase == "Failed":
        why = failure.get("reason", "Failed")
    elif phase == "Recovering":
        why = failure.get("reason", "Recovering")
    else:
        why = "NoRecentCheckpoint" if not healthy else "AsExpected"
    out["Degraded"] = (_bool(degraded), why, failure.get("message", "") if degraded else "")
    return out


def apply_conditions(status: dict[str, Any], generation: int, now: float) -> None:
    """Set status.conditions in place, keeping lastTransitionTime where the status is unchanged."""
    previous = {c.get("type"): c for c in status.get("conditions") or []}
    conditions = []
    for ctype, (value, reason, message) in desired_conditions(status).items():
        old = previous.get(ctype) or {}
        since = old.get("lastTransitionTime") if old.get("status") == value else None
        conditions.append({"type": ctype, "status": value, "reason": reason, "message": message,
                           "observedGeneration": generation, "lastTransitionTime": since or iso(now)})
    status["conditions"] = conditions
