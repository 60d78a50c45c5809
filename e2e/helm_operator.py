"""The operator installed with the Helm chart (charts/sparkpoint) into a test's namespace, watching
only that namespace: its Deployment's pod runs with the chart's ServiceAccount and Role, so the API
server enforces the chart's RBAC on every call the operator makes."""

from __future__ import annotations

import os
import subprocess
import urllib.request
import uuid

from kube_helpers import REPO, free_port, wait_for
from kubernetes import client

CHART = REPO / "charts" / "sparkpoint"
# The chart's default image; on the local cluster the node agent runs the Deployment's
# `command: [sparkpoint-operator]` from the project's virtualenv.
IMAGE = os.environ.get("SPARKPOINT_E2E_OPERATOR_IMAGE", "sparkpoint/operator:dev")


def helm_binary() -> str:
    out = subprocess.run([str(REPO / "scripts" / "ensure-helm.sh")], capture_output=True, text=True, timeout=1800)
    assert out.returncode == 0, out.stderr[-3000:]
    return out.stdout.strip()


class HelmOperator:
    def __init__(self, api_client: client.ApiClient, namespace: str):
        self.core = client.CoreV1Api(api_client)
        self.namespace = namespace
        self.release = f"sp-{uuid.uuid4().hex[:6]}"
        self.helm = helm_binary()
        # Pods are host processes here: a port of its own, so parallel clusters never clash on 9100.
        self.metrics_port = free_port()
        self.service_account = f"{self.release}-sparkpoint-operator"

    def _helm(self, *args: str, timeout: float = 300) -> str:
        out = subprocess.run([self.helm, *args, "--namespace", self.namespace], capture_output=True, text=True,
                             timeout=timeout)
        assert out.returncode == 0, f"helm {args[0]} failed:\n{out.stdout}\n{out.stderr}"
        return out.stdout

    def install(self) -> str:
        repository, tag = IMAGE.rsplit(":", 1)
        notes = self._helm(
            "install", self.release, str(CHART), "--wait", "--timeout", "180s",
            "--set-json", f'watchNamespaces=["{self.namespace}"]',
            "--set", f"metrics.port={self.metrics_port},image.repository={repository},image.tag={tag}",
            # Validated by the API server here (not enforced: the local cluster has no network plugin).
            "--set", "networkPolicy.enabled=true")
        wait_for("the Helm-installed operator's /healthz", lambda: self.get("/healthz") is not None, timeout=90)
        return notes

    def uninstall(self) -> None:
        self._helm("uninstall", self.release, "--wait", "--timeout", "120s")

    def pod(self) -> client.V1Pod | None:
        pods = self.core.list_namespaced_pod(self.namespace, label_selector=(
            f"app.kubernetes.io/component=operator,app.kubernetes.io/instance={self.release}")).items
        running = [p for p in pods if p.status.phase == "Running" and p.status.pod_ip]
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
        pod = self.pod()
        if pod is None:
            return "(no running operator pod)"
        return self.core.read_namespaced_pod_log(pod.metadata.name, self.namespace, container="operator",
                                                 tail_lines=tail)
