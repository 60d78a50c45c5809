"""The StreamingJob CRD from crds/ on a real API server: valid manifests are accepted with the
schema's defaults, invalid ones are rejected with messages that name the field (issue #4)."""

from __future__ import annotations

import copy
import uuid

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from kube_helpers import GROUP, PLURAL, VERSION
from kubernetes import client
from kubernetes.client.rest import ApiException

from sparkpoint.runtime.spec import job as config

MINIMAL_SPEC = {"job": {"entrypoint": "examples.sessionization:build"}}


def create_job(api_client, namespace: str, spec: dict, name: str | None = None, dry_run: bool = False) -> dict:
    return client.CustomObjectsApi(api_client).create_namespaced_custom_object(GROUP, VERSION, namespace, PLURAL, {
        "apiVersion": f"{GROUP}/{VERSION}", "kind": "StreamingJob",
        "metadata": {"name": name or f"job-{uuid.uuid4().hex[:8]}"}, "spec": spec},
        **({"dry_run": "All"} if dry_run else {}))


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


def test_dynamic_allocation_is_accepted_with_its_defaults_and_no_instances(api_client, namespace, streamingjob_crd):
    spec = with_fields(spark={"master": "k8s", "executors": {"dynamic": {"max": 4}}},
                       checkpoint={"hotVolume": {"hostPath": {"path": "/h"}}})
    executors = create_job(api_client, namespace, spec)["spec"]["spark"]["executors"]
    assert executors == {"dynamic": {"min": 1, "max": 4, "idleTimeout": "60s"}, "cores": 1, "memory": "1Gi"}
    assert config.parse_spec(create_job(api_client, namespace, spec, dry_run=True)["spec"]).spark.executors.dynamic


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
     "at most one of checkpoint, savepoint and fresh"),
    (with_fields(checkpoint={"timeout": "2h"}), "spec.gc.pendingTimeout",
     "pendingtimeout must be longer than checkpoint.timeout"),
    # Issue 8, item 9: manifests a new user could apply that nothing can run.
    (with_fields(checkpoint={"interval": "0s"}), "spec.checkpoint.interval", "must be at least 1s"),
    (with_fields(checkpoint={"timeout": "0s"}), "spec.checkpoint.timeout", "must be at least 1s"),
    (with_fields(spark={"resources": {"memory": "lots", "cpu": "1"}}), "spec.spark.resources.memory", "should match"),
    (with_fields(spark={"resources": {"memory": "2Gi", "cpu": "many"}}), "spec.spark.resources.cpu", "should match"),
    (with_fields(spark={"resources": {"memory": "100Mi"}}), "spec.spark.resources.memory", "must be at least 1gi"),
    (with_fields(image="Not A Valid Image!!"), "spec.image", "should match"),
    (with_fields(spark={"master": "yarn"}), "spec.spark.master", "should match"),
    (with_fields(spark={"master": "local[0]"}), "spec.spark.master", "should match"),
    (with_fields(job={"entrypoint": "m:f", "triggerInterval": "0ms"}), "spec.job.triggerInterval",
     "must be at least 100ms"),
    (with_fields(restart={"backoff": "10m", "maxBackoff": "5m"}), "spec.restart.backoff",
     "backoff must not be longer than maxbackoff"),
    (with_fields(restart={"backoff": "0s"}), "spec.restart.backoff", "must be at least 1s"),
    (with_fields(gc={"interval": "0s"}), "spec.gc.interval", "must be at least 1s"),
    (with_fields(checkpoint={"interval": "9999999h"}), "spec.checkpoint.interval", "should match"),
    (with_fields(restart={"backoff": "5 s"}), "spec.restart.backoff", "should match"),
    (with_fields(job={"entrypoint": "m:f", "sink": {"path": "out/../other-job"}}), "spec.job.sink.path",
     "should match"),
    (with_fields(job={"entrypoint": "m:f", "sink": {"kind": "upsert", "keyColumns": [""]}}),
     "spec.job.sink.keyColumns[0]", "at least 1 chars long"),
    (with_fields(gc={"pendingTimeout": "1 h"}), "spec.gc.pendingTimeout", "should match"),
    (with_fields(spark={"resources": {"memory": "-1Gi"}}), "spec.spark.resources.memory", "should match"),
    (with_fields(checkpoint={"storage": {"url": "s3://bkt/p", "endpoint": "minio:9000"}}),
     "spec.checkpoint.storage.endpoint", "should match"),
    (with_fields(spark={"conf": {"spark.sql.streaming.checkpointLocation": "/tmp/x"}}), "spec.spark.conf",
     "spark.sql.streaming.checkpointlocation is set by sparkpoint"),
    (with_fields(spark={"conf": {"spark.master": "yarn"}}), "spec.spark.conf", "spark.master is set by sparkpoint"),
    # Issue 26: a fixed executor count or dynamic allocation, not both.
    (with_fields(spark={"master": "k8s", "executors": {"instances": 2, "dynamic": {"max": 4}}},
                 checkpoint={"hotVolume": {"hostPath": {"path": "/h"}}}), "spec.spark.executors.dynamic",
     "instances and dynamic are mutually exclusive"),
    (with_fields(spark={"master": "k8s", "executors": {"dynamic": {"min": 3, "max": 2}}},
                 checkpoint={"hotVolume": {"hostPath": {"path": "/h"}}}), "spec.spark.executors.dynamic.min",
     "min must not be greater than max"),
    (with_fields(spark={"master": "k8s", "executors": {"dynamic": {"min": 1}}},
                 checkpoint={"hotVolume": {"hostPath": {"path": "/h"}}}), "spec.spark.executors.dynamic.max",
     "required"),
])
def test_invalid_job_is_rejected_naming_the_field(api_client, namespace, streamingjob_crd, spec, field, words):
    with pytest.raises(ApiException) as rejected:
        create_job(api_client, namespace, spec)
    assert rejected.value.status == 422
    body = rejected.value.body
    assert field in body and words in body.lower(), body
    # A rule that parses a value (duration, quantity) stays quiet when the pattern already refused it.
    assert "evaluating rule" not in body, body


