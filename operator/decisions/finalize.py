"""What deleting a StreamingJob does, decided purely (reconcile.finalize does the I/O).

Deletion drains the job (the runtime's final checkpoint), then applies gc.onDelete. It must always
finish: a pod stuck Terminating (its node is gone) is force-deleted after a bound, and data that
cannot be deleted (the Secret is already gone, as in a namespace deletion, or the store refuses for
longer than DELETE_DATA_FOR) is left in the store with a Warning Event naming where, rather than
holding the CR (and its namespace) forever.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from .model import DeletePod, PodObs, StopRuntime
from .step import DRAIN_GRACE, stuck_terminating

DELETE_DATA_FOR = 300.0  # how long deleting the job's data (gc.onDelete: delete) is retried


@dataclass
class FinalStep:
    actions: list = field(default_factory=list)  # StopRuntime (to a pod by name) and DeletePod
    drain_started: bool = False  # record deleteDrainAt = now
    pods_left: int = 0  # >0: wait and come back


@dataclass(frozen=True)
class DrainTo:
    """POST /stop (no savepoint) to this pod."""

    pod: str
    stop: StopRuntime = StopRuntime()


def drain_pods(pods: list[PodObs], drain_at: float | None, now: float) -> FinalStep:
    """The first call asks each drainable pod to stop; later calls delete pods that are not
    draining (or took longer than DRAIN_GRACE), and force-delete those whose node is lost or that
    stay Terminating past step.STUCK_TERMINATING."""
    step = FinalStep(pods_left=len(pods), drain_started=drain_at is None and bool(pods))
    for pod in pods:
        if pod.deleting:
            if pod.node_lost or stuck_terminating(pod, now):
                step.actions.append(DeletePod(pod.name, force=True))
        elif drain_at is None and pod.can_drain:
            step.actions.append(DrainTo(pod.name))
        elif drain_at is None or now - drain_at > DRAIN_GRACE or pod.exit_code is not None \
                or pod.phase not in ("Running", "Pending"):
            step.actions.append(DeletePod(pod.name, force=pod.node_lost))
    return step


def give_up_on_data(delete_started: float | None, now: float) -> bool:
    """True once deleting the job's data has failed for DELETE_DATA_FOR: finish without it."""
    return delete_started is not None and now - delete_started > DELETE_DATA_FOR
