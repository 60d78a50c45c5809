"""A job with no storage Secret: its pod runs as the ServiceAccount it names and signs store requests
with that account's cloud identity; the operator reads such a store only when its admin allows its
own identity to be used (--store-own-identity)."""

from __future__ import annotations

import pytest

from sparkpoint.operator.crd import streamingjob as crd
from sparkpoint.operator.kube import builders
from sparkpoint.operator.store.view import StorageRef, StoreAccessError, open_job_store
from sparkpoint.runtime.spec import job as config
from sparkpoint.runtime.store.credentials import RefreshingProvider

JOB = builders.JobRef(namespace="team-a", name="clicks", uid="0d9c0a52-1111-2222-3333-444455556666")
NO_SECRET = {"job": {"entrypoint": "examples.windowed_aggregation:build"}, "serviceAccountName": "clicks-store",
             "checkpoint": {"storage": {"url": "s3://ckpt/team-a"}}}
K8S = {"spark": {"master": "k8s", "executors": {"instances": 2}},
       "checkpoint": {"hotVolume": {"persistentVolumeClaim": {"claimName": "hot"}}}}


def test_the_pod_runs_as_the_named_account_with_no_static_keys_and_no_api_token() -> None:
    pod = builders.build_pod(JOB, config.parse_spec(NO_SECRET), attempt=1, service_account="operator-default")
    assert pod["spec"]["serviceAccountName"] == "clicks-store"  # wins over --job-service-account
    assert pod["spec"]["automountServiceAccountToken"] is False  # IRSA's token is its own volume
    for container in pod["spec"]["containers"]:
        names = {e["name"] for e in container["env"]}
        assert not names & {"AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY", "AWS_SESSION_TOKEN"}, container["name"]


def test_a_projected_token_in_the_pod_template_reaches_the_runtime() -> None:
    """What a cluster without an IRSA webhook does: the pod template mounts a projected token for the
    STS's audience and points AWS_WEB_IDENTITY_TOKEN_FILE at it."""
    template = {"spec": {
        "volumes": [{"name": "store-token", "projected": {"sources": [{"serviceAccountToken": {
            "audience": "sts.example", "expirationSeconds": 3600, "path": "token"}}]}}],
        "containers": [{"name": "runtime", "volumeMounts": [{"name": "store-token", "mountPath": "/var/run/store"}],
                        "env": [{"name": "AWS_WEB_IDENTITY_TOKEN_FILE", "value": "/var/run/store/token"},
                                {"name": "AWS_ROLE_ARN", "value": "arn:aws:iam::1:role/clicks"}]}]}}
    pod = builders.build_pod(JOB, config.parse_spec({**NO_SECRET, "podTemplate": template}), attempt=1)
    runtime = next(c for c in pod["spec"]["containers"] if c["name"] == "runtime")
    env = {e["name"]: e.get("value") for e in runtime["env"]}
    assert env["AWS_WEB_IDENTITY_TOKEN_FILE"] == "/var/run/store/token" and env["AWS_ROLE_ARN"]
    assert {"name": "store-token", "mountPath": "/var/run/store"} in runtime["volumeMounts"]
    assert any(v["name"] == "store-token" for v in pod["spec"]["volumes"])


def test_without_a_named_account_nothing_changes() -> None:
    spec = config.parse_spec({k: v for k, v in NO_SECRET.items() if k != "serviceAccountName"})
    assert builders.build_pod(JOB, spec, attempt=1, service_account="jobs")["spec"]["serviceAccountName"] == "jobs"
    assert builders.build_pod(JOB, spec, attempt=1)["spec"]["automountServiceAccountToken"] is False


def test_a_k8s_job_cannot_name_its_own_account_and_the_crd_says_so_too() -> None:
    with pytest.raises(config.SpecError, match="spec: serviceAccountName is for local"):
        config.parse_spec({**NO_SECRET, **K8S})
    rules = crd.spec_schema()["x-kubernetes-validations"]
    assert any(r["message"] == config.SERVICE_ACCOUNT_LOCAL_ONLY and r["fieldPath"] == ".serviceAccountName"
               for r in rules)
    with pytest.raises(config.SpecError, match="spec.serviceAccountName"):
        config.parse_spec({**NO_SECRET, "serviceAccountName": "Not_A_Name"})


STORAGE = StorageRef(url="s3://ckpt/team-a", endpoint="http://127.0.0.1:9")


def test_the_operator_uses_its_own_identity_only_when_allowed(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("AWS_WEB_IDENTITY_TOKEN_FILE", "/var/run/operator/token")
    monkeypatch.setenv("AWS_ACCESS_KEY_ID", "operator-admin-key")  # never lent to a job's store
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", "operator-admin-secret")
    with pytest.raises(StoreAccessError, match="the cloud's own identity is not used here"):
        open_job_store(STORAGE, None)
    store = open_job_store(STORAGE, None, own_identity=True)
    assert isinstance(store.credentials, RefreshingProvider)  # type: ignore[attr-defined]
    assert store.credentials.source == "web-identity"  # type: ignore[attr-defined]
    # A named Secret's keys are used even when the own identity is allowed.
    keyed = open_job_store(STORAGE, {"AWS_ACCESS_KEY_ID": "k", "AWS_SECRET_ACCESS_KEY": "s"}, own_identity=True)
    assert keyed.credentials.retrieve().access_key == "k"  # type: ignore[attr-defined]


def test_naming_an_account_is_an_upgrade_and_not_naming_one_keeps_every_key() -> None:
    from sparkpoint.operator.decisions.spec_key import spec_key

    without = config.parse_spec({k: v for k, v in NO_SECRET.items() if k != "serviceAccountName"})
    assert spec_key(config.parse_spec(NO_SECRET)) != spec_key(without)
    assert "serviceAccountName" not in without.model_dump(by_alias=True, exclude_defaults=True)


def test_the_sts_duration_reaches_both_containers_and_is_bounded_at_admission() -> None:
    spec = config.parse_spec({**NO_SECRET, "checkpoint": {"storage": {"url": "s3://ckpt/a", "stsDuration": "15m"}}})
    for container in builders.build_pod(JOB, spec, attempt=1)["spec"]["containers"]:
        assert {"name": "SPARKPOINT_STS_DURATION_SECONDS", "value": "900"} in container["env"], container["name"]
    with pytest.raises(config.SpecError, match="spec.checkpoint.storage.stsDuration: must be from 15m to 12h"):
        config.parse_spec({**NO_SECRET, "checkpoint": {"storage": {"url": "s3://ckpt/a", "stsDuration": "5m"}}})
    storage = crd.spec_schema()["properties"]["checkpoint"]["properties"]["storage"]["properties"]["stsDuration"]
    assert storage["x-kubernetes-validations"][0]["message"] == "must be from 15m to 12h"
