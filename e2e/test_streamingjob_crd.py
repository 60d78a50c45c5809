"""The StreamingJob CRD from crds/ on a real API server: valid manifests are accepted with the
schema's defaults, invalid ones are rejected with messages that name the field (issue #4)."""

from __future__ import annotations

import copy
import uuid

import pytest
from kube_helpers import GROUP, PLURAL, VERSION
from kubernetes import client
from kubernetes.client.rest import ApiException

MINIMAL_SPEC = {"job": {"entrypoint": "examples.sessionization:build"}}


def create_job(api_client, namespace: str, spec: dict) -> dict:
    return client.CustomObjectsApi(api_client).create_namespaced_custom_object(GROUP, VERSION, namespace, PLURAL, {
        "apiVersion": f"{GROUP}/{VERSION}", "kind": "StreamingJob",
        "metadata": {"name": f"job-{uuid.uuid4().hex[:8]}"}, "spec": spec})


def with_fields(**sections) -> dict:
    spec = copy.deepcopy(MINIMAL_SPEC)
    for section, fields in sections.items():
        if isinstance(fields, dict):
            spec.setdefault(section, {}).update(fields)
        else:
            spec[section] = fields
    return spec


def test_minimal_job_is_accepted_with_defaults(api_client, namespace, streamingjob_crd):
    # Sections left out get `default: {}` and then their own defaults, as the runtime's model does.
    created = create_job(api_client, namespace, copy.deepcopy(MINIMAL_SPEC))
    spec = created["spec"]
    assert spec["upgradeMode"] == "savepoint" and spec["state"] == "running"
    assert spec["checkpoint"]["interval"] == "30s" and spec["checkpoint"]["retain"] == 3
    assert spec["job"]["sink"]["kind"] == "transactional"
    assert spec["gc"]["onDelete"] == "retain" and spec["restart"]["policy"] == "OnFailure"


@pytest.mark.parametrize(("spec", "field", "words"), [
    ({"spark": {}}, "spec.job", "required"),
    (with_fields(job={"entrypoint": "not a module path"}), "spec.job.entrypoint", "should match"),
    (with_fields(checkpoint={"interval": "ten seconds"}), "spec.checkpoint.interval", "should match"),
    (with_fields(checkpoint={"retain": 0}), "spec.checkpoint.retain", "greater than or equal to 1"),
    (with_fields(checkpoint={"storage": {"url": "http://not-s3"}}), "spec.checkpoint.storage.url", "should match"),
    (with_fields(upgradeMode="blue-green"), "spec.upgradeMode", "supported values"),
    (with_fields(restart={"policy": "Sometimes"}), "spec.restart.policy", "supported values"),
    (with_fields(spark={"shufflePartitions": "many"}), "spec.spark.shufflePartitions", "integer"),
    (with_fields(job={"entrypoint": "m:f", "sink": {"kind": "upsert"}}), "spec.job.sink",
     "keycolumns must name at least one column"),
    (with_fields(restoreFrom={"checkpoint": "chk-000001", "savepoint": "sp"}), "spec.restoreFrom",
     "at most one of checkpoint and savepoint"),
    (with_fields(checkpoint={"timeout": "2h"}), "spec.gc.pendingTimeout",
     "pendingtimeout must be longer than checkpoint.timeout"),
])
def test_invalid_job_is_rejected_naming_the_field(api_client, namespace, streamingjob_crd, spec, field, words):
    with pytest.raises(ApiException) as rejected:
        create_job(api_client, namespace, spec)
    assert rejected.value.status == 422
    body = rejected.value.body
    assert field in body and words in body.lower(), body
