"""A job's Spark executor pods as the plugin shows them (spark.master k8s, docs/design.md §9). Pure.

Spark's Kubernetes backend labels every executor `spark-role=executor`, and the runtime adds
`sparkpoint.dev/job` and `sparkpoint.dev/attempt` (runtime/spark/executors.py): the plugin finds a
job's executors by those labels, whichever attempt started them, so executors an old attempt left
behind show up beside the current attempt's.
"""

from __future__ import annotations

import re
from datetime import datetime
from typing import Any

from sparkpoint.runtime.spec import API_GROUP

from .format import age, table

JOB_LABEL, ATTEMPT_LABEL = f"{API_GROUP}/job", f"{API_GROUP}/attempt"
ROLE_LABEL, EXECUTOR_ROLE = "spark-role", "executor"
HEADERS = ["NAME", "ATTEMPT", "PHASE", "READY", "NODE", "RESTARTS", "AGE"]


def selector(job: str, attempt: int | None = None) -> str:
    """The label selector of a job's executor pods (of one attempt, if given)."""
    parts = [f"{JOB_LABEL}={job}", f"{ROLE_LABEL}={EXECUTOR_ROLE}"]
    if attempt is not None:
        parts.append(f"{ATTEMPT_LABEL}={attempt}")
    return ",".join(parts)


def _attempt(pod: dict[str, Any]) -> int | None:
    value = ((pod.get("metadata") or {}).get("labels") or {}).get(ATTEMPT_LABEL)
    return int(value) if isinstance(value, str) and value.isdigit() else None


def _order(pod: dict[str, Any]) -> tuple[int, list[int | str]]:
    """By attempt, then by name with numbers compared as numbers (exec-2 before exec-10)."""
    name = (pod.get("metadata") or {}).get("name", "")
    return (_attempt(pod) or 0, [int(p) if p.isdigit() else p for p in re.split(r"(\d+)", name)])


def phase(pod: dict[str, Any]) -> str:
    """The pod's phase, or Terminating once it is being deleted (as kubectl shows it)."""
    if (pod.get("metadata") or {}).get("deletionTimestamp"):
        return "Terminating"
    return (pod.get("status") or {}).get("phase") or "Pending"


def executor_row(pod: dict[str, Any], now: datetime) -> list[Any]:
    meta, status, spec = pod.get("metadata") or {}, pod.get("status") or {}, pod.get("spec") or {}
    containers = status.get("containerStatuses") or []
    ready = sum(1 for c in containers if c.get("ready"))
    restarts = sum(int(c.get("restartCount") or 0) for c in containers)
    return [meta.get("name"), _attempt(pod), phase(pod), f"{ready}/{len(spec.get('containers') or containers)}",
            spec.get("nodeName"), restarts, age(meta.get("creationTimestamp"), now)]


def executor_rows(pods: list[dict[str, Any]], now: datetime) -> tuple[list[str], list[list[Any]]]:
    """`kubectl sparkpoint executors JOB`: every executor pod of the job, oldest attempt first."""
    return HEADERS, [executor_row(p, now) for p in sorted(pods, key=_order)]


def status_section(pods: list[dict[str, Any]], attempt: int | None, now: datetime) -> list[str]:
    """The lines `kubectl sparkpoint status` adds for a k8s-master job: the current attempt's
    executors, and how many pods of older attempts are still there (they should be gone with their
    driver pod: the garbage collector deletes them by owner reference)."""
    current = [p for p in pods if attempt is not None and _attempt(p) == attempt]
    older = [p for p in pods if p not in current]
    if not current:
        lines = [f"Executors:        none of attempt {attempt if attempt is not None else '<none>'}"]
    else:
        lines = ["Executors:"] + ["  " + line for line in table(*executor_rows(current, now)).splitlines()]
    if older:
        attempts = sorted({_attempt(p) for p in older}, key=lambda a: -1 if a is None else a)
        lines.append(f"  {len(older)} executor pod(s) of other attempts still present (attempt "
                     f"{', '.join('<none>' if a is None else str(a) for a in attempts)}): "
                     "kubectl sparkpoint executors JOB")
    return lines
