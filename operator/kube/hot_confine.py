"""A shared hot volume reaches no further than the job (issue 41; docs/security.md):

  - hostPath only under the prefix the operator was started with (--hot-volume-host-path-prefix,
    the chart's hotVolume.allowedHostPathPrefix); without one, no hostPath at all. A job asking for
    another path is Failed with a status message naming the field and the prefix.
  - The job's driver, GC sidecar and executors mount only the job's own `<namespace>/<job>/<uid>`
    directory of the volume (a subPath, at the same path inside the pod as before, so every path the
    runtime and Spark use is unchanged); only the finalizer's cleanup pod mounts the volume's root.
Pure.
"""

from __future__ import annotations

import posixpath
from typing import Any

from sparkpoint.runtime.spec import JobSpec

from .builders import HOT_DIR, JobRef

HOST_PATH_FIELD = "spec.checkpoint.hotVolume.hostPath.path"
# The executors' pod template mounts the same subPath (runtime/spark/executors.py reads this).
HOT_SUBPATH_ENV = "SPARKPOINT_HOT_VOLUME_SUBPATH"


def host_path_refusal(spec: JobSpec, allowed_prefix: str | None) -> str | None:
    """Why the job may not run on its hostPath hot volume, or None."""
    hot = spec.checkpoint.hot_volume
    if hot is None or hot.host_path is None:
        return None
    path = posixpath.normpath(hot.host_path.path)
    if not allowed_prefix:
        return (f"{HOST_PATH_FIELD}: hostPath hot volumes are off on this cluster (the operator's "
                "--hot-volume-host-path-prefix is not set); use a persistentVolumeClaim")
    prefix = posixpath.normpath(allowed_prefix)
    if path != prefix and not path.startswith(prefix.rstrip("/") + "/"):
        return f"{HOST_PATH_FIELD}: {path} is not under the allowed prefix {prefix}"
    return None


def job_subpath(job: JobRef) -> str:
    return f"{job.namespace}/{job.name}/{job.uid}"


def confine_hot_mounts(pod: dict[str, Any], job: JobRef) -> dict[str, Any]:
    """Every container's mount of the shared hot volume narrowed to the job's own directory, at
    the path that directory had under the volume's root; the runtime container learns the subPath
    for its executors. A pod on the pod's own emptyDir (no hotVolume) is left alone."""
    volumes = {v["name"]: v for v in pod["spec"].get("volumes", [])}
    if "emptyDir" in volumes.get("hot", {"emptyDir": {}}):
        return pod
    sub = job_subpath(job)
    for container in pod["spec"]["containers"]:
        for mount in container.get("volumeMounts", []):
            if mount["name"] == "hot" and mount["mountPath"] == HOT_DIR:
                mount["mountPath"], mount["subPath"] = f"{HOT_DIR}/{sub}", sub
        if container["name"] == "runtime":
            container["env"].append({"name": HOT_SUBPATH_ENV, "value": sub})
    return pod
