"""Issue 41 on the local cluster, the part a driver's token can try without Spark: with the operator
installed by the chart, the token of the drivers' account (`sparkpoint-driver`, what Spark's backend
in a `spark.master: k8s` job's pod holds) is used as a hostile job's code would use it. Every attempt
to leave the job (run a pod as the operator's account, mount a Secret or the host's root, take env
from a Secret, change another pod's image, delete a job's driver pod, read Secrets) is refused by the
API server (the Role or the chart's ValidatingAdmissionPolicy), while the executor pod Spark would
create is admitted. Creates are dry runs: nothing the attempts ask for ever exists. The test names
each attempt and its outcome in its failure message.

Not covered here (they need a running hostile job on the real node): reading another job's hot
directory, connecting to another job's driver or UI, and the History Server of another tenant.
"""

from __future__ import annotations

import copy

import pytest
from kube_helpers import python_container, wait_for
from kubernetes import client
from kubernetes.client.rest import ApiException

DRIVER_ACCOUNT = "sparkpoint-driver"


@pytest.fixture
def chart_values() -> dict[str, str]:
    return {"driverAdmissionPolicy.enabled": "true"}


@pytest.fixture(autouse=True)
def needs_admission_policies(api_client):
    served = {r.name for r in client.AdmissionregistrationV1Api(api_client).get_api_resources().resources or []}
    if "validatingadmissionpolicies" not in served:
        pytest.skip("the API server serves no ValidatingAdmissionPolicy (the operator warns; docs/security.md)")


def driver_client(api_client: client.ApiClient, core: client.CoreV1Api, namespace: str) -> client.CoreV1Api:
    """A client that authenticates only with the drivers' account token (no client certificate)."""
    wait_for("the drivers' account", lambda: any(
        a.metadata.name == DRIVER_ACCOUNT for a in core.list_namespaced_service_account(namespace).items), timeout=60)
    token = core.create_namespaced_service_account_token(DRIVER_ACCOUNT, namespace, client.AuthenticationV1TokenRequest(
        spec=client.V1TokenRequestSpec(audiences=[], expiration_seconds=600))).status.token
    conf = copy.copy(api_client.configuration)
    conf.cert_file = conf.key_file = None
    conf.username = conf.password = None
    conf.api_key = {"authorization": token}
    conf.api_key_prefix = {"authorization": "Bearer"}
    return client.CoreV1Api(client.ApiClient(conf))


def executor_pod(namespace: str, **change) -> dict:
    """The executor pod Spark's backend creates for job `clicks`, attempt 3 (its pod template's shape)."""
    pod = {"apiVersion": "v1", "kind": "Pod",
           "metadata": {"name": "clicks-3-exec-1",
                        "labels": {"spark-role": "executor", "app.kubernetes.io/name": "sparkpoint",
                                   "app.kubernetes.io/component": "executor", "sparkpoint.dev/job": "clicks"},
                        "ownerReferences": [{"apiVersion": "v1", "kind": "Pod", "name": "clicks-3",
                                             "uid": "00000000-0000-0000-0000-000000000003", "controller": True}]},
           "spec": {"automountServiceAccountToken": False, "restartPolicy": "Never",
                    "containers": [{"name": "executor", "image": "sparkpoint/runtime:dev",
                                    "volumeMounts": [{"name": "tmp", "mountPath": "/tmp"}]}],
                    "volumes": [{"name": "tmp", "emptyDir": {}}]}}
    for path, value in change.items():
        node = pod
        *parents, leaf = path.split(".")
        for key in parents:
            node = node[int(key)] if isinstance(node, list) else node[key]
        node[leaf] = value
    return pod


def attempt(what: str, call) -> str:
    try:
        call()
    except ApiException as refused:
        return f"{what}: refused {refused.status}"
    return f"{what}: ADMITTED"


def test_a_drivers_token_cannot_leave_its_job(api_client, core, namespace, helm_operator):
    driver = driver_client(api_client, core, namespace)
    # A pod of the job's namespace that is not an executor (here: a stand-in for another job's driver).
    victim = core.create_namespaced_pod(namespace, client.V1Pod(
        metadata=client.V1ObjectMeta(name="orders-1", labels={"sparkpoint.dev/job": "orders",
                                                              "app.kubernetes.io/component": "runtime"}),
        spec=client.V1PodSpec(containers=[python_container("import time; time.sleep(600)")],
                              termination_grace_period_seconds=1)))

    def create(**change):
        return lambda: driver.create_namespaced_pod(namespace, executor_pod(namespace, **change), dry_run="All")

    secret_volume = [{"name": "tmp", "emptyDir": {}}, {"name": "keys", "secret": {"secretName": "minio-creds"}}]
    root_volume = [{"name": "tmp", "emptyDir": {}}, {"name": "root", "hostPath": {"path": "/"}}]
    secret_env = [{"name": "AWS_SECRET_ACCESS_KEY", "valueFrom": {"secretKeyRef": {"name": "minio-creds",
                                                                                   "key": "AWS_SECRET_ACCESS_KEY"}}}]
    outcomes = [
        attempt("run a pod as the operator's account", create(**{
            "spec.serviceAccountName": helm_operator.service_account, "spec.automountServiceAccountToken": True})),
        attempt("mount a ServiceAccount token", create(**{"spec.automountServiceAccountToken": True})),
        attempt("mount a Secret", create(**{"spec.volumes": secret_volume})),
        attempt("mount the host's root", create(**{"spec.volumes": root_volume})),
        attempt("take env from a Secret", create(**{"spec.containers.0.env": secret_env})),
        attempt("create a pod that is no executor", create(**{"metadata.labels": {"app": "miner"}})),
        attempt("patch another job's pod to a new image", lambda: driver.patch_namespaced_pod(
            victim.metadata.name, namespace, {"spec": {"containers": [{"name": "main", "image": "evil:latest"}]}},
            dry_run="All")),
        attempt("delete another job's driver pod", lambda: driver.delete_namespaced_pod(
            victim.metadata.name, namespace, dry_run="All")),
        attempt("read Secrets", lambda: driver.list_namespaced_secret(namespace)),
        attempt("create a Service", lambda: driver.create_namespaced_service(namespace, {
            "metadata": {"name": "leak"}, "spec": {"ports": [{"port": 80}]}}, dry_run="All")),
    ]
    refused = [o for o in outcomes if ": refused" in o]
    assert refused == outcomes, "\n".join(outcomes)
    # The executor Spark would create is admitted: the refusals are the policy's, not a broken token.
    assert attempt("create this job's executor", create()) == "create this job's executor: ADMITTED"
