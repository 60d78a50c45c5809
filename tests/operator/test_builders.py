"""Pure builders of the child objects: shapes the runtime and Kubernetes rely on."""

from __future__ import annotations

import json

from sparkpoint.operator.kube import builders
from sparkpoint.runtime.spec import job as config

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
    assert "--external-triggers" in runtime["command"]  # the operator schedules; the runtime's timer is a fallback
    assert gc["command"][:2] == ["sparkpoint", "gc"] and "--retain" in gc["command"]
    assert gc["command"][gc["command"].index("--retain") + 1] == "4"
    for container in (runtime, gc):
        env = _env(container)
        assert env["POD_IP"]["valueFrom"]["fieldRef"]["fieldPath"] == "status.podIP"
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


def test_service_is_headless() -> None:
    # No ClusterIP to allocate (serialized in the API server: the slowest call of a 1,000-job ramp);
    # nothing reaches a runtime through one (the operator uses the pod IP).
    svc = builders.build_service(JOB)
    assert svc["spec"]["clusterIP"] == "None" and svc["spec"]["selector"]


def _endpoint_sources(spec: config.JobSpec) -> list[dict]:
    """How each container gets SPARKPOINT_S3_ENDPOINT, in the order Kubernetes applies them."""
    pod = builders.build_pod(JOB, spec, attempt=1)
    sources = [[e for e in c["env"] if e["name"] == "SPARKPOINT_S3_ENDPOINT"] for c in pod["spec"]["containers"]]
    assert len(sources) == 2 and sources[0] == sources[1]  # runtime and GC sidecar reach the same store
    return sources[0]


def _with_storage(**storage) -> config.JobSpec:
    return SPEC.model_copy(update={"checkpoint": SPEC.checkpoint.model_copy(update={
        "storage": config.StorageSpec(url="s3://ckpt/prod", **storage)})})


SECRET_ENDPOINT = {"name": "SPARKPOINT_S3_ENDPOINT", "valueFrom": {"secretKeyRef": {
    "name": "minio-creds", "key": "SPARKPOINT_S3_ENDPOINT", "optional": True}}}


def test_the_storage_secret_may_carry_the_endpoint_unless_the_spec_names_one() -> None:
    # Only the Secret: the endpoint comes from it when it has the key (a manifest for any cluster).
    secret_ref = config.SecretRef(name="minio-creds")
    assert _endpoint_sources(_with_storage(secret_ref=secret_ref)) == [SECRET_ENDPOINT]
    # Both: what the manifest says, once (a name defined twice draws API warnings and apply may drop one).
    spec_value = {"name": "SPARKPOINT_S3_ENDPOINT", "value": "http://minio:9000"}
    assert _endpoint_sources(_with_storage(endpoint="http://minio:9000", secret_ref=secret_ref)) == [spec_value]
    # Only the spec: a plain value; no storage at all: nothing.
    assert _endpoint_sources(_with_storage(endpoint="http://minio:9000")) == [spec_value]
    no_store = SPEC.model_copy(update={"checkpoint": config.CheckpointSection()})
    assert _endpoint_sources(no_store) == []


def test_gc_secret_gives_the_gc_container_its_own_credential_and_the_runtime_keeps_the_storage_one() -> None:
    spec = SPEC.model_copy(update={"gc": config.GcSection(secret_ref=config.SecretRef(name="minio-gc"))})
    runtime, gc = builders.build_pod(JOB, spec, attempt=1)["spec"]["containers"]
    for container, secret in ((runtime, "minio-creds"), (gc, "minio-gc")):
        env = _env(container)
        for key in builders.CREDENTIAL_KEYS:
            assert env[key] == {"name": key, "valueFrom": {"secretKeyRef": {"name": secret, "key": key}}}
        assert env["SPARKPOINT_S3_ENDPOINT"] == {"name": "SPARKPOINT_S3_ENDPOINT", "value": "http://minio:9000"}
    # Without the spec's endpoint, each container may take it from its own Secret.
    no_endpoint = spec.model_copy(update={"checkpoint": SPEC.checkpoint.model_copy(update={
        "storage": config.StorageSpec(url="s3://ckpt/prod", secret_ref=config.SecretRef(name="minio-creds"))})})
    runtime, gc = builders.build_pod(JOB, no_endpoint, attempt=1)["spec"]["containers"]
    assert _env(runtime)["SPARKPOINT_S3_ENDPOINT"]["valueFrom"]["secretKeyRef"]["name"] == "minio-creds"
    assert _env(gc)["SPARKPOINT_S3_ENDPOINT"]["valueFrom"]["secretKeyRef"]["name"] == "minio-gc"


