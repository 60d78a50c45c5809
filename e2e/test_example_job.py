"""examples/streamingjob.yaml on a cluster prepared by `make cluster-up` (or e2e/kind/run.sh),
applied unchanged: the API server accepts it, and what it names exists (issue 7's contract). The
run itself needs the operator; its e2e test starts from here."""

from __future__ import annotations

import uuid
from pathlib import Path

import pytest
import yaml
from kube_helpers import GROUP, PLURAL, VERSION, pod_logs, python_container, wait_for
from kubernetes import client

from sparkpoint.operator.kube import builders
from sparkpoint.runtime.spec import parse_document

EXAMPLE = Path(__file__).resolve().parents[1] / "examples" / "streamingjob.yaml"


@pytest.fixture(scope="module")
def example() -> dict:
    return yaml.safe_load(EXAMPLE.read_text())


def test_the_api_server_accepts_the_example_unchanged(api_client, streamingjob_crd, example):
    namespace = example["metadata"]["namespace"]
    created = client.CustomObjectsApi(api_client).create_namespaced_custom_object(
        GROUP, VERSION, namespace, PLURAL, example, dry_run="All")
    assert created["metadata"]["name"] == example["metadata"]["name"]
    assert created["spec"]["checkpoint"]["interval"] == "10s"
    assert created["spec"]["job"]["sink"]["kind"] == "transactional"
    # What the operator will parse back is what the file says.
    assert parse_document(created) == parse_document(example)


def test_cluster_up_provided_the_secret_and_the_bucket_the_example_names(core, example):
    ident, spec = parse_document(example)
    storage = spec.checkpoint.storage
    assert storage is not None and storage.url.startswith("s3://") and storage.secret_ref is not None
    secret = core.read_namespaced_secret(storage.secret_ref.name, ident.namespace)
    assert set(secret.data) >= {*builders.CREDENTIAL_KEYS, builders.ENDPOINT_KEY}
    # A pod with the store environment a job pod gets (from the Secret, by reference) reaches the
    # bucket: store.check() lists the job's prefix, which fails when the bucket is missing.
    job = builders.JobRef(namespace=ident.namespace, name=ident.name, uid="e2e")
    env = [e for e in builders.runtime_container(job, spec)["env"] if e["name"] != "POD_IP"]
    script = ("from sparkpoint.runtime.store import open_store\n"
              f"open_store({storage.url!r}).check()\nprint('store reachable')\n")
    name = f"example-store-check-{uuid.uuid4().hex[:6]}"
    container = python_container(script, env=env)
    core.create_namespaced_pod(ident.namespace, client.V1Pod(
        metadata=client.V1ObjectMeta(name=name), spec=client.V1PodSpec(restart_policy="Never", containers=[container])))
    try:
        pod = wait_for(f"pod {name} to finish", lambda: (
            lambda p: p if p.status.phase in ("Succeeded", "Failed") else None)(
            core.read_namespaced_pod(name, ident.namespace)), timeout=120)
        logs = pod_logs(core, ident.namespace, name)
        assert pod.status.phase == "Succeeded" and "store reachable" in logs, logs
    finally:
        core.delete_namespaced_pod(name, ident.namespace, grace_period_seconds=0)
