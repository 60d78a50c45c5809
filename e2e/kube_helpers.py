"""Helpers shared by the e2e tests (kept out of conftest.py so tests can import them)."""

from __future__ import annotations

import os
from collections.abc import Callable
from pathlib import Path
from typing import TypeVar

from kubernetes import client
from kubernetes.client.rest import ApiException

from harness.polling import wait_until

T = TypeVar("T")

CRD_FILE = Path(__file__).resolve().parents[1] / "crds" / "streamingjob.yaml"
GROUP, VERSION, PLURAL = "sparkpoint.dev", "v1alpha1", "streamingjobs"
E2E_IMAGE = os.environ.get("SPARKPOINT_E2E_IMAGE", "sparkpoint:e2e")
# The local cluster's state dir (e2e/local/cluster.py: SPARKPOINT_E2E_STATE, for clusters side by side).
STATE_DIR = Path(os.environ.get("SPARKPOINT_E2E_STATE", Path(__file__).parent / "local" / ".state"))
LOCAL_LOGS = STATE_DIR / "node" / "logs"
# The cluster's MinIO: endpoint and credentials.
MINIO_INFO = Path(os.environ.get("SPARKPOINT_E2E_MINIO", STATE_DIR / "minio.json"))


def wait_for(what: str, check: Callable[[], T], timeout: float = 60, interval: float = 0.25) -> T:
    """harness.polling.wait_until in the e2e suite's argument order (what is awaited first): returns
    `check`'s first truthy value, fails (an AssertionError) naming `what` on timeout."""
    return wait_until(check, timeout, what, interval=interval)


def exists(read: Callable[[], object]) -> bool:
    try:
        read()
        return True
    except ApiException as error:
        if error.status == 404:
            return False
        raise


def python_container(script: str, name: str = "main", **fields) -> client.V1Container:
    return client.V1Container(name=name, image=E2E_IMAGE, image_pull_policy="IfNotPresent",
                              command=["python", "-c", script], **fields)


def pod_logs(core: client.CoreV1Api, namespace: str, pod: str, container: str = "main") -> str:
    """Container output through the API, or from the local node agent's log dir."""
    try:
        return core.read_namespaced_pod_log(pod, namespace, container=container)
    except ApiException:
        pass
    files = sorted(LOCAL_LOGS.glob(f"{namespace}_{pod}_*/{container}/*.log"))
    return "\n".join(f"--- {f.name}\n{f.read_text(errors='replace')}" for f in files) or "(no logs)"


def real_node(core: client.CoreV1Api) -> bool:
    """Whether pods run in containers (a kubelet with a CRI runtime: the local cluster's default node, kind), not as host
    processes of the local node agent (which reports the runtime local-process://)."""
    nodes = core.list_node().items
    return bool(nodes) and not any(
        (n.status.node_info.container_runtime_version or "").startswith("local-process://") for n in nodes)


def container_status(pod: client.V1Pod, name: str = "main"):
    for status in pod.status.container_statuses or []:
        if status.name == name:
            return status
    return None




def wait_crd_established(extensions, name: str, timeout: float = 30) -> None:
    """Waits until the API server serves the CRD `name` (its Established condition is True)."""
    def established():
        crd = extensions.read_custom_resource_definition(name)
        return any(c.type == "Established" and c.status == "True" for c in crd.status.conditions or [])
    wait_for(f"CRD {name} to be established", established, timeout=timeout)


# --- the operator -------------------------------------------------------------------------------------
PEERING_CRD_FILE = CRD_FILE.parent / "kopf-peering.yaml"
REPO = CRD_FILE.parents[1]


def install_crd(extensions, body: dict) -> str:
    """Create or replace (to the repo's current version) one CRD and wait until it is established."""
    name = body["metadata"]["name"]
    try:
        body["metadata"]["resourceVersion"] = extensions.read_custom_resource_definition(name).metadata.resource_version
        extensions.replace_custom_resource_definition(name, body)
    except ApiException as error:
        if error.status != 404:
            raise
        extensions.create_custom_resource_definition(body)
    wait_crd_established(extensions, name)
    return name


def apply_crds(extensions, path: Path) -> None:
    import yaml

    for body in yaml.safe_load_all(path.read_text()):
        name = body["metadata"]["name"]
        try:
            extensions.create_custom_resource_definition(body)
        except ApiException as error:
            if error.status != 409:
                raise
        wait_crd_established(extensions, name)


def free_port() -> int:
    import socket

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


# The e2e tests' hostPath hot volumes live under /var/tmp (test_operator_executors.shared_hot_dir):
# the operator allows hostPath there only (operator/kube/hot_confine.py).
HOT_PATH_PREFIX = "/var/tmp"
HOST_PATH_ARGS = ("--hot-volume-host-path-prefix", HOT_PATH_PREFIX)


class OperatorProcess:
    """`python -m sparkpoint.operator --namespace NS` as a subprocess against $KUBECONFIG."""

    def __init__(self, namespace: str, log_path: Path):
        self.namespace, self.log_path = namespace, log_path
        self.metrics_port = free_port()
        self.process = None
        self.extra_args: list[str] = []

    def start(self) -> None:
        import subprocess
        import sys

        self.log_path.parent.mkdir(parents=True, exist_ok=True)  # a fresh cluster state has no operator/ yet
        log = self.log_path.open("ab")
        self.process = subprocess.Popen(
            [sys.executable, "-m", "sparkpoint.operator", "--namespace", self.namespace,
             "--metrics-port", str(self.metrics_port), *HOST_PATH_ARGS, *self.extra_args], stdout=log, stderr=subprocess.STDOUT, cwd=REPO)
        wait_for("the operator's /healthz", lambda: self.get("/healthz") is not None or self._died(), timeout=60)

    def _died(self) -> bool:
        if self.process.poll() is not None:
            raise AssertionError(f"operator exited {self.process.returncode}:\n{self.log()}")
        return False

    def get(self, path: str) -> str | None:
        import urllib.request

        try:
            with urllib.request.urlopen(f"http://127.0.0.1:{self.metrics_port}{path}", timeout=2) as resp:
                return resp.read().decode()
        except OSError:
            return None

    @property
    def scrape_target(self) -> str:
        """Where Prometheus scrapes it (a host process has no pod to discover)."""
        return f"127.0.0.1:{self.metrics_port}"

    def set_upgrade_timeout(self, value: str) -> None:
        self.stop()
        self.extra_args = [*self.extra_args, "--upgrade-timeout", value]
        self.start()

    def running(self) -> bool:
        return self.process is not None and self.process.poll() is None

    def kill(self) -> None:
        self.process.kill()
        self.process.wait(10)

    def stop(self) -> None:
        if self.process and self.process.poll() is None:
            self.process.terminate()
            try:
                self.process.wait(15)
            except Exception:
                self.kill()

    def log(self, tail: int = 60) -> str:
        lines = self.log_path.read_text(errors="replace").splitlines() if self.log_path.exists() else []
        return "\n".join(lines[-tail:])