@pytest.mark.parametrize(("name", "words"), [
    ("a" * 76, "at most 52 characters"),  # its Service (<name>, at most 63) and pods could not exist
    ("a" * 53, "at most 52 characters"),
    ("1-job", "start with a letter"),  # a Service name is a DNS-1035 label
    ("my.job", "start with a letter"),
])
def test_names_the_jobs_service_and_pods_cannot_carry_are_rejected(api_client, namespace, streamingjob_crd,
                                                                    name, words):
    with pytest.raises(ApiException) as rejected:
        create_job(api_client, namespace, copy.deepcopy(MINIMAL_SPEC), name=name, dry_run=True)
    assert rejected.value.status == 422
    body = rejected.value.body
    assert "metadata.name" in body and words in body, body
    create_job(api_client, namespace, copy.deepcopy(MINIMAL_SPEC), name="a" * 52, dry_run=True)


# The model and the real API server (patterns and CEL rules) accept the same manifests, and name
# the same field when they refuse one. Values around every limit of issue 8, item 9.
LEAVES = {
    ("checkpoint", "interval"): ["0s", "999ms", "1s", "1000ms", "10s", "999999h", "1000000h"],
    ("checkpoint", "timeout"): ["0s", "1s", "59m", "1h", "2h"],
    ("job", "triggerInterval"): ["0ms", "99ms", "100ms", "1s"],
    ("restart", "backoff"): ["0s", "1s", "5m", "6m", "1h"],
    ("restart", "maxBackoff"): ["0s", "1s", "5m", "10m"],
    ("gc", "interval"): ["0s", "1s", "60s"],
    ("spark", "master"): ["yarn", "local", "local[*]", "local[3]", "local[0]", "k8s", "spark://h:7077"],
    ("spark", "conf"): [{}, {"spark.master": "x"}, {"spark.sql.shuffle.partitions": "8"},
                        {"spark.sql.session.timeZone": "UTC"}],
    ("spark", "resources", "cpu"): ["many", "1", "0.5", "500m", "-1", "1.2345"],
    ("spark", "resources", "memory"): ["lots", "512Mi", "1Gi", "1023Mi", "4G", "1073741824", "1073741823", "1e9", "1.1e9"],
    ("image",): ["Not A Valid Image!!", "sparkpoint:dev", "ghcr.io/o/i:1.2", "localhost:5000/a/b", "a:b:c", "i@sha256:x"],
}


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(st.lists(st.sampled_from(sorted(LEAVES)).flatmap(
    lambda path: st.tuples(st.just(path), st.sampled_from(LEAVES[path]))), min_size=1, max_size=3))
