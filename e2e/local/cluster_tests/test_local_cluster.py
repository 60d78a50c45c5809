"""Properties of the local (Docker-free) cluster itself, beyond what the cluster-agnostic suite
checks: the pinned release, idempotent `cluster-up`, pod addresses, the log dir, and MinIO."""

from __future__ import annotations

import io
import ipaddress
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from kube_helpers import container_status, python_container, real_node
from minio import Minio

LOCAL = Path(__file__).resolve().parents[1]
REPO = LOCAL.parents[1]
STATE = Path(os.environ.get("SPARKPOINT_E2E_STATE", LOCAL / ".state"))


def pinned(name: str) -> str:
    for line in (REPO / "versions.env").read_text().splitlines():
        if line.startswith(f"{name}="):
            return line.split("=", 1)[1].strip()
    raise KeyError(name)


@pytest.fixture(autouse=True)
def only_on_the_local_cluster():
    if Path(os.environ.get("KUBECONFIG", "")).resolve() != (STATE / "kubeconfig").resolve():
        raise RuntimeError(f"these tests need KUBECONFIG={STATE / 'kubeconfig'} (make e2e sets it)")


def test_api_server_reports_the_pinned_release(api_client):
    from kubernetes import client
    version = client.VersionApi(api_client).get_code()
    assert version.git_version == pinned("KUBERNETES_VERSION")
    assert (version.major, version.minor) == tuple(pinned("KUBERNETES_VERSION").lstrip("v").split(".")[:2])


def test_cluster_up_is_idempotent_and_prints_the_export_line_last():
    pids_before = {p.name: p.read_text() for p in (STATE / "pids").glob("*.pid")}
    result = subprocess.run([sys.executable, str(LOCAL / "cluster.py"), "up"], capture_output=True,
                            text=True, timeout=120, check=True)
    assert result.stdout.splitlines()[-1] == f"export KUBECONFIG={STATE / 'kubeconfig'}"
    assert {p.name: p.read_text() for p in (STATE / "pids").glob("*.pid")} == pids_before, "a component restarted"


@pytest.fixture
def agent_node(core):
    """The node agent's own rules (loopback pod IPs, POD_IP, its log dir, the image-name rule); the real
    node's counterparts are in e2e/test_real_node.py."""
    if real_node(core):
        pytest.skip("node agent behaviour; this cluster runs a real kubelet (the default; NODE=agent runs the agent)")


def test_pods_get_loopback_addresses_and_their_output_is_kept(core, namespace, pods, agent_node):
    pods.create("hello", [python_container("import os; print('hello from', os.environ['POD_IP'])")],
                restart_policy="Never")
    pod = pods.wait_phase("hello", "Succeeded")
    address = ipaddress.ip_address(pod.status.pod_ip)
    # The node agent's pod network (SPARKPOINT_POD_NETWORK picks another for clusters side by side).
    assert address in ipaddress.ip_network(os.environ.get("SPARKPOINT_POD_NETWORK", "127.1.0.0/16"))
    assert container_status(pod).state.terminated.exit_code == 0
    expected = f"hello from {address}\n"
    assert core.read_namespaced_pod_log("hello", namespace, container="main") == expected  # kubectl logs
    files = list((STATE / "node" / "logs").glob(f"{namespace}_hello_{pod.metadata.uid}/main/0.log"))
    assert [f.read_text() for f in files] == [expected]


def test_minio_beside_the_cluster_serves_s3():
    credentials = json.loads((STATE / "minio.json").read_text())
    assert (STATE / "minio.json").stat().st_mode & 0o077 == 0, "MinIO credentials must not be world-readable"
    s3 = Minio(credentials["endpoint"].removeprefix("http://"), credentials["access_key"],
               credentials["secret_key"], secure=False)
    bucket = "e2e-local-cluster-check"
    if not s3.bucket_exists(bucket):
        s3.make_bucket(bucket)
    s3.put_object(bucket, "probe", io.BytesIO(b"ok"), 2)
    assert s3.get_object(bucket, "probe").read() == b"ok"


def test_image_without_command_runs_the_virtualenv_entry_point(core, namespace, pods, agent_node):
    from kubernetes import client
    pods.create("rule", [client.V1Container(name="main", image="ghcr.io/example/sparkpoint:1.0", args=["--help"])],
                restart_policy="Never")
    pod = pods.wait_phase("rule", "Succeeded")
    assert container_status(pod).state.terminated.exit_code == 0
    assert core.read_namespaced_pod_log("rule", namespace, container="main").startswith("usage: sparkpoint")
