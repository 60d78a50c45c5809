"""The local cluster's second node (`cluster.py up --nodes 2`, e2e/local/extra_node.py): pods scheduled on
each node, pod-to-pod and Service traffic across them with the sender's own address, the API server and
MinIO from both, a hostPath that is one host directory on both, a NetworkPolicy enforced by each node's
kube-router against the other's pods, and a frozen node (freezer.py) going NotReady and coming back.

Skipped on a one-node cluster (the default). Every client is a pod: traffic from a node itself is never
subject to policy, and the test process is on node 1's network.
"""

from __future__ import annotations

import json
import os
import sys
import time
import urllib.request
from dataclasses import dataclass
from pathlib import Path

import pytest
from kube_helpers import python_container, wait_for
from kubernetes import client

LOCAL = Path(__file__).resolve().parents[1]
STATE = Path(os.environ.get("SPARKPOINT_E2E_STATE", LOCAL / ".state"))
sys.path.insert(0, str(LOCAL))
import extra_node_config as xc  # noqa: E402
import freezer  # noqa: E402
from components import NODE_NAME as NODE1  # noqa: E402
from node_config import POD_CIDR as NODE1_POD_CIDR  # noqa: E402

NODE2 = xc.ExtraNode(2)
PORT = 8080
# Answers every GET with the node it runs on and the address the request came from.
SERVER = f"""
import http.server, os
class Handler(http.server.BaseHTTPRequestHandler):
    def do_GET(self):
        body = f"{{os.environ['NODE']}} {{self.client_address[0]}}".encode()
        self.send_response(200); self.send_header("Content-Length", str(len(body))); self.end_headers()
        self.wfile.write(body)
    def log_message(self, *args): pass
http.server.ThreadingHTTPServer(("", {PORT}), Handler).serve_forever()
"""
# GETs each URL until it answers or `seconds` pass; prints {url: "<status> <body>" | "error: ..."}.
CLIENT = """
import json, ssl, sys, time, urllib.request
seconds, urls = float(sys.argv[1]), sys.argv[2:]
insecure = ssl._create_unverified_context()
deadline, result = time.monotonic() + seconds, {}
while True:
    for url in urls:
        if not result.get(url, "error").startswith("error"):
            continue
        try:
            with urllib.request.urlopen(url, timeout=2, context=insecure) as response:
                result[url] = f"{response.status} {response.read().decode()[:200]}"
        except Exception as error:
            result[url] = f"error: {type(error).__name__}: {error}"
    if not any(r.startswith("error") for r in result.values()) or time.monotonic() > deadline:
        break
    time.sleep(0.5)
print(json.dumps(result))
"""


@pytest.fixture(autouse=True)
def two_nodes(core):
    names = {node.metadata.name for node in core.list_node().items}
    if NODE2.name not in names:
        pytest.skip(f"a one-node cluster: `cluster.py up --nodes 2` (make cluster-up NODES=2) adds {NODE2.name}")
    if Path(os.environ.get("KUBECONFIG", "")).resolve() != (STATE / "kubeconfig").resolve():
        raise RuntimeError(f"these tests need KUBECONFIG={STATE / 'kubeconfig'}")


def start_server(ctx: Ctx, name: str, node: str) -> client.V1Pod:
    container = python_container(
        SERVER, env=[client.V1EnvVar(name="NODE", value_from=client.V1EnvVarSource(
            field_ref=client.V1ObjectFieldSelector(field_path="spec.nodeName")))],
        readiness_probe=client.V1Probe(tcp_socket=client.V1TCPSocketAction(port=PORT), period_seconds=1))
    ctx.create(name, node, [container], labels={"app": name})
    return ctx.pods.wait(name, "Ready", lambda p: any(
        c.type == "Ready" and c.status == "True" for c in p.status.conditions or []), timeout=120)


def fetch(ctx: Ctx, name: str, node: str, urls: list[str], seconds: float,
          labels: dict[str, str] | None = None) -> dict[str, str]:
    """GETs `urls` from a pod on `node` (retrying for `seconds`); returns what each answered."""
    container = python_container(CLIENT)
    container.command = [*container.command, str(seconds), *urls]
    ctx.create(name, node, [container], labels=labels, restart_policy="Never")
    pod = ctx.pods.wait_phase(name, "Succeeded", timeout=120 + seconds)
    assert pod.spec.node_name == node
    return json.loads(ctx.core.read_namespaced_pod_log(name, ctx.namespace, container="main"))


