"""The driver pod of a spark.master k8s job (issue 26): its ServiceAccount token, fixed Spark
ports, what the runtime reads from its environment, and the shared hot volume with a directory
per attempt. Pure: the e2e test runs the same pod with executors on the local cluster."""

from __future__ import annotations

from sparkpoint.operator.kube import builders
from sparkpoint.runtime.spark import executors
from sparkpoint.runtime.spec import job as config

JOB = builders.JobRef(namespace="analytics", name="clicks", uid="0d9c0a52-1111-2222-3333-444455556666")
BASE = {"image": "sparkpoint:dev", "job": {"entrypoint": "examples.windowed_aggregation:build"},
        "checkpoint": {"storage": {"url": "s3://ckpt/prod", "secretRef": {"name": "minio-creds"}}}}
HOT = {"persistentVolumeClaim": {"claimName": "shared-hot"}}
K8S = config.parse_spec({**BASE, "spark": {"master": "k8s", "executors": {"instances": 2}},
                         "checkpoint": {**BASE["checkpoint"], "hotVolume": HOT}})
LOCAL = config.parse_spec(BASE)


def _runtime(pod: dict) -> dict:
    return next(c for c in pod["spec"]["containers"] if c["name"] == "runtime")


def test_the_driver_pod_gets_the_driver_account_and_its_token() -> None:
    pod = builders.build_pod(JOB, K8S, attempt=4, service_account="sparkpoint-runtime",
                             driver_service_account="sparkpoint-driver")["spec"]
    assert pod["serviceAccountName"] == "sparkpoint-driver" and pod["automountServiceAccountToken"] is True
    # without a named account: the namespace's default, still with a token (Spark's backend needs one)
    pod = builders.build_pod(JOB, K8S, attempt=4)["spec"]
    assert "serviceAccountName" not in pod and pod["automountServiceAccountToken"] is True


def test_local_jobs_keep_no_token_even_when_a_driver_account_exists() -> None:
    pod = builders.build_pod(JOB, LOCAL, attempt=1, driver_service_account="sparkpoint-driver")["spec"]
    assert pod["automountServiceAccountToken"] is False and "serviceAccountName" not in pod
    runtime = _runtime({"spec": pod})
    assert {p["name"] for p in runtime["ports"]} == {"control", "metrics", "spark-ui"}  # no Spark driver ports
    assert builders.POD_NAME_ENV not in {e["name"] for e in runtime["env"]}
    # Every runtime knows its attempt: the store fence orders pods by it (a zombie never fences a newer one).
    assert {"name": builders.ATTEMPT_ENV, "value": "1"} in runtime["env"]


def test_the_driver_declares_sparks_ports_and_tells_the_runtime_who_it_is() -> None:
    runtime = _runtime(builders.build_pod(JOB, K8S, attempt=4))
    ports = {p["name"]: p["containerPort"] for p in runtime["ports"]}
    assert ports["spark-driver"] == executors.DRIVER_PORT and ports["spark-blocks"] == executors.BLOCK_MANAGER_PORT
    env = {e["name"]: e for e in runtime["env"]}
    assert env[executors.POD_NAME_ENV]["valueFrom"] == {"fieldRef": {"fieldPath": "metadata.name"}}
    assert env[executors.ATTEMPT_ENV]["value"] == "4"
    assert env[executors.HOT_VOLUME_PATH_ENV]["value"] == builders.HOT_DIR
    assert env["POD_IP"]["valueFrom"]["fieldRef"]["fieldPath"] == "status.podIP"
    # the runtime's driver_from_env accepts exactly what the pod provides (plus the in-cluster API address)
    provided = {name: "x" for name in env} | {"KUBERNETES_SERVICE_HOST": "h", "KUBERNETES_SERVICE_PORT": "443"}
    assert executors.driver_from_env(provided, JOB.namespace, JOB.name).pod_name == "x"


def test_the_hot_volume_is_shared_and_each_attempt_works_in_its_own_directory() -> None:
    pods = [builders.build_pod(JOB, K8S, attempt=n) for n in (1, 2)]
    for pod in pods:
        volumes = {v["name"]: v for v in pod["spec"]["volumes"]}
        assert volumes["hot"] == {"name": "hot", **HOT}
        mount = next(m for m in _runtime(pod)["volumeMounts"] if m["name"] == "hot")
        assert mount["mountPath"] == builders.HOT_DIR
    dirs = [_runtime(p)["command"][_runtime(p)["command"].index("--work-dir") + 1] for p in pods]
    assert dirs == [f"{builders.HOT_DIR}/analytics/clicks/{JOB.uid}/attempt-{n}" for n in (1, 2)]
    # without a hot volume: the pod's own emptyDir and the usual work dir
    local = builders.build_pod(JOB, LOCAL, attempt=2)
    assert {v["name"]: v for v in local["spec"]["volumes"]}["hot"] == {"name": "hot", "emptyDir": {}}
    assert f"{builders.HOT_DIR}/work" in _runtime(local)["command"]


def test_the_operator_never_counts_executors_as_the_jobs_pods() -> None:
    """Executors carry the job's label but component=executor; the Service and the operator's pod
    index select component=runtime only."""
    service = builders.build_service(JOB)
    driver = executors.DriverPod("analytics", "clicks", "4", "clicks-4", "10.0.0.1", "https://h:443", "/v")
    labels = executors.executor_labels(driver)
    assert not all(labels.get(k) == v for k, v in service["spec"]["selector"].items())
    from sparkpoint.operator.handlers import RUNTIME_PODS

    assert not all(labels.get(k) == v for k, v in RUNTIME_PODS.items())
