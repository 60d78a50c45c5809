"""The standby pod (builders.build_standby_pod): the attempt's pod with its own name and work dir, the
standby's env, the spec key and restore point it was started for, and a preferred anti-affinity to the
job's other runtime pods; the job file never carries spec.standby (an older runtime would refuse it)."""

from __future__ import annotations

import json

from sparkpoint.operator.decisions.observe import pod_observation
from sparkpoint.operator.decisions.pod_view import owned_pods
from sparkpoint.operator.kube import builders, hot_confine
from sparkpoint.runtime.spec import parse_spec

JOB = builders.JobRef(namespace="analytics", name="clicks", uid="0d9c0a52-1111-2222-3333-444455556666")
SPEC = parse_spec({"image": "sparkpoint:dev", "job": {"entrypoint": "m:f"}, "standby": {"enabled": True},
                   "checkpoint": {"storage": {"url": "s3://ckpt/prod", "secretRef": {"name": "minio-creds"}}}})
SHARED = parse_spec({"image": "sparkpoint:dev", "job": {"entrypoint": "m:f"}, "standby": {"enabled": True},
                     "spark": {"master": "k8s", "executors": {"instances": 1}},
                     "checkpoint": {"hotVolume": {"persistentVolumeClaim": {"claimName": "hot"}}}})


def runtime(pod: dict) -> dict:
    return next(c for c in pod["spec"]["containers"] if c["name"] == "runtime")


def env(pod: dict) -> dict:
    return {e["name"]: e.get("value") for e in runtime(pod)["env"]}


def test_the_standby_is_the_next_attempts_pod_under_its_own_name():
    attempt = builders.build_pod(JOB, SPEC, 3)
    pod = builders.build_standby_pod(JOB, SPEC, 3, "abcd", "checkpoint:chk-000007")
    assert pod["metadata"]["name"] == "clicks-3-standby" == builders.standby_pod_name(JOB, 3)
    assert pod["metadata"]["labels"] == attempt["metadata"]["labels"]  # the Service, NetworkPolicies, the index
    assert pod["metadata"]["ownerReferences"] == attempt["metadata"]["ownerReferences"]
    assert pod["metadata"]["annotations"] == {"sparkpoint.dev/attempt": "3", "sparkpoint.dev/standby-spec": "abcd",
                                              "sparkpoint.dev/standby-point": "checkpoint:chk-000007"}
    assert env(pod)["SPARKPOINT_STANDBY"] == "true" and env(pod)["SPARKPOINT_ATTEMPT"] == "3"
    assert "SPARKPOINT_STANDBY" not in env(attempt)
    assert "SPARKPOINT_STANDBY_WARMUP" not in env(pod)  # spec.standby.warmup is off by default
    warm = SPEC.model_copy(update={"standby": SPEC.standby.model_copy(update={"warmup": True})})
    assert env(builders.build_standby_pod(JOB, warm, 3, "abcd", None))["SPARKPOINT_STANDBY_WARMUP"] == "true"
    assert "SPARKPOINT_STANDBY_WARMUP" not in env(builders.build_pod(JOB, warm, 3))  # the attempt's own pod
    assert pod["spec"]["volumes"] == attempt["spec"]["volumes"]  # the job's ConfigMap and control token
    # readiness (/readyz is 503 until the promotion) keeps it out of the job Service's endpoints
    assert runtime(pod)["readinessProbe"] == runtime(attempt)["readinessProbe"]
    [term] = pod["spec"]["affinity"]["podAntiAffinity"]["preferredDuringSchedulingIgnoredDuringExecution"]
    assert term["podAffinityTerm"]["topologyKey"] == "kubernetes.io/hostname"
    assert term["podAffinityTerm"]["labelSelector"]["matchLabels"] == {
        "sparkpoint.dev/job": "clicks", "app.kubernetes.io/component": "runtime"}


def test_the_operator_reads_a_standby_back_as_one_of_the_jobs_pods():
    body = builders.build_standby_pod(JOB, SPEC, 3, "abcd", None)
    body["metadata"]["ownerReferences"][0]["uid"] = JOB.uid
    obs = pod_observation(body)
    assert (obs.name, obs.attempt, obs.standby, obs.standby_spec, obs.standby_point) == \
        ("clicks-3-standby", 3, True, "abcd", None)
    assert owned_pods([obs], "clicks", JOB.uid) == [obs]
    forged = pod_observation(builders.build_pod(JOB, SPEC, 3) | {"metadata": dict(
        builders.build_pod(JOB, SPEC, 3)["metadata"], name="clicks-3-standby")})
    assert owned_pods([forged], "clicks", JOB.uid) == []  # the name without the standby's annotations


def test_on_a_shared_hot_volume_the_standby_has_its_own_directory():
    pod = hot_confine.confine_hot_mounts(builders.build_standby_pod(JOB, SHARED, 4, "abcd", None), JOB)
    cmd = runtime(pod)["command"]
    work = cmd[cmd.index("--work-dir") + 1]
    assert work.endswith(f"/analytics/clicks/{JOB.uid}/attempt-4-standby")
    assert builders.work_dir(JOB, SHARED, 4) != work  # a cold pod of attempt 4 never shares it


def test_the_job_file_never_carries_spec_standby():
    doc = json.loads(builders.build_config_map(JOB, SPEC)["data"]["job.json"])
    assert "standby" not in doc and parse_spec(doc).standby is None
