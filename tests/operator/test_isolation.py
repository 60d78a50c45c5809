"""A spark.master k8s job's Spark is its own (issue 41): RPC authenticated with the job's own
secret (a Secret owned by the job, reaching only its driver and executors as a file) and encrypted,
and NetworkPolicies that admit only the job's own pods to its Spark ports. Pure, with the runtime's
side of the same contract (the executors' pod template and Spark settings)."""

from __future__ import annotations

import asyncio
import json

from sparkpoint.operator.kube import builders, isolation
from sparkpoint.operator.reconcile import Reconciler
from sparkpoint.runtime.spark import executors
from sparkpoint.runtime.spec import job as config

JOB = builders.JobRef(namespace="analytics", name="clicks", uid="uid-1")
BASE = {"image": "sparkpoint:dev", "job": {"entrypoint": "m:f"},
        "checkpoint": {"storage": {"url": "s3://ckpt/prod", "secretRef": {"name": "minio-creds"}}}}
K8S = config.parse_spec({**BASE, "spark": {"master": "k8s", "executors": {"instances": 2}},
                         "checkpoint": {**BASE["checkpoint"],
                                        "hotVolume": {"persistentVolumeClaim": {"claimName": "hot"}}}})
LOCAL = config.parse_spec(BASE)
ENV = {"SPARKPOINT_POD_NAME": "clicks-3", "POD_IP": "10.1.2.3", "SPARKPOINT_ATTEMPT": "3",
       "SPARKPOINT_HOT_VOLUME_PATH": "/var/lib/sparkpoint", "KUBERNETES_SERVICE_HOST": "10.96.0.1",
       "KUBERNETES_SERVICE_PORT": "443"}


def test_the_operator_and_the_runtime_agree_on_the_secrets_place() -> None:
    assert isolation.SPARK_AUTH_SECRET_ENV == executors.SPARK_AUTH_SECRET_ENV
    assert f"{isolation.SPARK_AUTH_DIR}/{isolation.SPARK_AUTH_KEY}" == executors.SPARK_AUTH_FILE


def test_the_secret_reaches_only_the_drivers_runtime_container_as_a_file() -> None:
    secret = isolation.build_spark_auth_secret(JOB, "s3cr3t-value")
    assert secret["metadata"]["ownerReferences"] == [JOB.owner_reference]
    pod = isolation.with_spark_auth(builders.build_pod(JOB, K8S, 3), JOB)
    volumes = {v["name"]: v for v in pod["spec"]["volumes"]}
    assert volumes["spark-auth"]["secret"]["secretName"] == secret["metadata"]["name"] == "clicks-spark-auth"
    mounts = {c["name"]: {m["name"] for m in c["volumeMounts"]} for c in pod["spec"]["containers"]}
    assert "spark-auth" in mounts["runtime"] and "spark-auth" not in mounts["gc"]
    assert "s3cr3t-value" not in json.dumps(pod)
    assert "s3cr3t-value" not in json.dumps(builders.build_config_map(JOB, K8S))


def test_the_driver_authenticates_and_encrypts_and_its_executors_read_the_secret_from_the_file(tmp_path) -> None:
    env = ENV | {executors.SPARK_AUTH_SECRET_ENV: "clicks-spark-auth"}
    conf = executors.prepare_driver(K8S, "analytics", "clicks", tmp_path, env)
    assert conf["spark.authenticate"] == conf["spark.network.crypto.enabled"] == "true"
    assert conf["spark.io.encryption.enabled"] == "true"
    # the executor file set: Spark puts no SPARK_AUTH_SECRET value into the executor pods' spec
    assert conf["spark.authenticate.secret.executor.file"] == conf["spark.authenticate.secret.driver.file"] \
        == executors.SPARK_AUTH_FILE
    # and the generic one: the executor's pre-registration fetcher reads only that (Spark's
    # CoarseGrainedExecutorBackend builds a SecurityManager with the default file setting)
    assert conf["spark.authenticate.secret.file"] == executors.SPARK_AUTH_FILE
    template = json.loads((tmp_path / executors.TEMPLATE_FILE).read_text())
    volumes = {v["name"]: v for v in template["spec"]["volumes"]}
    assert volumes["spark-auth"]["secret"]["secretName"] == "clicks-spark-auth"
    (container,) = template["spec"]["containers"]
    assert {"name": "spark-auth", "mountPath": executors.SPARK_AUTH_DIR, "readOnly": True} in container["volumeMounts"]


def test_a_pod_from_an_older_operator_runs_without_authentication(tmp_path) -> None:
    conf = executors.prepare_driver(K8S, "analytics", "clicks", tmp_path, ENV)
    assert "spark.authenticate" not in conf  # it could not read a secret that was never mounted
    template = json.loads((tmp_path / executors.TEMPLATE_FILE).read_text())
    assert "spark-auth" not in {v["name"] for v in template["spec"]["volumes"]}


def test_the_policies_admit_only_the_jobs_own_pods() -> None:
    driver_policy, executor_policy = isolation.build_network_policies(JOB)
    for policy in (driver_policy, executor_policy):
        assert policy["metadata"]["ownerReferences"] == [JOB.owner_reference]
        assert policy["spec"]["policyTypes"] == ["Ingress"]
        peers = [peer for rule in policy["spec"]["ingress"] for peer in rule["from"]]
        assert peers and all(set(peer) == {"podSelector"} for peer in peers)  # no namespace or ipBlock peer
        assert all(peer["podSelector"]["matchLabels"]["sparkpoint.dev/job"] == "clicks" for peer in peers)
    assert driver_policy["spec"]["podSelector"]["matchLabels"]["app.kubernetes.io/component"] == "runtime"
    assert {p["port"] for p in driver_policy["spec"]["ingress"][0]["ports"]} == {executors.DRIVER_PORT,
                                                                               executors.BLOCK_MANAGER_PORT}
    # the executors' selector is the labels the runtime gives them
    labels = executors.executor_labels(executors.driver_from_env(ENV, "analytics", "clicks"))
    assert executor_policy["spec"]["podSelector"]["matchLabels"].items() <= labels.items()


class _Kube:
    def __init__(self):
        self.created: list[dict] = []

    async def apply_config_map(self, body, exists=False):
        pass

    async def create(self, body):
        self.created.append(body)
        return True


def test_an_attempt_creates_the_jobs_secret_and_policies_before_its_driver_and_none_for_local_jobs() -> None:
    for spec, expected in ((K8S, {"Secret:clicks-spark-auth", "NetworkPolicy:clicks-spark-driver",
                                  "NetworkPolicy:clicks-spark-executors"}), (LOCAL, set())):
        kube = _Kube()
        asyncio.run(Reconciler(kube=kube, client=None, metrics=None, post_event=None).actions.create_attempt(
            JOB, spec, 1, None, []))
        kinds = [f"{b['kind']}:{b['metadata']['name']}" for b in kube.created]
        assert kinds[-1] == "Pod:clicks-1"
        assert expected <= set(kinds) and not ({k for k in kinds if "spark-" in k} - expected)
        pod = kube.created[-1]
        assert ("spark-auth" in {v["name"] for v in pod["spec"]["volumes"]}) is (spec is K8S)
