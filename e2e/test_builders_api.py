"""The operator's pure builders produce objects a real API server accepts as they are (dry run),
owned by a real StreamingJob, with credentials only by Secret reference."""

from __future__ import annotations

import json

from kube_helpers import GROUP, PLURAL, VERSION
from kubernetes import client

from sparkpoint.operator.kube import builders
from sparkpoint.runtime.spec import job as config

SPEC = {
    "job": {"entrypoint": "examples.windowed_aggregation:build"},
    "checkpoint": {"storage": {"url": "s3://ckpt/e2e", "endpoint": "http://127.0.0.1:9000",
                               "secretRef": {"name": "store-creds"}}},
}


def test_children_are_accepted_by_the_api_server(api_client, namespace, streamingjob_crd) -> None:
    job = client.CustomObjectsApi(api_client).create_namespaced_custom_object(GROUP, VERSION, namespace, PLURAL, {
        "apiVersion": f"{GROUP}/{VERSION}", "kind": "StreamingJob", "metadata": {"name": "clicks"}, "spec": SPEC})
    # What the API server stored (defaults applied) is what the operator will parse.
    spec = config.parse_spec(job["spec"])
    ref = builders.JobRef(namespace=namespace, name="clicks", uid=job["metadata"]["uid"])
    core = client.CoreV1Api(api_client)
    cm = core.create_namespaced_config_map(namespace, builders.build_config_map(ref, spec, None), dry_run="All")
    assert config.parse_spec(json.loads(cm.data["job.json"])) == spec
    pod = core.create_namespaced_pod(namespace, builders.build_pod(ref, spec, attempt=1), dry_run="All")
    assert [c.name for c in pod.spec.containers] == ["runtime", "gc"]
    assert pod.metadata.owner_references[0].uid == ref.uid
    env = {e.name: e for e in pod.spec.containers[0].env}
    assert env["AWS_SECRET_ACCESS_KEY"].value is None
    assert env["AWS_SECRET_ACCESS_KEY"].value_from.secret_key_ref.name == "store-creds"
    svc = core.create_namespaced_service(namespace, builders.build_service(ref), dry_run="All")
    assert {p.name: p.port for p in svc.spec.ports} == {"control": builders.CONTROL_PORT, "metrics": builders.METRICS_PORT,
                                                        "gc-metrics": builders.GC_METRICS_PORT, "spark-ui": 4040}
