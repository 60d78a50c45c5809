"""Pure builders of the child objects: shapes the runtime and Kubernetes rely on."""

from __future__ import annotations

import json

from sparkpoint.operator import builders
from sparkpoint.runtime import config

JOB = builders.JobRef(namespace="analytics", name="clicks", uid="0d9c0a52-1111-2222-3333-444455556666")
SPEC = config.parse_spec({
    "image": "sparkpoint:dev",
    "job": {"entrypoint": "examples.windowed_aggregation:build"},
    "checkpoint": {"interval": "10s", "retain": 4,
                   "storage": {"url": "s3://ckpt/prod", "endpoint": "http://minio:9000",
                               "secretRef": {"name": "minio-creds"}}},
    "restoreFrom": {"savepoint": "v1"},
})


def _env(container: dict) -> dict:
    return {e["name"]: e for e in container["env"]}


def test_config_map_holds_a_spec_the_runtime_parses_back() -> None:
    # The first attempt restores from what the spec asks for ...
    doc = json.loads(builders.build_config_map(JOB, SPEC, SPEC.restore_from)["data"]["job.json"])
    assert config.parse_spec(doc) == SPEC
    # ... later attempts from the point the operator chose; None means the runtime's default (latest).
    doc = json.loads(builders.build_config_map(JOB, SPEC, None)["data"]["job.json"])
    assert "restoreFrom" not in doc
    override = config.RestoreFrom(checkpoint="chk-000007")
    doc = json.loads(builders.build_config_map(JOB, SPEC, override)["data"]["job.json"])
    assert config.parse_spec(doc).restore_from == override
    assert "restoreFrom" not in json.loads(builders.build_config_map(JOB, SPEC, config.RestoreFrom())["data"]["job.json"])


def test_every_child_is_owned_by_the_job_and_labelled() -> None:
    children = [builders.build_config_map(JOB, SPEC), builders.build_pod(JOB, SPEC, attempt=3),
                builders.build_service(JOB)]
    for obj in children:
        meta = obj["metadata"]
        assert meta["namespace"] == "analytics"
        (owner,) = meta["ownerReferences"]
        assert owner["uid"] == JOB.uid and owner["controller"] is True and owner["kind"] == "StreamingJob"
        assert meta["labels"]["sparkpoint.dev/job"] == "clicks"


def test_pod_runs_runtime_and_gc_with_credentials_only_by_reference() -> None:
    pod = builders.build_pod(JOB, SPEC, attempt=3)
    assert pod["metadata"]["name"] == "clicks-3"
    runtime, gc = pod["spec"]["containers"]
    assert runtime["command"][:3] == ["sparkpoint", "run", builders.JOB_FILE]
    assert gc["command"][:2] == ["sparkpoint", "gc"] and "--retain" in gc["command"]
    assert gc["command"][gc["command"].index("--retain") + 1] == "4"
    for container in (runtime, gc):
        env = _env(container)
        assert env["POD_IP"]["valueFrom"]["fieldRef"]["fieldPath"] == "status.podIP"
        assert env["SPARKPOINT_S3_ENDPOINT"]["value"] == "http://minio:9000"
        for key in builders.CREDENTIAL_KEYS:
            assert env[key] == {"name": key, "valueFrom": {"secretKeyRef": {"name": "minio-creds", "key": key}}}
    assert pod["spec"]["restartPolicy"] == "OnFailure"
    assert {"name": "hot", "emptyDir": {}} in pod["spec"]["volumes"]


def test_gc_sidecar_is_left_out_when_disabled_and_never_policy_is_kept() -> None:
    spec = SPEC.model_copy(update={"gc": config.GcSection(enabled=False),
                                   "restart": config.RestartSection(policy="Never")})
    pod = builders.build_pod(JOB, spec, attempt=1)
    assert [c["name"] for c in pod["spec"]["containers"]] == ["runtime"]
    assert pod["spec"]["restartPolicy"] == "Never"


def test_service_selects_the_runtime_pods() -> None:
    svc = builders.build_service(JOB)
    pod = builders.build_pod(JOB, SPEC, attempt=1)
    assert all(pod["metadata"]["labels"][k] == v for k, v in svc["spec"]["selector"].items())


def test_endpoint_comes_from_the_secret_when_the_spec_has_none() -> None:
    storage = SPEC.checkpoint.storage.model_copy(update={"endpoint": None})
    spec = SPEC.model_copy(update={"checkpoint": SPEC.checkpoint.model_copy(update={"storage": storage})})
    for container in builders.build_pod(JOB, spec, attempt=1)["spec"]["containers"]:
        ref = _env(container)["SPARKPOINT_S3_ENDPOINT"]["valueFrom"]["secretKeyRef"]
        assert ref == {"name": "minio-creds", "key": "SPARKPOINT_S3_ENDPOINT", "optional": True}
