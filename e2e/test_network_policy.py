"""Issue 28: the chart's NetworkPolicies (`networkPolicy.enabled`) enforced by a real policy engine
(kube-router beside the real node, e2e/local/network_policy.py). A job pod's control API (8080) admits only
the operator, its metrics port (9091) only the monitoring namespaces, its Spark UI (4040, no
authentication) only the operator's namespace, and the operator's metrics port only the monitoring
namespaces; with the policies deleted, the same outsider gets through (so the test can fail).

Every probe runs inside a pod (`kubectl exec`): traffic from the node itself is never subject to
policy (kube-router, like the kubelet's probes, lets the node in), so the test process cannot be the
client. Skipped on the node agent, whose pods share the host's network and no policy applies, and on
`make e2e-kind`'s cluster, which has no policy engine.
"""

from __future__ import annotations

import json
import os
import socket
import subprocess
import uuid

import pytest
from kube_helpers import container_status, exists, python_container, real_node, wait_for
from kubernetes import client
from operator_jobs import Jobs

CONTROL, METRICS = 8080, 9091  # operator/kube/builders.py CONTROL_PORT, METRICS_PORT
UI = 4040  # runtime/spec/rules.py SPARK_UI_PORT: Spark's live UI, no authentication (docs/security.md)
# Connects to each host:port until it succeeds or `seconds` pass; prints {target: "connected" | error}.
PROBE = """
import json, socket, sys, time
seconds, targets = float(sys.argv[1]), sys.argv[2:]
deadline, result = time.monotonic() + seconds, {}
while True:
    for target in targets:
        if result.get(target) == "connected":
            continue
        host, port = target.rsplit(":", 1)
        try:
            socket.create_connection((host, int(port)), timeout=2).close()
            result[target] = "connected"
        except OSError as error:
            result[target] = f"{type(error).__name__}: {error}"
    if all(r == "connected" for r in result.values()) or time.monotonic() > deadline:
        break
    time.sleep(0.5)
print(json.dumps(result))
"""
SLEEPER = "import time\nwhile True:\n    time.sleep(60)"


@pytest.fixture(autouse=True)
def needs_real_node(core):
    if not real_node(core):
        pytest.skip("needs a real node with a NetworkPolicy engine (make cluster-up runs kube-router beside its default real node); "
                    "the node agent's pods share the host's network, where no policy applies")
    if os.environ.get("SPARKPOINT_E2E_CLUSTER") == "kind":
        pytest.skip("make e2e-kind's cluster runs no NetworkPolicy engine (kindnet is replaced by a static "
                    "bridge conflist: e2e/kind/README.md)")


@pytest.fixture
def monitoring(core):
    """The namespace the chart lets scrape metrics (networkPolicy.prometheusNamespaces)."""
    name = f"e2e-np-monitoring-{uuid.uuid4().hex[:5]}"
    core.create_namespace(client.V1Namespace(metadata=client.V1ObjectMeta(name=name)))
    wait_for("the default service account", lambda: exists(
        lambda: core.read_namespaced_service_account("default", name)), timeout=60)
    yield name
    core.delete_namespace(name, grace_period_seconds=0)


@pytest.fixture
def chart_values(monitoring) -> dict[str, str]:
    return {"networkPolicy.enabled": "true", "networkPolicy.prometheusNamespaces": f"{{{monitoring}}}"}


def start_sleeper(core: client.CoreV1Api, namespace: str, name: str) -> str:
    """A pod that only sleeps, labelled like nothing the chart's policies select; probes run in it."""
    core.create_namespaced_pod(namespace, client.V1Pod(
        metadata=client.V1ObjectMeta(name=name, labels={"app": name}),
        spec=client.V1PodSpec(containers=[python_container(SLEEPER)], termination_grace_period_seconds=1)))
    wait_for(f"pod {namespace}/{name} running", lambda: (lambda s: s is not None and s.ready)(
        container_status(core.read_namespaced_pod(name, namespace))), timeout=120)
    return name


