"""The operator, installed with the Helm chart, runs a StreamingJob: Running, checkpoints in status,
`kubectl wait` on Ready, the kubectl plugin's view of it; and it does so as the chart's
ServiceAccount, under the chart's RBAC."""

from __future__ import annotations

import json
import os
import subprocess
import time
import urllib.request

from kube_helpers import wait_for
from kubernetes import client
from operator_jobs import Jobs, condition
from test_kubectl_plugin import assert_plugin_reads


def test_job_runs_and_checkpoints_appear_in_status(api_client, namespace, helm_operator, store_env):
    operator = helm_operator
    jobs = Jobs(api_client, namespace, store_env)
    jobs.create("clicks")
    st = jobs.wait_status("clicks", "Running", lambda s: s.get("phase") == "Running", operator=operator)
    assert st["attempt"] == 1 and st["pod"] == "clicks-1"
    # The job pod runs as the chart's runtime ServiceAccount, which mounts no API token.
    pod = client.CoreV1Api(api_client).read_namespaced_pod("clicks-1", namespace)
    assert pod.spec.service_account_name == "sparkpoint-runtime"
    assert not [v for v in pod.spec.volumes if v.projected and any(
        s.service_account_token for s in v.projected.sources or [])]
    wait = subprocess.run(["kubectl", "wait", "--for=condition=Ready", "streamingjob/clicks", "-n", namespace,
                           "--timeout=60s"], capture_output=True, text=True, env=dict(os.environ), timeout=90)
    assert wait.returncode == 0, wait.stderr
    st = jobs.wait_status("clicks", "two checkpoints in status, CheckpointHealthy",
                          lambda s: len(s.get("checkpoints") or []) >= 2 and condition(s, "CheckpointHealthy") == "True",
                          timeout=180, operator=operator)
    latest = st["latestCheckpoint"]
    assert latest["id"].startswith("chk-") and latest["batch"] is not None and latest["bytes"] > 0
    assert latest["id"] == st["checkpoints"][-1]["id"]
    assert condition(st, "CheckpointHealthy") == "True" and condition(st, "Degraded") == "False"
    assert st["observedGeneration"] == 1 and st.get("restarts", 0) == 0
    assert 'sparkpoint_operator_jobs{phase="Running"} 1.0' in operator.get("/metrics")
    wait_for("a trigger of the operator completed", lambda: 'sparkpoint_operator_checkpoint_triggers_total'
             '{result="completed"}' in operator.get("/metrics"), timeout=90)
    printed = subprocess.run(["kubectl", "get", "sj", "clicks", "-n", namespace], capture_output=True, text=True,
                             timeout=30).stdout
    assert "Running" in printed and latest["id"][:4] in printed
    assert_plugin_reads(namespace, "clicks")  # `kubectl sparkpoint list/status/checkpoints/logs`
    assert_live_ui(pod.status.pod_ip, f"sparkpoint-{namespace}-clicks-attempt-")
    assert_runs_as_its_service_account(api_client, namespace, operator)


def assert_live_ui(pod_ip: str, app_name: str, within: float = 120.0) -> None:
    """Spark's live UI (spark.ui.enabled by default) answers /api/v1/applications with the job's
    application (named after the job and the attempt: app_name is the prefix). A real node gives the
    pod its own 4040; the local cluster's pods share the host's network, where Spark moves a second UI
    to the next free port, so those are tried too. Tried again for `within` seconds: on a loaded
    2-core machine the UI took 31 s to answer its first request (a single 10 s try failed there)."""
    found: list[str] = []
    deadline = time.monotonic() + within
    while True:
        for port in range(4040, 4057):
            try:
                with urllib.request.urlopen(f"http://{pod_ip}:{port}/api/v1/applications", timeout=30) as resp:
                    found += [app["name"] for app in json.loads(resp.read())]
            except OSError:
                continue
            if any(name.startswith(app_name) for name in found):
                return
        if time.monotonic() > deadline:
            raise AssertionError(f"no Spark UI on {pod_ip}:4040-4056 serves {app_name}* within {within:g}s; "
                                 f"found {found}")
        time.sleep(5)


def assert_runs_as_its_service_account(api_client, namespace: str, operator) -> None:
    """Revoke the operator's RoleBinding: its next API call is refused, and the API server's message
    names the chart's ServiceAccount, so that is the identity it uses (not an admin kubeconfig)."""
    rbac = client.RbacAuthorizationV1Api(api_client)
    name = operator.service_account  # the Role and RoleBinding share the operator's name
    binding = rbac.read_namespaced_role_binding(name, namespace)
    user = f"system:serviceaccount:{namespace}:{operator.service_account}"
    rbac.delete_namespaced_role_binding(name, namespace)
    try:
        wait_for(f"the operator refused as {user}", lambda: user in operator.log(tail=200), timeout=90)
    finally:
        binding.metadata = client.V1ObjectMeta(name=name, namespace=namespace, labels=binding.metadata.labels)
        rbac.create_namespaced_role_binding(namespace, binding)
    # Least privilege as the API server sees it: what the operator may and may not do.
    review = client.AuthorizationV1Api(api_client)

    def allowed(verb: str, resource: str, ns: str = namespace, group: str = "", subresource: str = "") -> bool:
        body = client.V1SubjectAccessReview(spec=client.V1SubjectAccessReviewSpec(
            user=user, groups=["system:serviceaccounts", f"system:serviceaccounts:{namespace}", "system:authenticated"],
            resource_attributes=client.V1ResourceAttributes(namespace=ns, verb=verb, resource=resource, group=group,
                                                            subresource=subresource)))
        return review.create_subject_access_review(body).status.allowed

    assert allowed("create", "pods") and allowed("get", "secrets")
    assert allowed("patch", "streamingjobs", group="sparkpoint.dev", subresource="status")
    assert not allowed("list", "secrets") and not allowed("delete", "secrets")
    assert not allowed("create", "pods", ns="default") and not allowed("get", "secrets", ns="kube-system")
    assert not allowed("create", "clusterroles", ns="", group="rbac.authorization.k8s.io")
