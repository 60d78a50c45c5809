"""The operator installed with the Helm chart (charts/sparkpoint) into a test's namespace, watching
only that namespace: its Deployment's pod runs with the chart's ServiceAccount and Role, so the API
server enforces the chart's RBAC on every call the operator makes.

It offers what the operator e2e scenarios do to an operator (the `operator` fixture): `kill()`
SIGKILLs the operator mid-action and keeps it down (Deployment scaled to 0), `start()` brings it
back, `stop()` stops it gracefully, `get(path)` reads its metrics port, `log()` its log, including
the pods it had before a kill."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import urllib.request
import uuid
from pathlib import Path

from kube_helpers import HOT_PATH_PREFIX, REPO, free_port, wait_for
from kubernetes import client

CHART = REPO / "charts" / "sparkpoint"
# The chart's default image; on the local cluster the node agent runs it in image mode once
# `make image` has built it, else the Deployment's `command: [sparkpoint-operator]` from the
# project's virtualenv.
IMAGE = os.environ.get("SPARKPOINT_E2E_OPERATOR_IMAGE", "sparkpoint/operator:dev")
SELECTOR = "app.kubernetes.io/component=operator,app.kubernetes.io/instance={release}"


def helm_binary() -> str:
    out = subprocess.run([str(REPO / "scripts" / "ensure-helm.sh")], capture_output=True, text=True, timeout=1800)
    assert out.returncode == 0, out.stderr[-3000:]
    return out.stdout.strip()


class HelmOperator:
    def __init__(self, api_client: client.ApiClient, namespace: str, values: dict[str, str] | None = None,
                 watch: list[str] | None = None):
        self.core = client.CoreV1Api(api_client)
        self.apps = client.AppsV1Api(api_client)
        self.namespace = namespace
        # The namespaces it watches: its own by default; others make it an operator of tenants'
        # namespaces from its own (e2e/test_tenant_isolation.py).
        self.watch = list(watch or [namespace])
        self.release = f"sp-{uuid.uuid4().hex[:6]}"
        self.helm = helm_binary()
        # Pods are host processes here: a port of its own, so parallel clusters never clash on 9100.
        self.metrics_port = free_port()
        self.service_account = self.deployment = f"{self.release}-sparkpoint-operator"
        self.values = dict(values or {})
        self.installed = False
        self.replicas = 1
        self._earlier_logs: list[str] = []
        self.scrape_target = None  # Prometheus discovers its pod (kubernetes_sd), as the ServiceMonitor does

    def _helm(self, *args: str, timeout: float = 300) -> str:
        out = subprocess.run([self.helm, *args, "--namespace", self.namespace], capture_output=True, text=True,
                             timeout=timeout)
        assert out.returncode == 0, f"helm {args[0]} failed:\n{out.stdout}\n{out.stderr}"
        return out.stdout

    def _set_args(self) -> list[str]:
        repository, tag = IMAGE.rsplit(":", 1)
        values = {"metrics.port": str(self.metrics_port), "image.repository": repository, "image.tag": tag,
                  # Enforced on the real node (kube-router; e2e/test_network_policy.py), only validated by
                  # the API server on the node agent, whose pods share the host's network.
                  "networkPolicy.enabled": "true", "hotVolume.allowedHostPathPrefix": HOT_PATH_PREFIX,
                  **self.values}
        return ["--set-json", f"watchNamespaces={json.dumps(self.watch)}",
                "--set", ",".join(f"{k}={v}" for k, v in values.items())]

    def install(self) -> str:
        notes = self._helm("install", self.release, str(CHART), "--wait", "--timeout", "180s", *self._set_args())
        self.installed = True
        self.replicas = int(self.values.get("replicas", 1))
        self._wait_healthy()
        return notes

    def upgrade(self, **values: str) -> None:
        """`helm upgrade` with changed values: the Deployment rolls out a new operator pod."""
        self._remember_logs()
        self.values.update(values)
        self._helm("upgrade", self.release, str(CHART), "--wait", "--timeout", "180s", *self._set_args())
        self.replicas = int(self.values.get("replicas", 1))
        wait_for("the old operator pod gone", lambda: len(self.pods()) == self.replicas, timeout=120)
        self._wait_healthy()

    def set_upgrade_timeout(self, value: str) -> None:
        self.upgrade(upgradeTimeout=value)

    def uninstall(self) -> None:
        self._helm("uninstall", self.release, "--wait", "--timeout", "120s")
        self.installed = False

    # -- what the scenarios do to the operator

    def start(self) -> None:
        if not self.installed:
            self.install()
            return
        self._scale(self.replicas)
        self._wait_healthy()

    def kill(self) -> None:
        """SIGKILL: the operator gets no chance to finish what it is doing; it stays down until start()."""
        self._remember_logs()
        pods = self.pods()
        # The local cluster's pods are host processes; on kind the forced delete below kills them.
        for pid in operator_pids(self.namespace, self.metrics_port):
            os.kill(pid, signal.SIGKILL)
        self._scale(0)
        for pod in pods:
            try:
                self.core.delete_namespaced_pod(pod.metadata.name, self.namespace, grace_period_seconds=0)
            except client.ApiException as error:
                if error.status != 404:
                    raise
        wait_for("the operator's pods gone", lambda: not self.pods(), timeout=120)

    def stop(self) -> None:
        """A graceful stop (SIGTERM, kopf finishes its handlers)."""
        if not self.installed:
            return
        self._remember_logs()
        self._scale(0)
        wait_for("the operator's pods gone", lambda: not self.pods(), timeout=120)

    def running(self) -> bool:
        return self.installed and bool(self.pods())

    # -- observing it

    def pods(self) -> list[client.V1Pod]:
        return self.core.list_namespaced_pod(self.namespace, label_selector=SELECTOR.format(release=self.release)).items

    def pod(self) -> client.V1Pod | None:
        running = [p for p in self.pods() if p.status.phase == "Running" and p.status.pod_ip
                   and p.metadata.deletion_timestamp is None]
        return running[0] if running else None

    def get(self, path: str) -> str | None:
        pod = self.pod()
        if pod is None:
            return None
        try:
            with urllib.request.urlopen(f"http://{pod.status.pod_ip}:{self.metrics_port}{path}", timeout=2) as resp:
                return resp.read().decode()
        except OSError:
            return None

    def log(self, tail: int = 60) -> str:
        current = []
        for pod in self.pods():
            try:
                current.append(f"--- pod {pod.metadata.name}\n" + self.core.read_namespaced_pod_log(
                    pod.metadata.name, self.namespace, container="operator", tail_lines=tail))
            except client.ApiException as error:
                current.append(f"--- pod {pod.metadata.name}: no log ({error.status})")
        return "\n".join([*self._earlier_logs[-2:], *current]) or "(no operator pod)"

    def _remember_logs(self) -> None:
        if self.installed:
            self._earlier_logs.append(f"=== before {len(self._earlier_logs) + 1}. stop/kill\n{self.log(tail=80)}")

    def _scale(self, replicas: int) -> None:
        self.apps.patch_namespaced_deployment_scale(self.deployment, self.namespace, {"spec": {"replicas": replicas}})

    def _wait_healthy(self) -> None:
        wait_for("the Helm-installed operator's /healthz", lambda: self.get("/healthz") is not None, timeout=180)


def operator_pids(namespace: str, metrics_port: int) -> list[int]:
    """The host processes of a release's operator pods on the local cluster (pods are host
    processes, also in image mode), found by their arguments; none on kind."""
    want = {f"--namespace={namespace}", f"--metrics-port={metrics_port}"}
    pids = []
    for proc in Path("/proc").iterdir():
        if not proc.name.isdigit():
            continue
        try:
            words = {a.decode(errors="replace") for a in (proc / "cmdline").read_bytes().split(b"\0")}
        except OSError:
            continue
        if want <= words and any(w.endswith("sparkpoint-operator") for w in words):
            pids.append(int(proc.name))
    return pids
