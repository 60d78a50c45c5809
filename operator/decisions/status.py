"""Status conditions (Ready, CheckpointHealthy, Progressing, Degraded; StandbyReady with spec.standby)
from the decided status.

Pure. A condition's lastTransitionTime changes only when its status does, so
`kubectl wait --for=condition=Ready` and alerting see real transitions, not every reconcile.
"""

from __future__ import annotations

from typing import Literal

from .checkpoints import iso
from .status_model import Condition, JobStatus

CONDITION_TYPES = ("Ready", "CheckpointHealthy", "Progressing", "Degraded")
STANDBY_CONDITION = "StandbyReady"  # beside them while spec.standby is on (status.standby is set)
OWN_STATUS_SKIP = ("kopf",)  # kopf's bookkeeping in status is not ours (to diff, or to decide on)
PHASES = ("Pending", "Running", "Recovering", "Upgrading", "Suspended", "Failed", "Finished")


def _bool(value: bool) -> Literal["True", "False"]:
    return "True" if value else "False"


def desired_conditions(status: JobStatus) -> dict[str, tuple[Literal["True", "False"], str, str]]:
    """type -> (status, reason, message) for the status the machine decided."""
    phase = status.phase or "Pending"
    tr = status.tracking
    ready = phase == "Running" and bool(tr.pod_ready)
    running = phase == "Running"
    healthy = tr.checkpoint_healthy if running else True
    latest = status.latest_checkpoint.id if status.latest_checkpoint else None
    failure = status.last_failure
    reason, message = (failure.reason, failure.message) if failure else (None, None)
    out = {
        "Ready": (_bool(ready), "Running" if ready else phase,
                  f"attempt {status.attempt} is running" if ready else f"job is {phase}"),
        "CheckpointHealthy": (_bool(healthy), (tr.checkpoint_reason or "NotRunning") if running else "NotRunning",
                              f"latest checkpoint {latest}" if latest else "no checkpoint yet"),
        "Progressing": (_bool(phase in ("Pending", "Recovering", "Upgrading")), phase,
                        f"job is {phase}"),
    }
    degraded = phase in ("Failed", "Recovering") or not healthy
    if phase == "Failed":
        why = reason or "Failed"
    elif phase == "Recovering":
        why = reason or "Recovering"
    else:
        why = "NoRecentCheckpoint" if not healthy else "AsExpected"
    out["Degraded"] = (_bool(degraded), why, (message or "") if degraded else "")
    standby = status.standby  # only for a job with spec.standby on (decisions/standby.py)
    if standby is not None:
        out[STANDBY_CONDITION] = (_bool(bool(standby.ready)), "Following" if standby.ready else "NotReady",
                               f"standby {standby.pod} would be promoted" if standby.ready
                               else standby.message or "no standby")
    return out


def apply_conditions(status: JobStatus, generation: int, now: float) -> None:
    """Set status.conditions in place, keeping lastTransitionTime where the status is unchanged."""
    previous = {c.type: c for c in status.conditions or []}
    conditions = []
    for ctype, (value, reason, message) in desired_conditions(status).items():
        old = previous.get(ctype)
        since = old.last_transition_time if old is not None and old.status == value else None
        conditions.append(Condition(type=ctype, status=value, reason=reason, message=message,
                                    observed_generation=generation, last_transition_time=since or iso(now)))
    status.conditions = conditions
