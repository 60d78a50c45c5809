"""A deleted job's directory on its shared hot volume, removed by the finalizer (docs/design.md §9). Pure.

The operator does not mount job volumes, so once a deleted job's runtime pods are gone
(deletion.py), and its executors too (they go with the driver pod that owns them), it runs one pod
of the job's image with the hot volume mounted: `sparkpoint hot-volume remove-job` deletes exactly
`<namespace>/<job>/<uid>` of this StreamingJob's uid (runtime/service/job_dirs.py). Nothing can
read that directory again: the job is gone, and a job created later under its name gets a new uid.
Kubernetes' own garbage collection cannot do it (it deletes objects, not files on a volume), nor can
the job's GC sidecar (it dies with the job's pod), so it is a step of the finalizer the job has
anyway. It must always finish: a cleanup that fails, or does not end within CLEANUP_FOR, leaves
the directory with a Warning Event naming it, and the next job of the same name removes it
(job_dirs.remove_other_incarnations).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Literal

from sparkpoint.runtime.spec import JobSpec, pod_template_document, scheduling

from .builders import (
    HOT_DIR,
    TMP_DIR,
    JobRef,
    _meta,
    container_security_context,
    hot_volume_source,
    pod_security_context,
)

# `sparkpoint hot-volume remove-job`'s exit code when the directory was not there
# (runtime/cli/hot_volume.py ABSENT_EXIT; the operator imports no runtime CLI).
ABSENT_EXIT = 3
CLEANUP_FOR = 300.0  # seconds from the deletion's start; then the directory is left (Event)
COMPONENT = "hot-cleanup"


def cleanup_pod_name(job: JobRef) -> str:
    # Attempt pods are <job>-<number> and executors <job>-<number>-exec-<n>: never this name.
    return f"{job.name}-hot-cleanup"


def needs_cleanup(spec: JobSpec | None) -> bool:
    return spec is not None and spec.checkpoint.hot_volume is not None


def build_cleanup_pod(job: JobRef, spec: JobSpec) -> dict[str, Any]:
    """Runs once (restartPolicy Never), Pod Security restricted like the job's pods, no token; where
    the job's pods may run (spec.podTemplate's scheduling fields: its nodes may be tainted, or the
    image in a registry that needs a pull secret)."""
    container = {
        "name": "cleanup",
        "image": spec.image,
        "command": ["sparkpoint", "hot-volume", "remove-job", "--root", HOT_DIR, "--namespace", job.namespace,
                    "--job", job.name, "--uid", job.uid, "--json"],
        "resources": {"requests": {"cpu": "50m", "memory": "64Mi"}, "limits": {"memory": "256Mi"}},
        "securityContext": container_security_context(),
        "volumeMounts": [{"name": "hot", "mountPath": HOT_DIR}, {"name": "tmp", "mountPath": TMP_DIR}],
    }
    return {"apiVersion": "v1", "kind": "Pod", "metadata": _meta(job, cleanup_pod_name(job), COMPONENT),
            "spec": {"restartPolicy": "Never", "containers": [container], "automountServiceAccountToken": False,
                     "securityContext": pod_security_context(),
                     "volumes": [{"name": "hot", **hot_volume_source(spec)}, {"name": "tmp", "emptyDir": {}}],
                     **scheduling(pod_template_document(spec.pod_template))}}


def created_for(pod: dict[str, Any], uid: str) -> bool:
    """Whether this StreamingJob (uid) created the cleanup pod. Every job of a name has a cleanup pod
    of the same name, and an earlier job's may still be there: deleted, but Terminating (its grace
    period, or a node that is gone). Its phase says nothing about this job's directory."""
    refs = (pod.get("metadata") or {}).get("ownerReferences") or []
    return any(ref.get("uid") == uid for ref in refs)


def cleanup_exit_code(pod: dict[str, Any] | None) -> int | None:
    """The cleanup container's exit code once it has terminated, else None."""
    for cs in ((pod or {}).get("status") or {}).get("containerStatuses") or []:
        if cs.get("name") == "cleanup":
            code = ((cs.get("state") or {}).get("terminated") or {}).get("exitCode")
            return code if isinstance(code, int) else None
    return None


Next = Literal["wait-executors", "wait-earlier", "create", "wait", "done", "absent", "give-up"]


@dataclass(frozen=True)
class CleanupStep:
    next: Next
    why: str = ""


def cleanup_step(executors_left: int, pod_phase: str | None, deleting_since: float | None, now: float,
                 earlier_pod: bool = False, exit_code: int | None = None, host_path: bool = False) -> CleanupStep:
    """What the finalizer does about the hot volume this round. pod_phase: the cleanup pod's phase,
    None while there is none. deleting_since: the StreamingJob's deletionTimestamp. earlier_pod: the
    pod of that name was created for an earlier job of the name (created_for): wait for it to go.
    exit_code: the cleanup container's (cleanup_exit_code). The directory not being there is
    "absent" on a hostPath (each node has its own: the job's may be on another node, left behind)
    and simply done on a claim (one volume: nothing was there to remove)."""
    late = deleting_since is not None and now - deleting_since > CLEANUP_FOR
    if earlier_pod:
        if late:
            return CleanupStep("give-up", f"an earlier job's cleanup pod of this name was still there "
                                          f"{CLEANUP_FOR:g}s after the deletion")
        return CleanupStep("wait-earlier")
    if pod_phase == "Succeeded":
        return CleanupStep("done")
    if pod_phase == "Failed" and exit_code == ABSENT_EXIT:
        if not host_path:
            return CleanupStep("done")
        return CleanupStep("absent", "the cleanup pod found no such directory on its node's hostPath (the "
                                     "job's pods may have run on another node, where it is left)")
    if pod_phase == "Failed":
        return CleanupStep("give-up", "the cleanup pod failed (its log names what stayed)")
    if late:
        return CleanupStep("give-up", f"the cleanup did not finish within {CLEANUP_FOR:g}s of the deletion")
    if pod_phase is not None:
        return CleanupStep("wait")
    if executors_left:  # an executor still running could write into the directory being removed
        return CleanupStep("wait-executors")
    return CleanupStep("create")
