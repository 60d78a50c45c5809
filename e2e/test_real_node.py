"""Issue 28: what a real node (kubelet + containerd + runc: `make cluster-up`, the default node, or kind) does
to a pod that the local node agent does not: the pod network, the image's user and file system,
the security context enforced by the runtime, memory limits enforced by the kernel.

Every test here is skipped on the node agent (it enforces none of this): a skip is not coverage.
"""

from __future__ import annotations

import ipaddress
from pathlib import Path

import pytest
from kube_helpers import container_status, pod_logs, python_container, real_node, wait_for
from kubernetes import client

VERSIONS = Path(__file__).resolve().parents[1] / "versions.env"


@pytest.fixture(autouse=True)
def needs_real_node(core):
    if not real_node(core):
        pytest.skip("needs a real kubelet and container runtime (make cluster-up, the default node; not NODE=agent); "
                    "the node agent does not enforce this")


def root_probe_image() -> str:
    """An image whose user is root (no USER): built beside the pause image (e2e/local/build.sh)."""
    for line in VERSIONS.read_text().splitlines():
        if line.startswith("PAUSE_IMAGE_VERSION="):
            return f"sparkpoint/root-probe:{line.split('=', 1)[1].strip()}"
    raise KeyError("PAUSE_IMAGE_VERSION")


def terminated(pod: client.V1Pod):
    status = container_status(pod)
    return status and (status.state.terminated or (status.last_state and status.last_state.terminated))


def test_pods_get_their_own_network_and_the_image_user(core, namespace, pods):
    script = ("import os, socket; s = socket.socket(); s.connect((os.environ['KUBERNETES_SERVICE_HOST'], "
              "int(os.environ['KUBERNETES_SERVICE_PORT']))); print('uid', os.getuid(), 'api reachable')")
    pods.create("net", [python_container(script)], restart_policy="Never")
    pod = pods.wait_phase("net", "Succeeded")
    address = ipaddress.ip_address(pod.status.pod_ip)
    assert not address.is_loopback and pod.status.pod_ip != pod.status.host_ip
    # The runtime image's USER (185), the API server through the `kubernetes` Service (kube-proxy).
    assert core.read_namespaced_pod_log("net", namespace, container="main") == "uid 185 api reachable\n"


def test_read_only_root_filesystem_refuses_writes(core, namespace, pods):
    script = "open('/written-by-the-test', 'w').write('x')"
    pods.create("ro", [python_container(script, security_context=client.V1SecurityContext(
        read_only_root_filesystem=True))], restart_policy="Never")
    pod = pods.wait_phase("ro", "Failed")
    assert terminated(pod).exit_code == 1
    assert "Read-only file system" in pod_logs(core, namespace, "ro")


def test_run_as_non_root_refuses_a_root_image(pods):
    container = client.V1Container(name="main", image=root_probe_image(), image_pull_policy="Never",
                                   security_context=client.V1SecurityContext(run_as_non_root=True))
    pods.create("root", [container], restart_policy="Never")
    pod = pods.wait("root", "refused by the kubelet", lambda p: (container_status(p) is not None and
                    container_status(p).state.waiting is not None and
                    container_status(p).state.waiting.reason == "CreateContainerConfigError"))
    message = container_status(pod).state.waiting.message
    assert "runAsNonRoot" in message and "root" in message, message


def test_root_image_runs_without_run_as_non_root(pods):
    """The control for the test above: the same image starts when nothing forbids root."""
    container = client.V1Container(name="main", image=root_probe_image(), image_pull_policy="Never")
    pods.create("root-ok", [container], restart_policy="Never")
    pods.wait("root-ok", "running", lambda p: container_status(p) is not None and container_status(p).ready)


def test_dropped_capabilities_are_gone_in_the_container(core, namespace, pods):
    script = ("import re; print(re.search(r'CapEff:\\s*(\\w+)', open('/proc/self/status').read()).group(1))")
    security = client.V1SecurityContext(capabilities=client.V1Capabilities(drop=["ALL"]),
                                        allow_privilege_escalation=False, run_as_non_root=True,
                                        seccomp_profile=client.V1SeccompProfile(type="RuntimeDefault"))
    pods.create("caps", [python_container(script, security_context=security)], restart_policy="Never")
    pods.wait_phase("caps", "Succeeded")
    assert core.read_namespaced_pod_log("caps", namespace, container="main").strip() == "0000000000000000"


def test_memory_limit_is_enforced_by_an_oom_kill(core, namespace, pods):
    script = "blocks = []\nwhile True:\n    blocks.append(bytearray(16 * 1024 * 1024))"
    resources = client.V1ResourceRequirements(requests={"memory": "64Mi"}, limits={"memory": "64Mi"})
    pods.create("oom", [python_container(script, resources=resources)], restart_policy="Never")
    pod = pods.wait_phase("oom", "Failed")
    assert terminated(pod).reason == "OOMKilled"
    assert terminated(pod).exit_code == 137


def test_job_pod_over_its_memory_limit_is_oom_killed_and_a_new_attempt_starts(api_client, core, namespace,
                                                                              operator, store_env):
    """A driver JVM that takes more than its 1Gi container on purpose (its heap raised past the
    sized one and touched at start): the kernel kills it, the kubelet says OOMKilled, and the
    operator records it as such (lastFailure naming the limit, a Warning Event) and starts a new
    attempt, counted as a restart. (A heap sized from the limit, as the operator passes it, fits:
    every other job of the suite runs in 1Gi.)"""
    from operator_jobs import Jobs

    jobs = Jobs(api_client, namespace, store_env)
    # -Xmx is refused in extraJavaOptions; MaxHeapSize is read after the launcher's -Xmx and wins.
    jobs.create("hungry", **{"spark.resources": {"cpu": "100m", "memory": "1Gi"},
                             "spark.conf": {"spark.driver.extraJavaOptions":
                                            "-XX:MaxHeapSize=3g -Xms3g -XX:+AlwaysPreTouch"},
                             "restart": {"maxRestarts": 20, "backoff": "1s", "maxBackoff": "5s"}})

    def new_attempt_after_an_oom_kill():
        st = jobs.status("hungry")
        failure = st.get("lastFailure") or {}
        return st if failure.get("reason") == "OOMKilled" and st.get("attempt", 0) >= 2 else None

    st = wait_for("the runtime OOM-killed, recorded, and a new attempt", new_attempt_after_an_oom_kill,
                  timeout=300, interval=2.0)
    assert "OOM-killed at its memory limit 1Gi" in st["lastFailure"]["message"], st["lastFailure"]
    assert st["restarts"] >= 1 and not st.get("localRecoveries"), st
    events = jobs.core.list_namespaced_event(namespace, field_selector="involvedObject.name=hungry").items
    assert any(e.reason == "OOMKilled" and e.type == "Warning" for e in events), [e.reason for e in events]
