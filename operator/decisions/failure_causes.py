"""Known causes of a runtime that exits 1, told from the error its termination message carries
(runtime/cli/run.py `run_failure`), so lastFailure and the Event name the cause and the fix instead
of "restarted in place (exit 1)". Pure: text in, a KnownCause or None out.

  - DriverForbidden: a `spark.master: k8s` driver whose ServiceAccount may not do what Spark's
    Kubernetes backend asks (`pods "x" is forbidden: User "system:serviceaccount:NS:SA" cannot get
    resource "pods" ...`), e.g. an operator started without the chart's driver account;
  - HotVolumeNotWritable: the runtime's uid may not create its directory on the hot volume
    (`[Errno 13] Permission denied: '/var/lib/sparkpoint/...'`); PermissionDenied elsewhere.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from typing import Any

from .runtime_pod import HOT_DIR, RUN_AS_USER

DRIVER_FORBIDDEN, HOT_VOLUME_NOT_WRITABLE, PERMISSION_DENIED = "DriverForbidden", "HotVolumeNotWritable", "PermissionDenied"

_FORBIDDEN = re.compile(
    r'(?P<what>[\w.]+(?: "[^"]*")?) is forbidden: User "system:serviceaccount:(?P<sa_ns>[^:"]+):(?P<sa>[^"]+)" '
    r'cannot (?P<verb>[\w-]+) resource "(?P<resource>[^"]+)"(?: in API group "(?P<group>[^"]*)")?'
    r'(?: in the namespace "(?P<ns>[^"]+)")?')
_DENIED = re.compile(r"\[Errno 13\] Permission denied: '(?P<path>[^']+)'")


@dataclass(frozen=True)
class KnownCause:
    reason: str  # lastFailure.reason and the Event's reason
    message: str  # the cause and the fix


def run_failure(message: str | None) -> tuple[str, int | None] | None:
    """(error, uid) from the runtime's termination message after exit 1, None when it says nothing."""
    try:
        doc = json.loads(message or "")["runFailed"]
    except (ValueError, TypeError, KeyError):
        return None
    if not isinstance(doc, dict) or not isinstance(doc.get("error"), str):
        return None
    uid = doc.get("uid")
    return doc["error"], uid if type(uid) is int else None


def known_cause(error: str, uid: int | None) -> KnownCause | None:
    if m := _FORBIDDEN.search(error):
        account = f"{m['sa_ns']}/{m['sa']}"
        where = f" in namespace {m['ns']}" if m["ns"] else ""
        group = f" (API group {m['group']})" if m["group"] else ""
        return KnownCause(DRIVER_FORBIDDEN, (
            f"Spark's driver runs as ServiceAccount {account}, which may not {m['verb']} {m['resource']}{group}"
            f"{where} (the API server refused: {m['what']} is forbidden). A spark.master k8s job's driver "
            f"needs a Role for pods, configmaps, services and persistentvolumeclaims in its namespace: "
            f"install the operator with the Helm chart (its sparkpoint-driver account), or start it with "
            f"--driver-service-account NAME naming such an account, or bind that Role to {account}"))
    if m := _DENIED.search(error):
        path, who = m["path"], f"uid {uid}" if uid is not None else "the runtime's uid"
        if path == HOT_DIR or path.startswith(HOT_DIR + "/"):
            return KnownCause(HOT_VOLUME_NOT_WRITABLE, (
                f"the runtime ({who}) may not create {path} on the hot volume ({HOT_DIR}): make the volume "
                f"writable for {who}: a persistentVolumeClaim whose driver applies the pod's fsGroup "
                f"({RUN_AS_USER}), or a hostPath directory owned by or group-writable for {who} "
                f"(chown {RUN_AS_USER}:{RUN_AS_USER} or chmod g+w it on the node)"))
        return KnownCause(PERMISSION_DENIED, f"the runtime ({who}) may not write {path} (permission denied)")
    return None


def cause_of(*terminations: dict[str, Any] | None) -> KnownCause | None:
    """The known cause of the newest termination (the current one, then the last) that names one."""
    for term in terminations:
        if not term or term.get("exitCode") in (None, 0):
            continue
        found = run_failure(term.get("message"))
        if found is not None:
            return known_cause(*found)
    return None