def probe(namespace: str, pod: str, container: str, targets: list[str], seconds: float) -> dict[str, str]:
    out = subprocess.run(["kubectl", "exec", "-n", namespace, pod, "-c", container, "--",
                          "python", "-c", PROBE, str(seconds), *targets],
                         capture_output=True, text=True, timeout=seconds + 60, env=dict(os.environ))
    assert out.returncode == 0, f"kubectl exec in {namespace}/{pod} failed: {out.stderr}"
    return json.loads(out.stdout.strip().splitlines()[-1])


def reachable_from_the_node(host: str, port: int) -> bool:
    try:
        socket.create_connection((host, port), timeout=2).close()
        return True
    except OSError:
        return False


def test_chart_policy_admits_only_the_operator_and_prometheus(api_client, core, namespace, monitoring,
                                                              helm_operator, store_env):
    operator = helm_operator
    jobs = Jobs(api_client, namespace, store_env)
    jobs.create("guarded")
    jobs.wait_status("guarded", "Running", lambda s: s.get("phase") == "Running", operator=operator)
    job_ip = core.read_namespaced_pod("guarded-1", namespace).status.pod_ip
    control, metrics, ui = f"{job_ip}:{CONTROL}", f"{job_ip}:{METRICS}", f"{job_ip}:{UI}"
    operator_metrics = f"{operator.pod().status.pod_ip}:{operator.metrics_port}"
    # Both job ports listen (the node is exempt from policy): a refusal below is the policy's.
    wait_for("the job's control API, metrics and UI ports listening", lambda: all(
        reachable_from_the_node(job_ip, port) for port in (CONTROL, METRICS, UI)), timeout=180)

    outsider = start_sleeper(core, namespace, "outsider")  # the job's own namespace, the wrong labels
    scraper = start_sleeper(core, monitoring, "prometheus")  # stands in for Prometheus

    # Allowed: the operator to the control API, Prometheus to both metrics ports. A new pod's address
    # enters kube-router's ipsets a moment after it starts, hence the retries.
    # The UI: only pods of the operator's (release) namespace, which here is the job's own.
    from_operator = probe(namespace, operator.pod().metadata.name, "operator", [control, ui], seconds=60)
    assert from_operator == {control: "connected", ui: "connected"}, from_operator
    from_scraper = probe(monitoring, scraper, "main", [metrics, operator_metrics], seconds=60)
    assert from_scraper == {metrics: "connected", operator_metrics: "connected"}, from_scraper
    # Not allowed: the outsider anywhere; Prometheus to the control API.
    from_outsider = probe(namespace, outsider, "main", [control, metrics, operator_metrics], seconds=15)
    assert not any(r == "connected" for r in from_outsider.values()), from_outsider
    scraper_to_control = probe(monitoring, scraper, "main", [control, ui], seconds=10)
    assert not any(r == "connected" for r in scraper_to_control.values()), scraper_to_control
    # The operator did its work through the control API under the policy: a checkpoint it triggered.
    wait_for("a checkpoint trigger of the operator completed", lambda: 'sparkpoint_operator_checkpoint_triggers_total'
             '{result="completed"}' in (operator.get("/metrics") or ""), timeout=120)

    # The reverse: without the chart's policies the same outsider connects to all three.
    policies = client.NetworkingV1Api(api_client)
    names = [p.metadata.name for p in policies.list_namespaced_network_policy(
        namespace, label_selector=f"app.kubernetes.io/instance={operator.release}").items]
    assert len(names) == 2, names  # the job pods' and the operator's
    for name in names:
        policies.delete_namespaced_network_policy(name, namespace)
    opened = probe(namespace, outsider, "main", [control, metrics, operator_metrics], seconds=60)
    assert opened == {control: "connected", metrics: "connected", operator_metrics: "connected"}, opened
    ui_opened = probe(monitoring, scraper, "main", [ui], seconds=60)  # refused above by the policy alone
    assert ui_opened == {ui: "connected"}, ui_opened