@dataclass
class Ctx:
    core: client.CoreV1Api
    namespace: str
    pods: object  # conftest's `pods`: wait, wait_phase, read

    def create(self, name: str, node: str, containers: list, labels: dict | None = None, **spec) -> None:
        self.core.create_namespaced_pod(self.namespace, client.V1Pod(
            metadata=client.V1ObjectMeta(name=name, labels=labels or {}),
            spec=client.V1PodSpec(containers=containers, node_selector={"kubernetes.io/hostname": node}, **spec)))


@pytest.fixture
def ctx(core, namespace, pods) -> Ctx:
    return Ctx(core, namespace, pods)


def in_subnet(ip: str, cidr: str) -> bool:
    import ipaddress
    return ipaddress.ip_address(ip) in ipaddress.ip_network(cidr)


def test_pods_are_scheduled_on_each_node_with_its_own_subnet(core, ctx):
    node_ready = {n.metadata.name: any(c.type == "Ready" and c.status == "True" for c in n.status.conditions)
                  for n in core.list_node().items}
    assert node_ready == {NODE1: True, NODE2.name: True}
    one, two = start_server(ctx, "one", NODE1), start_server(ctx, "two", NODE2.name)
    assert (one.spec.node_name, two.spec.node_name) == (NODE1, NODE2.name)
    assert in_subnet(one.status.pod_ip, NODE1_POD_CIDR) and in_subnet(two.status.pod_ip, NODE2.pod_cidr)
    assert two.status.host_ip == NODE2.node_ip


@pytest.mark.parametrize("server_node, client_node", [(NODE2.name, NODE1), (NODE1, NODE2.name)])
def test_pod_to_pod_and_service_traffic_cross_nodes_keeping_the_senders_address(
        core, namespace, ctx, server_node, client_node):
    server = start_server(ctx, "server", server_node)
    service = core.create_namespaced_service(namespace, client.V1Service(
        metadata=client.V1ObjectMeta(name="server"),
        spec=client.V1ServiceSpec(selector={"app": "server"}, ports=[client.V1ServicePort(port=PORT)])))
    minio = json.loads((STATE / "minio.json").read_text())["endpoint"]
    urls = {"pod": f"http://{server.status.pod_ip}:{PORT}/", "service": f"http://{service.spec.cluster_ip}:{PORT}/",
            "minio": f"{minio}/minio/health/live", "api": "https://10.96.0.1/version"}
    answers = fetch(ctx, "client", client_node, list(urls.values()), seconds=30)
    got = {what: answers[url] for what, url in urls.items()}
    client_ip = ctx.pods.read("client").status.pod_ip
    assert got["pod"] == f"200 {server_node} {client_ip}", got  # no NAT between pods
    assert got["service"] == f"200 {server_node} {client_ip}", got
    assert got["minio"].startswith("200"), got
    assert got["api"].startswith("200") and '"gitVersion"' in got["api"], got


# Not working yet (2026-11-28, two runs on the two-node cluster, both directions failed): with the server
# on node 1, a friend on node 2 timed out for 30 s; with the server on node 2, the stranger pod on node 1
# never finished within 135 s (no output); what was seen is in e2e/README.md ("Two nodes"). Strict:
# once fixed and passing, the test fails until this marker goes.
@pytest.mark.xfail(strict=True, reason="cross-node NetworkPolicy not yet working on the local two-node cluster")
@pytest.mark.parametrize("server_node, client_node", [(NODE2.name, NODE1), (NODE1, NODE2.name)])
def test_a_network_policy_refuses_pods_of_the_other_node_it_does_not_admit(
        core, namespace, ctx, api_client, server_node, client_node):
    networking = client.NetworkingV1Api(api_client)
    networking.create_namespaced_network_policy(namespace, client.V1NetworkPolicy(
        metadata=client.V1ObjectMeta(name="friends-only"),
        spec=client.V1NetworkPolicySpec(
            pod_selector=client.V1LabelSelector(match_labels={"app": "guarded"}), policy_types=["Ingress"],
            ingress=[client.V1NetworkPolicyIngressRule(_from=[client.V1NetworkPolicyPeer(
                pod_selector=client.V1LabelSelector(match_labels={"role": "friend"}))])])))
    server = start_server(ctx, "guarded", server_node)
    url = f"http://{server.status.pod_ip}:{PORT}/"
    friend = fetch(ctx, "friend", client_node, [url], seconds=30, labels={"role": "friend"})[url]
    stranger = fetch(ctx, "stranger", client_node, [url], seconds=15)[url]
    assert friend.startswith(f"200 {server_node}"), friend
    assert stranger.startswith("error"), stranger
    networking.delete_namespaced_network_policy("friends-only", namespace)
    after = fetch(ctx, "stranger-after", client_node, [url], seconds=30)[url]
    assert after.startswith(f"200 {server_node}"), after  # it was the policy, not the network


