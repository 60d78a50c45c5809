"""Names and facts one attempt derives from its job and work dir (runner.py's helpers)."""

from __future__ import annotations

import os
import uuid
from pathlib import Path

from sparkpoint.runtime.checkpoint.freeze import latest_committed_batch
from sparkpoint.runtime.store import JobRef


def app_name(job: JobRef, attempt: int, restart: int = 0) -> str:
    """Spark's application name, which the live UI and the History Server list (docs/design.md §9):
    the operator's attempt as status.attempt shows it, and the k-th in-place restart of the attempt's
    pod as `-restart-k`."""
    name = f"sparkpoint-{job.namespace}-{job.name}-attempt-{attempt}"
    return f"{name}-restart-{restart}" if restart else name


def history_attempt(launch: int | None, start: int) -> int:
    """The attempt event logs and the app name carry: the operator's (status.attempt); a local run
    without one counts every start as an attempt of its own (the store's number)."""
    return launch if launch is not None and launch >= 1 else start


def latest_planned_batch(hot_dir: Path) -> int | None:
    """The highest batch Spark has planned (offsets/N), None before the first."""
    try:
        return max((int(n) for n in os.listdir(hot_dir / "offsets") if n.isdigit()), default=None)
    except FileNotFoundError:
        return None


def batch_in_flight(hot_dir: Path) -> bool:
    """True while Spark has planned a batch (offsets/N) that has not committed (commits/N)."""
    planned = latest_planned_batch(hot_dir)
    if planned is None:
        return False
    committed = latest_committed_batch(hot_dir)
    return planned > (committed if committed is not None else -1)


def launch() -> int | None:
    """The operator's attempt number of this pod (SPARKPOINT_ATTEMPT); None outside Kubernetes."""
    value = os.environ.get("SPARKPOINT_ATTEMPT", "")
    return int(value) if value.isdigit() else None


def job_uid(job: JobRef) -> str:
    """The StreamingJob's uid (the operator sets it: each job of a name is a new incarnation); outside
    Kubernetes a stable stand-in per name, so every `sparkpoint run` of a name is one incarnation."""
    return os.environ.get("SPARKPOINT_JOB_UID") or str(uuid.uuid5(uuid.NAMESPACE_URL, f"sparkpoint:{job}"))
