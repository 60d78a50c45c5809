"""Fixtures of the e2e suite. Cluster-agnostic: everything goes through $KUBECONFIG, so the same
tests run on the local cluster (make e2e) and on kind (e2e/kind/run.sh).

Each test gets its own namespace, deleted afterwards. Test pods run `python -c <script>` in
$SPARKPOINT_E2E_IMAGE (default sparkpoint:e2e); on the local cluster the node agent maps
`python` to the project's virtualenv, on kind the image provides it.
"""

from __future__ import annotations

import os
import re
import uuid
from collections.abc import Callable, Iterator

import pytest
import yaml
from kube_helpers import CRD_FILE, exists, install_crd, pod_logs, wait_for
from kubernetes import client, config
from kubernetes.client.rest import ApiException


@pytest.fixture(scope="session")
def api_client() -> client.ApiClient:
    if not os.environ.get("KUBECONFIG"):
        raise RuntimeError("KUBECONFIG is not set: run `make cluster-up` and export the line it prints "
                           "(or use `make e2e`, which does both)")
    return config.new_client_from_config(config_file=os.environ["KUBECONFIG"])


@pytest.fixture(scope="session")
def core(api_client) -> client.CoreV1Api:
    return client.CoreV1Api(api_client)


@pytest.fixture
def namespace(core, request) -> Iterator[str]:
    base = re.sub(r"[^a-z0-9-]", "-", request.node.name.lower())[:40].strip("-")
    name = f"e2e-{base}-{uuid.uuid4().hex[:5]}"
    core.create_namespace(client.V1Namespace(metadata=client.V1ObjectMeta(
        name=name, labels={"sparkpoint.dev/e2e": "true"})))
    # Pods are refused until the service-account controller has made `default`.
    wait_for("the default service account", lambda: exists(
        lambda: core.read_namespaced_service_account("default", name)), timeout=60)
    yield name
    try:
        core.delete_namespace(name, grace_period_seconds=0)
    except ApiException as error:
        if error.status != 404:
            raise


@pytest.fixture
def pods(core, namespace):
    """Creates pods in the test namespace and reads them back; shows logs when a wait fails."""
    class Pods:
        def create(self, name: str, containers: list, **spec) -> client.V1Pod:
            body = client.V1Pod(metadata=client.V1ObjectMeta(name=name),
                                spec=client.V1PodSpec(containers=containers, **spec))
            return core.create_namespaced_pod(namespace, body)

        def read(self, name: str) -> client.V1Pod:
            return core.read_namespaced_pod(name, namespace)

        def wait(self, name: str, what: str, check: Callable[[client.V1Pod], bool], timeout: float = 90):
            try:
                return wait_for(f"pod {name}: {what}", lambda: (lambda p: p if check(p) else None)(self.read(name)),
                                timeout)
            except AssertionError as error:
                raise AssertionError(f"{error}\nlogs:\n{pod_logs(core, namespace, name)}") from None

        def wait_phase(self, name: str, phase: str, timeout: float = 90) -> client.V1Pod:
            return self.wait(name, f"phase {phase}", lambda p: p.status.phase == phase, timeout)

    return Pods()


@pytest.fixture(scope="session")
def streamingjob_crd(api_client):
    """Installs (or updates) the repo's CRD; it stays installed, as the chart would leave it."""
    return install_crd(client.ApiextensionsV1Api(api_client), yaml.safe_load(CRD_FILE.read_text()))


# --- the operator (e2e/test_operator_*.py) ----------------------------------------------------------
OPERATOR_BUCKET = "sparkpoint-e2e"


@pytest.fixture(scope="session")
def store_env() -> dict[str, str]:
    """The local cluster's MinIO (endpoint + credentials) with the e2e bucket; on kind, set
    SPARKPOINT_E2E_MINIO to a JSON file of the same shape."""
    import json

    from kube_helpers import MINIO_INFO as path

    from sparkpoint.runtime.store import open_store
    info = json.loads(path.read_text())
    env = {"SPARKPOINT_S3_ENDPOINT": info["endpoint"], "AWS_ACCESS_KEY_ID": info["access_key"],
           "AWS_SECRET_ACCESS_KEY": info["secret_key"]}
    open_store(f"s3://{OPERATOR_BUCKET}", env=env).create_bucket()
    return env


@pytest.fixture(scope="session")
def peering_crds(api_client) -> None:
    from kube_helpers import PEERING_CRD_FILE, apply_crds

    apply_crds(client.ApiextensionsV1Api(api_client), PEERING_CRD_FILE)


def _delete_jobs_then_stop(api_client, namespace: str, op) -> None:
    """Jobs go while the operator still runs its finalizer; otherwise the namespace never goes."""
    from operator_jobs import Jobs

    try:
        if not op.running():
            op.start()
        Jobs(api_client, namespace, {}).delete_all(timeout=180)
    finally:
        op.stop()


@pytest.fixture
def operator_process(api_client, namespace, streamingjob_crd, peering_crds, store_env):
    """`python -m sparkpoint.operator` as a host process watching the test namespace (kube_helpers.
    OperatorProcess), for what only a process offers: several replicas with chosen priorities.
    `kill()` SIGKILLs it, `start()` starts it again; its log is shown when a test fails."""
    from kube_helpers import STATE_DIR, OperatorProcess

    # Kept under the cluster's state dir (pytest's tmp dirs are rotated away by other runs).
    log_dir = STATE_DIR / "operator"
    log_dir.mkdir(parents=True, exist_ok=True)
    proc = OperatorProcess(namespace, log_dir / f"{namespace}.log")
    proc.start()
    yield proc
    _delete_jobs_then_stop(api_client, namespace, proc)


@pytest.fixture
def chart_values() -> dict[str, str]:
    """Extra `--set` values of the Helm-installed operator; a test module overrides this fixture."""
    return {}


@pytest.fixture
def helm_operator(api_client, namespace, streamingjob_crd, peering_crds, store_env, chart_values):
    """The operator installed by `helm install` of charts/sparkpoint, watching the test namespace
    (e2e/helm_operator.py); uninstalled after the test's StreamingJobs are gone."""
    from helm_operator import HelmOperator

    op = HelmOperator(api_client, namespace, chart_values)
    op.install()
    yield op
    try:
        _delete_jobs_then_stop(api_client, namespace, op)
    finally:
        op.uninstall()


@pytest.fixture
def operator(request):
    """The operator the scenarios run against: the Helm-installed one (its chart, image, RBAC and
    Deployment as a user gets them), or with SPARKPOINT_E2E_OPERATOR=process a host process (faster
    to debug: its log is a file). Both offer start(), stop(), kill() (SIGKILL, stays down), get(path)
    on the metrics port, log()."""
    kind = os.environ.get("SPARKPOINT_E2E_OPERATOR", "helm")
    assert kind in ("helm", "process"), f"SPARKPOINT_E2E_OPERATOR={kind!r}: helm or process"
    return request.getfixturevalue("helm_operator" if kind == "helm" else "operator_process")