def test_a_host_path_is_one_host_directory_on_both_nodes(namespace, ctx):
    shared = Path("/var/tmp") / f"sparkpoint-two-nodes-{namespace}"
    shared.mkdir(parents=True)
    shared.chmod(0o777)  # the image's user writes in it (as test_operator_executors.shared_hot_dir)
    try:
        volume = client.V1Volume(name="shared", host_path=client.V1HostPathVolumeSource(path=str(shared)))
        mount = [client.V1VolumeMount(name="shared", mount_path="/shared")]
        for name, node, script in [
                ("writer", NODE2.name, "open('/shared/note', 'w').write('from node 2')"),
                ("reader", NODE1, "print(open('/shared/note').read())")]:
            ctx.create(name, node, [python_container(script, volume_mounts=mount)], volumes=[volume],
                       restart_policy="Never")
            assert ctx.pods.wait_phase(name, "Succeeded", timeout=120).spec.node_name == node
        assert ctx.core.read_namespaced_pod_log("reader", namespace, container="main") == "from node 2\n"
        assert (shared / "note").read_text() == "from node 2"
    finally:
        for path in shared.glob("*"):
            path.unlink()
        shared.rmdir()


def node_ready(core, name: str) -> bool:
    return any(c.type == "Ready" and c.status == "True" for c in core.read_node(name).status.conditions)


def answers(url: str) -> bool:
    try:
        with urllib.request.urlopen(url, timeout=3) as response:
            return response.status == 200
    except OSError:
        return False


# The controller manager's --node-monitor-grace-period and --node-monitor-period (the defaults of
# v1.33, pkg/controller/nodelifecycle/config/v1alpha1/defaults.go; components.py sets neither).
NODE_MONITOR_GRACE, NODE_MONITOR_PERIOD = 50, 5


@pytest.mark.slow
def test_a_frozen_node_goes_not_ready_within_the_grace_period_and_ready_after_a_thaw(core, ctx):
    server = start_server(ctx, "frozen", NODE2.name)
    url = f"http://{server.status.pod_ip}:{PORT}/"
    assert answers(url)
    cg = freezer.node_cgroup(NODE2.cgroup_root)
    frozen_at = time.monotonic()
    freezer.freeze(cg)
    try:
        assert not answers(url), "a pod of the frozen node answered"
        wait_for(f"{NODE2.name} to go NotReady", lambda: not node_ready(core, NODE2.name),
                 timeout=NODE_MONITOR_GRACE + 30, interval=1)
        not_ready_after = time.monotonic() - frozen_at
        reason = next(c for c in core.read_node(NODE2.name).status.conditions if c.type == "Ready")
        assert reason.status == "Unknown" and reason.reason == "NodeStatusUnknown", reason
        assert node_ready(core, NODE1), "node 1 went down with node 2"
    finally:
        freezer.thaw(cg)
    thawed_at = time.monotonic()
    wait_for(f"{NODE2.name} to be Ready again", lambda: node_ready(core, NODE2.name), timeout=60, interval=1)
    ready_after = time.monotonic() - thawed_at
    wait_for("the thawed pod to answer", lambda: answers(url), timeout=30)
    print(f"NotReady {not_ready_after:.1f} s after the freeze; Ready {ready_after:.1f} s after the thaw")
    # Counted from the kubelet's last lease renewal (every 10 s, so up to 10 s before the freeze) and
    # noticed at the monitor's next pass; 10 s more for a loaded machine.
    assert not_ready_after <= NODE_MONITOR_GRACE + NODE_MONITOR_PERIOD + 10
