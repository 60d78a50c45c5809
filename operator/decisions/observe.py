"""Pure translations of what the API server and the store return into the machine's observations."""

from __future__ import annotations

import json
from typing import Any

from sparkpoint.runtime.spec import API_GROUP, API_VERSION, KIND
from sparkpoint.runtime.store import Manifest

from .checkpoints import parse_time
from .failure_causes import cause_of
from .liveness import NodeObs
from .model import RESCALE_FAILED_EXIT, RESTORE_FAILED_EXIT, CheckpointFact, PodObs, RescaleFailure
from .runtime_pod import STANDBY_POINT_ANNOTATION, STANDBY_SPEC_ANNOTATION

RUNTIME_CONTAINER = "runtime"
_LOST_REASONS = ("NodeLost", "NodeShutdown", "Terminated")


def _runtime_status(pod: dict[str, Any]) -> dict[str, Any]:
    for cs in (pod.get("status") or {}).get("containerStatuses") or []:
        if cs.get("name") == RUNTIME_CONTAINER:
            return cs
    return {}


def failed_points(*terminations: dict[str, Any] | None) -> tuple[str, ...] | None:
    """The points named by the runtime's termination message after exit 3 (runtime/cli/run.py
    writes {"restoreFailed": {"points": [...]}}), from the newest termination that has one."""
    for term in terminations:
        if not term or term.get("exitCode") != RESTORE_FAILED_EXIT:
            continue
        try:
            doc = json.loads(term.get("message") or "")
            points = doc["restoreFailed"]["points"]
        except (ValueError, TypeError, KeyError):
            continue
        if isinstance(points, list) and all(isinstance(p, str) for p in points):
            return tuple(points)
    return None


def rescale_failure(*terminations: dict[str, Any] | None) -> RescaleFailure | None:
    """What the runtime's termination message after exit 4 says it could not repartition
    (runtime/cli/run.py writes {"rescaleFailed": {"from", "to", "reason", "error"}}), from the newest
    termination that has one; the error text stays in the pod (it may be long)."""
    for term in terminations:
        if not term or term.get("exitCode") != RESCALE_FAILED_EXIT:
            continue
        try:
            doc = json.loads(term.get("message") or "")["rescaleFailed"]
        except (ValueError, TypeError, KeyError):
            continue
        if not isinstance(doc, dict):
            continue
        source, target, reason = doc.get("from"), doc.get("to"), doc.get("reason")
        return RescaleFailure(source=source if type(source) is int else None,
                              target=target if type(target) is int else None,
                              reason=reason[:80] if isinstance(reason, str) else None)  # a label; bounded
    return None


def controller_job_uid(meta: dict[str, Any]) -> str | None:
    """The uid of the StreamingJob that controls the object (its controller owner reference)."""
    for ref in meta.get("ownerReferences") or []:
        if ref.get("controller") and ref.get("kind") == KIND and ref.get("apiVersion") == f"{API_GROUP}/{API_VERSION}":
            return ref.get("uid") or None
    return None


def pod_observation(pod: dict[str, Any]) -> PodObs:
    meta, status = pod.get("metadata") or {}, pod.get("status") or {}
    annotations = meta.get("annotations") or {}
    try:
        attempt = int(annotations.get(f"{API_GROUP}/attempt", "0"))
    except ValueError:
        attempt = 0
    cs = _runtime_status(pod)
    state, last = cs.get("state") or {}, cs.get("lastState") or {}
    terminated = state.get("terminated")
    last_terminated = last.get("terminated") or terminated
    conditions = {c.get("type"): c for c in status.get("conditions") or []}
    ready = (conditions.get("Ready") or {}).get("status") == "True"
    # A node that stopped reporting leaves Ready=Unknown on its pods (and later the pod phase).
    node_lost = (conditions.get("Ready") or {}).get("status") == "Unknown" or status.get("reason") in _LOST_REASONS
    return PodObs(
        name=meta.get("name", ""),
        attempt=attempt,
        phase=status.get("phase") or "Pending",
        ready=ready and not meta.get("deletionTimestamp"),
        deleting=bool(meta.get("deletionTimestamp")),
        ip=status.get("podIP"),
        restart_count=int(cs.get("restartCount") or 0),
        last_exit_code=(last_terminated or {}).get("exitCode"),
        exit_code=(terminated or {}).get("exitCode"),
        termination_reason=(terminated or last.get("terminated") or {}).get("reason"),
        reason=status.get("reason"),
        node_lost=node_lost,
        deleting_since=parse_time(meta.get("deletionTimestamp")),
        failed_points=failed_points(terminated, last.get("terminated")),
        rescale_failure=rescale_failure(terminated, last.get("terminated")),
        known_cause=cause_of(terminated, last.get("terminated")),
        owner_uid=controller_job_uid(meta),
        node=(pod.get("spec") or {}).get("nodeName") or None,
        unschedulable=_unschedulable(conditions.get("PodScheduled")),
        standby_spec=annotations.get(STANDBY_SPEC_ANNOTATION) or None,
        standby_point=annotations.get(STANDBY_POINT_ANNOTATION) or None,
    )


def _unschedulable(scheduled: dict[str, Any] | None) -> str | None:
    if not scheduled or scheduled.get("status") != "False" or scheduled.get("reason") != "Unschedulable":
        return None
    return (scheduled.get("message") or "Unschedulable")[:300]


def fact_from_manifest(manifest: Manifest) -> CheckpointFact:
    when = manifest.completion_time.isoformat().replace("+00:00", "Z")
    return CheckpointFact(id=manifest.id, batch=manifest.batch_id, completed_at=when,
                          bytes=manifest.totals.bytes, new_bytes=manifest.totals.new_bytes)


def node_observation(name: str, node: dict[str, Any] | None) -> NodeObs:
    """The Node's Ready condition; `node` None: the API server says it does not exist (404)."""
    if node is None:
        return NodeObs(name, exists=False)
    for cond in (node.get("status") or {}).get("conditions") or []:
        if cond.get("type") == "Ready":
            value = {"True": True, "False": False}.get(cond.get("status") or "")
            return NodeObs(name, ready=value, ready_since=parse_time(cond.get("lastTransitionTime")))
    return NodeObs(name, ready=None)