def test_model_and_api_server_agree(api_client, namespace, streamingjob_crd, choices):
    spec = copy.deepcopy(MINIMAL_SPEC)
    for path, value in choices:
        node = spec
        for key in path[:-1]:
            node = node.setdefault(key, {})
        node[path[-1]] = value
    try:
        config.parse_spec(copy.deepcopy(spec))
        model_error = None
    except config.SpecError as error:
        model_error = str(error)
    try:
        create_job(api_client, namespace, spec, dry_run=True)
        server_error = None
    except ApiException as error:
        assert error.status == 422, error.body
        server_error = error.body
        assert "evaluating rule" not in server_error, server_error
    assert (model_error is None) == (server_error is None), (spec, model_error, server_error)
    if model_error:
        fields = [part.split(":", 1)[0] for part in model_error.split("; ")]
        assert any(field in server_error for field in fields), (spec, model_error, server_error)


# --- transition rules (runtime/spec/changes.py): an update judged against the object before it -------
def _replace_spec(api_client, namespace: str, name: str, mutate) -> dict:
    api = client.CustomObjectsApi(api_client)
    body = api.get_namespaced_custom_object(GROUP, VERSION, namespace, PLURAL, name)
    mutate(body["spec"])
    return api.replace_namespaced_custom_object(GROUP, VERSION, namespace, PLURAL, name, body)


def _spark(**fields):
    return lambda spec: spec["spark"].update(fields)


@pytest.mark.parametrize(("store", "change", "field", "message"), [
    ("hdfs", _spark(shufflePartitions=8), "spec.spark.shufflePartitions", config.HDFS_PARTITIONS_MESSAGE),
    ("hdfs", _spark(stateStore="rocksdb"), "spec.spark.stateStore", config.STATE_STORE_MESSAGE),
    ("rocksdb", _spark(stateStore="hdfs"), "spec.spark.stateStore", config.STATE_STORE_MESSAGE),
])
def test_a_change_spark_cannot_apply_to_the_state_is_refused_on_update(api_client, namespace, streamingjob_crd,
                                                                       store, change, field, message):
    name = create_job(api_client, namespace, with_fields(spark={"stateStore": store}))["metadata"]["name"]
    with pytest.raises(ApiException) as rejected:
        _replace_spec(api_client, namespace, name, change)
    assert rejected.value.status == 422
    body = rejected.value.body
    assert field in body and message.split(":")[0] in body and "restoreFrom.fresh" in body, body


def test_a_new_job_is_not_judged_by_transition_rules(api_client, namespace, streamingjob_crd):
    # Nothing to repartition yet: a new job may name any partition count and state store.
    created = create_job(api_client, namespace, with_fields(spark={"stateStore": "hdfs", "shufflePartitions": 8}))
    assert created["spec"]["spark"]["shufflePartitions"] == 8


@pytest.mark.parametrize("change", [
    lambda spec: spec.update(restoreFrom={"fresh": "rescale-8"}) or _spark(shufflePartitions=8)(spec),
    lambda spec: spec.update(upgradeMode="stateless") or _spark(shufflePartitions=8)(spec),
    lambda spec: spec.update(restoreFrom={"fresh": "to-rocksdb"}) or _spark(stateStore="rocksdb")(spec),
    lambda spec: spec.update(image="sparkpoint:2"),  # other fields change as before
])
def test_the_same_changes_starting_without_state_are_accepted(api_client, namespace, streamingjob_crd, change):
    name = create_job(api_client, namespace, with_fields(spark={"stateStore": "hdfs"}))["metadata"]["name"]
    _replace_spec(api_client, namespace, name, change)
    # ... and an edit after that one is judged against it: the fresh name it kept is no new start.
    other = {"hdfs": "rocksdb", "rocksdb": "hdfs"}
    with pytest.raises(ApiException) as rejected:
        _replace_spec(api_client, namespace, name, lambda spec: spec.update(upgradeMode="savepoint") or
                      _spark(stateStore=other[spec["spark"]["stateStore"]])(spec))
    assert rejected.value.status == 422 and "spec.spark.stateStore" in rejected.value.body
