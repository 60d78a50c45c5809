"""Executors of an earlier start of this attempt, waited out before the hot dir is resumed
(docs/design.md §9, "In-place restarts with executors"; issue 42, finding 4).

An in-place restart (the kubelet restarts the runtime container in the same pod) starts a new
SparkContext while the crashed start's executors may still run: Spark's executors exit when their
driver's RPC connection drops, but until they have, a task can still rename a state file into the
hot dir that the new start resumes (local recovery) or restores into. So a restarted start of a
`spark.master: k8s` job, before it restores, lists the attempt's executor pods with its pod's own
ServiceAccount token (the driver's Role already lets Spark's backend list and delete them), deletes
those of earlier starts that still run, and waits until none is left. If that cannot be known (the
API refuses, or they outlive WAIT_FOR), the start skips local recovery and restores from the store;
the remaining window is documented there.

Plain HTTP with the standard library: the runtime takes no Kubernetes client (pyproject.toml's
import contracts keep it a Spark program); the decisions are pure functions, the I/O a small class.
"""

from __future__ import annotations

import json
import logging
import ssl
import time
import urllib.error
import urllib.parse
import urllib.request
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from sparkpoint.runtime.spec import API_GROUP

from .executors import START_LABEL, DriverPod

log = logging.getLogger("sparkpoint.runtime")

WAIT_FOR = 90.0  # seconds: an executor pod's default 30 s grace period, thrice
POLL = 2.0
SERVICE_ACCOUNT_DIR = Path("/var/run/secrets/kubernetes.io/serviceaccount")
_ENDED = ("Succeeded", "Failed")


def attempt_selector(driver: DriverPod) -> str:
    """The executors of this pod's attempt (executors.executor_labels), whatever start made them."""
    return f"{API_GROUP}/job={driver.job},{API_GROUP}/attempt={driver.attempt},spark-role=executor"


def earlier_live(pods: list[dict[str, Any]], start: int) -> list[str]:
    """Names of the listed executor pods that an earlier start made and that may still run (a
    pod being deleted still runs until its containers stop). A pod without the start label is an
    earlier runtime's (a runtime before this label): earlier too."""
    names = []
    for pod in pods:
        meta, phase = pod.get("metadata") or {}, (pod.get("status") or {}).get("phase")
        if (meta.get("labels") or {}).get(START_LABEL) != str(start) and phase not in _ENDED:
            names.append(meta.get("name", ""))
    return sorted(names)


@dataclass
class WaitOutcome:
    gone: bool  # no executor of an earlier start can still write into the hot dir
    left: list[str] = field(default_factory=list)
    error: str | None = None  # why it could not be known


def wait_out(list_pods: Callable[[], list[dict[str, Any]]], delete_pod: Callable[[str], None], start: int,
             clock: Callable[[], float] = time.monotonic, sleep: Callable[[float], None] = time.sleep,
             wait_for: float = WAIT_FOR) -> WaitOutcome:
    """Delete the earlier starts' live executors (once each) and poll until none is left or
    `wait_for` passes. Any API error ends the wait undecided (gone=False, error set)."""
    deadline, deleted = clock() + wait_for, set()
    while True:
        try:
            left = earlier_live(list_pods(), start)
            for name in left:
                if name not in deleted:
                    delete_pod(name)
                    deleted.add(name)
        except Exception as exc:  # noqa: BLE001 - whatever the API or the network says: undecided
            return WaitOutcome(False, error=f"{type(exc).__name__}: {str(exc)[:200]}")
        if not left:
            return WaitOutcome(True)
        if clock() >= deadline:
            return WaitOutcome(False, left=left)
        sleep(POLL)


class ExecutorPods:
    """GET and DELETE of this attempt's executor pods with the pod's mounted ServiceAccount token."""

    def __init__(self, driver: DriverPod, token: str, context: ssl.SSLContext | None, timeout: float = 10.0):
        self.driver, self.token, self.context, self.timeout = driver, token, context, timeout
        self.base = f"{driver.api_server}/api/v1/namespaces/{urllib.parse.quote(driver.namespace)}/pods"

    @classmethod
    def in_pod(cls, driver: DriverPod, account_dir: Path = SERVICE_ACCOUNT_DIR) -> ExecutorPods:
        """With the pod's mounted ServiceAccount token and the cluster's CA."""
        token = (account_dir / "token").read_text().strip()
        return cls(driver, token, ssl.create_default_context(cafile=str(account_dir / "ca.crt")))

    def _call(self, method: str, url: str) -> dict[str, Any]:
        request = urllib.request.Request(url, method=method, headers={"Authorization": f"Bearer {self.token}",
                                                                      "Accept": "application/json"})
        try:
            with urllib.request.urlopen(request, timeout=self.timeout, context=self.context) as response:
                return json.loads(response.read() or b"{}")
        except urllib.error.HTTPError as exc:
            if method == "DELETE" and exc.code == 404:  # already gone
                return {}
            raise

    def list(self) -> list[dict[str, Any]]:
        query = urllib.parse.urlencode({"labelSelector": attempt_selector(self.driver)})
        return list(self._call("GET", f"{self.base}?{query}").get("items") or [])

    def delete(self, name: str) -> None:
        self._call("DELETE", f"{self.base}/{urllib.parse.quote(name)}")


def earlier_executors_gone(driver: DriverPod, start: int) -> WaitOutcome:
    """Before a restarted start restores: wait out the earlier starts' executors (module doc)."""
    try:
        pods = ExecutorPods.in_pod(driver)
    except (OSError, ssl.SSLError) as exc:  # no token mounted (a driver pod without one cannot have started executors)
        return WaitOutcome(False, error=f"no ServiceAccount token: {exc}")
    started = time.monotonic()
    outcome = wait_out(pods.list, pods.delete, start)
    log.info("earlier starts' executors", extra={"gone": outcome.gone, "left": outcome.left, "error": outcome.error,
                                                 "seconds": round(time.monotonic() - started, 1)})
    return outcome
