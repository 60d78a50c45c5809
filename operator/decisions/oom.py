"""The runtime container killed by the kernel at its memory limit (reason OOMKilled).

The kubelet would restart it in place with the same limit, where the same work gets it killed again:
the attempt is lost as a failure of the job itself (lastFailure OOMKilled naming the limit, a Warning
Event, a new attempt after the backoff, counted toward maxRestarts), not a local recovery.
"""

from __future__ import annotations

from .model import PodObs

OOM_KILLED = "OOMKilled"


def oom_kill_message(pod: PodObs, seen_restarts: int | None, memory_limit: str) -> str | None:
    """What lastFailure says when the runtime's newest termination is an OOM kill the operator has
    not counted yet (the container is down now, or restarted in place since the last round); else None."""
    if pod.termination_reason != OOM_KILLED:
        return None
    if pod.exit_code is None and pod.restart_count <= (seen_restarts or 0):
        return None  # a restart the operator counted before (an older operator's local recovery)
    code = pod.exit_code if pod.exit_code is not None else pod.last_exit_code
    exit_text = f", exit {code}" if code is not None else ""
    return (f"runtime container of {pod.name} was OOM-killed at its memory limit {memory_limit} "
            f"(spec.spark.resources.memory{exit_text}); raise it if the job needs more")