def test_the_gc_sidecar_reads_the_operators_pins_from_the_job_config_map():
    job = builders.JobRef("team", "clicks", "uid-1")
    spec = config.parse_spec({"job": {"entrypoint": "m:f"}})
    cm = builders.build_config_map(job, spec, None, ["chk-000009", "chk-000004"])
    assert json.loads(cm["data"][builders.PINS_FILE]) == ["chk-000004", "chk-000009"]
    gc = next(c for c in builders.build_pod(job, spec, 1)["spec"]["containers"] if c["name"] == "gc")
    assert gc["command"][gc["command"].index("--pins-file") + 1] == f"{builders.CONFIG_DIR}/{builders.PINS_FILE}"
    assert {"name": "job", "mountPath": builders.CONFIG_DIR, "readOnly": True} in gc["volumeMounts"]


def test_the_gc_sidecar_gets_the_delta_retention_only_for_a_delta_sink() -> None:
    job = builders.JobRef("team", "clicks", "uid-1")
    delta = config.parse_spec({"job": {"entrypoint": "m:f", "sink": {"kind": "delta"}}, "gc": {"deltaRetention": "24h"}})
    command = builders.build_pod(job, delta, attempt=1)["spec"]["containers"][1]["command"]
    assert command[command.index("--delta-retention") + 1] == "24h"
    default = config.parse_spec({"job": {"entrypoint": "m:f", "sink": {"kind": "delta"}}})
    command = builders.build_pod(job, default, attempt=1)["spec"]["containers"][1]["command"]
    assert command[command.index("--delta-retention") + 1] == "168h"  # Delta's own default, a week
    # Any other sink: not passed, so a job image whose gc predates the flag keeps running.
    plain = config.parse_spec({"job": {"entrypoint": "m:f"}})
    assert "--delta-retention" not in builders.build_pod(job, plain, attempt=1)["spec"]["containers"][1]["command"]


def test_the_gc_sidecar_of_a_delta_sink_gets_room_for_its_table() -> None:
    """A delta sink's compacted path still makes every pass a full one (docs/design.md §7)."""
    delta = SPEC.model_copy(update={"job": SPEC.job.model_copy(update={
        "sink": config.SinkSpec(kind="delta")})})

    def gc_limit(spec: config.JobSpec) -> str:
        pod = builders.build_pod(JOB, spec, attempt=1)
        [gc] = [c for c in pod["spec"]["containers"] if c["name"] == "gc"]
        return gc["resources"]["limits"]["memory"]
    assert gc_limit(SPEC) == builders.GC_MEMORY_LIMIT == "512Mi"
    assert gc_limit(delta) == builders.GC_MEMORY_LIMIT_DELTA == "768Mi"
    # spec.gc.memory: the first pass over an old store (docs/design.md §7) gets room when asked for
    for spec in (SPEC, delta):
        raised = spec.model_copy(update={"gc": spec.gc.model_copy(update={"memory": "1Gi"})})
        assert gc_limit(raised) == "1Gi"


def test_gc_memory_below_the_sidecars_request_is_refused_naming_the_field() -> None:
    import pytest

    body = {"image": "sparkpoint:dev", "job": {"entrypoint": "examples.windowed_aggregation:build"}}
    assert config.parse_spec({**body, "gc": {"memory": "2Gi"}}).gc.memory == "2Gi"
    for bad in ("64Mi", "lots", "1.5"):
        with pytest.raises(config.SpecError, match=r"gc\.memory"):
            config.parse_spec({**body, "gc": {"memory": bad}})
