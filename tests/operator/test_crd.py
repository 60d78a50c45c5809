"""The CRD's OpenAPI schema and the pydantic spec model must agree: same accepted specs, same errors."""

from __future__ import annotations

import copy
from pathlib import Path
from typing import Any

import jsonschema
import pytest
import yaml
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from sparkpoint.operator.crd import streamingjob as crd
from sparkpoint.runtime.spec import job as config

ROOT = Path(__file__).resolve().parents[2]

VALID = {
    "image": "sparkpoint:dev",
    "job": {"entrypoint": "examples.windowed:build", "args": {"rows": 10},
            "sink": {"kind": "upsert", "path": "out/agg", "keyColumns": ["window"]}},
    "spark": {"master": "local[2]", "conf": {"spark.sql.session.timeZone": "UTC"},
              "resources": {"cpu": "2", "memory": "4Gi"}},
    "checkpoint": {"interval": "10s", "timeout": "5m", "minPause": "1s", "retain": 3, "maxConcurrent": 1,
                   "storage": {"url": "s3://sparkpoint/ckpt", "endpoint": "http://minio:9000",
                               "secretRef": {"name": "minio-creds"}},
                   "localRecovery": True},
    "savepoint": {"triggerNonce": 1, "retain": 2, "interval": "1h"},
    "restart": {"policy": "OnFailure", "maxRestarts": 5, "backoff": "5s", "maxBackoff": "1m", "window": "30m"},
    "upgradeMode": "savepoint",
    "upgradeTimeout": "10m",
    "state": "running",
    "restoreFrom": {"savepoint": "before-upgrade"},
    "gc": {"enabled": True, "interval": "30s", "grace": "5m", "pendingTimeout": "1h", "onDelete": "retain",
           "secretRef": {"name": "minio-gc-creds"}},
    "standby": {"enabled": True, "maxLag": "30s"},
}


def _strict(schema: dict[str, Any]) -> dict[str, Any]:
    """Mirror the API server: unknown fields are errors (strict field validation), null is allowed
    where the schema says nullable."""
    schema = copy.deepcopy(schema)

    def walk(node: dict[str, Any]) -> None:
        if node.pop("nullable", False):
            node["type"] = [node["type"], "null"]
        if "properties" in node:
            node["additionalProperties"] = False
            for sub in node["properties"].values():
                walk(sub)
        if isinstance(node.get("additionalProperties"), dict):
            walk(node["additionalProperties"])
        if "items" in node:
            walk(node["items"])

    walk(schema)
    return schema


SCHEMA = _strict(crd.spec_schema())


def _cel_rules(node: dict[str, Any], path: str = "spec") -> list[str]:
    """Every CEL rule as the model words its error: '<path of the node with the rule>: <message>'."""
    found = [f"{path}: {r['message']}" for r in node.get("x-kubernetes-validations", [])]
    for name, sub in node.get("properties", {}).items():
        found += _cel_rules(sub, f"{path}.{name}")
    return found


CEL_RULES = _cel_rules(SCHEMA)


def only_cel_rules_refused(message: str) -> bool:
    """True when every error the model reports is one of the CEL rules (which JSON schema cannot check)."""
    return all(any(part.startswith(rule) for rule in CEL_RULES) for part in message.split("; "))


def schema_accepts(spec: dict[str, Any]) -> bool:
    return jsonschema.Draft7Validator(SCHEMA).is_valid(spec)


def model_verdict(spec: dict[str, Any]) -> tuple[bool, str]:
    try:
        config.parse_spec(spec)
        return True, ""
    except config.SpecError as err:
        return False, str(err)


def valid_with(path: tuple[str, ...], value: Any) -> dict[str, Any]:
    """A copy of VALID with the field at `path` set to `value`."""
    spec = copy.deepcopy(VALID)
    node = spec
    for key in path[:-1]:
        node = node[key]
    node[path[-1]] = value
    return spec


def test_committed_crd_is_generated_from_the_model() -> None:
    committed = (ROOT / "crds" / "streamingjob.yaml").read_text()
    assert committed == crd.render(), "crds/streamingjob.yaml is stale: run `make crd`"


def test_crd_names_follow_the_contract() -> None:
    doc = yaml.safe_load((ROOT / "crds" / "streamingjob.yaml").read_text())
    spec = doc["spec"]
    assert doc["metadata"]["name"] == "streamingjobs.sparkpoint.dev"
    assert spec["names"]["kind"] == "StreamingJob" and spec["names"]["shortNames"] == ["sj"]
    assert spec["scope"] == "Namespaced"
    version = spec["versions"][0]
    assert version["name"] == "v1alpha1" and version["subresources"] == {"status": {}}
    columns = [c["name"] for c in version["additionalPrinterColumns"]]
    assert columns == ["Phase", "Last Checkpoint", "Checkpoint Age", "Restarts", "Age"]


def test_valid_example_passes_both() -> None:
    assert schema_accepts(VALID)
    assert model_verdict(VALID) == (True, "")


def test_a_secret_name_with_dots_passes_both() -> None:
    """Secret names are DNS-1123 subdomains (minio.credentials is a valid one)."""
    spec = copy.deepcopy(VALID)
    spec["checkpoint"]["storage"]["secretRef"]["name"] = "minio.credentials"
    assert schema_accepts(spec) and model_verdict(spec) == (True, "")


@pytest.mark.parametrize(("path", "value", "field"), [
    (("checkpoint", "retain"), 0, "spec.checkpoint.retain"),
    (("checkpoint", "interval"), "10 seconds", "spec.checkpoint.interval"),
    (("job", "entrypoint"), "no_colon", "spec.job.entrypoint"),
    (("upgradeMode",), "yolo", "spec.upgradeMode"),
    (("checkpoint", "storage", "url"), "http://x", "spec.checkpoint.storage.url"),
    (("checkpoint", "intervall"), "10s", "spec.checkpoint.intervall"),
    (("spark", "resources", "memory"), "lots", "spec.spark.resources.memory"),
    (("spark", "resources", "cpu"), "many", "spec.spark.resources.cpu"),
    (("image",), "Not A Valid Image!!", "spec.image"),
    (("spark", "master"), "yarn", "spec.spark.master"),
    (("checkpoint", "timeout"), "1000000h", "spec.checkpoint.timeout"),
    (("checkpoint", "storage", "endpoint"), "minio:9000", "spec.checkpoint.storage.endpoint"),
    (("job", "sink", "path"), "out/../other", "spec.job.sink.path"),
    (("job", "sink", "keyColumns"), [""], "spec.job.sink.keyColumns.0"),
    (("savepoint", "interval"), "hourly", "spec.savepoint.interval"),
    (("restart", "window"), "1 h", "spec.restart.window"),
    (("upgradeTimeout",), "5", "spec.upgradeTimeout"),
    (("checkpoint", "storage", "secretRef", "name"), "Minio_Creds", "spec.checkpoint.storage.secretRef.name"),
    (("checkpoint", "storage", "secretRef", "name"), "minio..creds", "spec.checkpoint.storage.secretRef.name"),
    (("standby", "enabled"), "yes", "spec.standby.enabled"),
    (("standby", "maxLag"), "a minute", "spec.standby.maxLag"),
])
def test_invalid_field_is_named_by_the_model_and_rejected_by_the_schema(path, value, field) -> None:
    spec = valid_with(path, value)
    ok, message = model_verdict(spec)
    assert not ok and message.startswith(field + ":"), message
    assert not schema_accepts(spec)


def _leaf_paths(node: Any, prefix: tuple = ()) -> list[tuple]:
    if isinstance(node, dict) and node and prefix[-1:] not in (("args",), ("conf",)):
        return [p for k, v in node.items() for p in _leaf_paths(v, prefix + (k,))] + [prefix] * bool(prefix)
    return [prefix]


LEAVES = _leaf_paths(VALID)
DURATIONS = st.builds(lambda n, unit: f"{n}{unit}", st.sampled_from([0, 1, 99, 100, 999, 1000, 59, 60, 999999,
                                                                       1000000]),
                      st.sampled_from(["ms", "s", "m", "h"]))
QUANTITIES = st.sampled_from(["lots", "many", "1", "0", "0.5", "500m", "-1", "1.5Gi", "512Mi", "511Mi", "100Mi",
                              "4G", "2Ti", "1e9", "1Gb", "536870912", "536870911", "0.5Gi", "0.4Gi"])
IMAGES = st.sampled_from(["Not A Valid Image!!", "sparkpoint", "sparkpoint:dev", "ghcr.io/org/img:1.2",
                          "localhost:5000/a/b", "a:b:c", "img@sha256:" + "f" * 64, "img@sha256:abc", "-x"])
MASTERS = st.sampled_from(["yarn", "local", "local[1]", "local[*]", "local[0]", "local[-1]", "local[12345]",
                           "k8s", "k8s://https://h", "spark://h:7077", "LOCAL"])
CONFS = st.sampled_from([{"spark.master": "x"}, {"spark.sql.shuffle.partitions": "2"},
                         {"spark.sql.streaming.checkpointLocation": "/x"}, {"spark.sql.session.timeZone": "UTC"},
                         {"spark.sql.streaming.stateStore.providerClass": "x"}])
ODD_VALUES = st.one_of(
    st.sampled_from([0, -1, 1, 3, 17, 1001, "", "10s", "0ms", "5 m", "1d", "chk-000001", "chk-1",
                     "transactional", "upsert", "console", "Always", "Never", "stateless",
                     "last-checkpoint", "suspended", "s3://ok-bucket/p", "file:///tmp/x", "UPPER",
                     "a:b", "a.b:c_d", ":x", True, False, None, [], ["k"], {}, {"name": "ok"},
                     "http://h:9000", "https://h/", "h:9000", "http://h/path", "a/../b", "a//b", "a/",
                     "a/b.c/_d", "./a", [""], ["k", ""]]),
    st.integers(-5, 2000), st.text(max_size=8), DURATIONS, QUANTITIES, IMAGES, MASTERS, CONFS)


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.lists(st.tuples(st.sampled_from(LEAVES), ODD_VALUES, st.booleans()), min_size=1, max_size=3))
def test_model_and_schema_agree_on_mutated_specs(mutations) -> None:
    spec = copy.deepcopy(VALID)
    for path, value, delete in mutations:
        node = spec
        for key in path[:-1]:
            if not isinstance(node.get(key), dict):
                break
            node = node[key]
        else:
            if delete:
                node.pop(path[-1], None)
            else:
                node[path[-1]] = value
    model_ok, message = model_verdict(spec)
    schema_ok = schema_accepts(spec)
    if schema_ok and not model_ok:
        # Minimums and cross-field rules are CEL in the CRD, checked by the API server, not by JSON
        # schema: the model must refuse for exactly those rules, at the same path, in the same words.
        assert only_cel_rules_refused(message), (spec, message)
    else:
        assert model_ok == schema_ok, (spec, message)


@pytest.mark.parametrize(("path", "value", "rule"), [
    (("checkpoint", "interval"), "0s", "spec.checkpoint.interval: must be at least 1s"),
    (("checkpoint", "timeout"), "0s", "spec.checkpoint.timeout: must be at least 1s"),
    (("job", "triggerInterval"), "0ms", "spec.job.triggerInterval: must be at least 100ms"),
    (("restart", "backoff"), "2m", "spec.restart: backoff must not be longer than maxBackoff"),
    (("gc", "interval"), "0s", "spec.gc.interval: must be at least 1s"),
    (("savepoint", "interval"), "30s", "spec.savepoint.interval: must be at least 1m"),
    (("restart", "window"), "10s", "spec.restart.window: must be at least 1m"),
    (("checkpoint", "storage", "url"), "file:///data", "spec: gc.secretRef needs an s3:// checkpoint.storage.url"),
    (("upgradeTimeout",), "5s", "spec.upgradeTimeout: must be at least 30s"),
    (("standby", "maxLag"), "1s", "spec.standby.maxLag: must be from 5s to 1h"),
    (("standby", "maxLag"), "2h", "spec.standby.maxLag: must be from 5s to 1h"),
    (("spark", "resources", "memory"), "100Mi", "spec.spark.resources.memory: must be at least 1Gi"),
    (("spark", "conf"), {"spark.sql.streaming.checkpointLocation": "/x"},
     "spec.spark.conf: spark.sql.streaming.checkpointLocation is set by Sparkpoint"),
])
def test_rules_json_schema_cannot_check_are_cel_rules_worded_as_the_model_words_them(path, value, rule) -> None:
    spec = valid_with(path, value)
    ok, message = model_verdict(spec)
    assert not ok and message.startswith(rule), message
    assert rule in CEL_RULES or any(r.startswith(rule) for r in CEL_RULES), CEL_RULES
    assert schema_accepts(spec)  # only the API server's CEL rule refuses it (checked in e2e/)


def test_name_rules_sit_at_the_root_where_cel_sees_metadata_name() -> None:
    root = crd.build_crd()["spec"]["versions"][0]["schema"]["openAPIV3Schema"]
    rules = root["x-kubernetes-validations"]
    assert rules == config.NAME_RULES
    assert all("self.metadata.name" in r["rule"] and r["message"].startswith("metadata.name") for r in rules)
    assert f"<= {config.JOB_NAME_MAX_LENGTH}" in rules[0]["rule"]


def test_chart_ships_the_same_crd() -> None:
    chart_copy = (ROOT / "charts" / "sparkpoint" / "crds" / "streamingjob.yaml").read_text()
    assert chart_copy == (ROOT / "crds" / "streamingjob.yaml").read_text(), \
        "charts/sparkpoint/crds/streamingjob.yaml drifted: run `make crd`"


EXECUTORS_JOB = {"job": {"entrypoint": "a:b"}, "spark": {"master": "k8s"},
                 "checkpoint": {"hotVolume": {"persistentVolumeClaim": {"claimName": "hot"}}}}


@pytest.mark.parametrize(("executors", "rule"), [
    ({"instances": 2, "dynamic": {"max": 4}}, "spec.spark.executors: instances and dynamic are mutually exclusive"),
    ({"dynamic": {"min": 3, "max": 2}}, "spec.spark.executors.dynamic: min must not be greater than max"),
    ({"dynamic": {"max": 2, "idleTimeout": "0s"}}, "spec.spark.executors.dynamic.idleTimeout: must be at least 1s"),
])
def test_dynamic_allocation_rules_are_cel_rules_worded_as_the_model_words_them(executors, rule) -> None:
    spec = copy.deepcopy(EXECUTORS_JOB)
    spec["spark"]["executors"] = executors
    ok, message = model_verdict(spec)
    assert not ok and message.startswith(rule), message
    assert any(r.startswith(rule) for r in CEL_RULES), CEL_RULES
    assert schema_accepts(spec)  # only the API server's CEL rule refuses it (checked in e2e/)


def test_dynamic_allocation_without_max_and_a_valid_one_agree() -> None:
    spec = copy.deepcopy(EXECUTORS_JOB)
    spec["spark"]["executors"] = {"dynamic": {"min": 0}}
    assert not schema_accepts(spec) and model_verdict(spec)[1].startswith("spec.spark.executors.dynamic.max")
    spec["spark"]["executors"] = {"dynamic": {"min": 0, "max": 3, "idleTimeout": "30s"}, "cores": 2}
    assert schema_accepts(spec) and model_verdict(spec) == (True, "")


# --- spec.podTemplate (docs/design.md §9, "Pod templates") ---------------------------------------
TEMPLATE = {"metadata": {"labels": {"team": "a"}, "annotations": {"note": "x"}},
            "spec": {"containers": [{"name": "runtime", "env": [
                {"name": "KAFKA_PASSWORD", "valueFrom": {"secretKeyRef": {"name": "kafka", "key": "password"}}}],
                "resources": {"limits": {"ephemeral-storage": "1Gi", "nvidia.com/gpu": 1}}},
                {"name": "proxy", "image": "envoy:1", "ports": [{"containerPort": 9901}]}],
                "tolerations": [{"key": "spark", "operator": "Exists", "effect": "NoSchedule"}],
                "nodeSelector": {"pool": "spark"}, "priorityClassName": "high",
                "volumes": [{"name": "certs", "secret": {"secretName": "certs"}}]}}


def test_a_pod_template_passes_both() -> None:
    spec = valid_with(("podTemplate",), copy.deepcopy(TEMPLATE))
    assert schema_accepts(spec) and model_verdict(spec) == (True, "")


def test_the_pod_templates_carry_the_upstream_pod_spec_schema() -> None:
    """So `kubectl explain streamingjob.spec.podTemplate.spec` and editors know every field."""
    template = crd.spec_schema()["properties"]["podTemplate"]["properties"]
    pod = template["spec"]["properties"]
    assert {"tolerations", "nodeSelector", "affinity", "topologySpreadConstraints", "priorityClassName",
            "imagePullSecrets", "initContainers", "volumes", "securityContext"} <= set(pod)
    container = pod["containers"]["items"]
    assert container["required"] == ["name"] and "description" in container["properties"]["env"]
    assert container["properties"]["resources"]["properties"]["limits"]["additionalProperties"] == {
        "x-kubernetes-int-or-string": True}  # a quantity may be written as a number, as upstream
    assert "required" not in template["spec"]  # a template may leave containers out
    assert set(template["metadata"]["properties"]) == {"labels", "annotations"}
    executors = crd.spec_schema()["properties"]["spark"]["properties"]["executors"]["properties"]["podTemplate"]
    assert set(executors["properties"]["spec"]["properties"]) == set(pod)


def test_a_template_field_the_pod_spec_lacks_is_refused_by_both() -> None:
    spec = valid_with(("podTemplate",), {"spec": {"tolerations": [{"key": "k", "colour": "red"}]}})
    assert not schema_accepts(spec)
    spec = valid_with(("podTemplate",), {"metadata": {"name": "mine"}})
    assert not schema_accepts(spec) and not model_verdict(spec)[0]


@pytest.mark.parametrize(("template", "rule"), [
    ({"spec": {"containers": [{"name": "runtime", "command": ["sh"]}]}},
     "spec.podTemplate: spec.containers[runtime/gc].command is set by Sparkpoint"),
    ({"spec": {"containers": [{"name": "gc", "env": [{"name": "SPARKPOINT_JOB", "value": "x"}]}]}},
     "spec.podTemplate: spec.containers[runtime/gc].env"),
    ({"spec": {"containers": [{"name": "runtime", "resources": {"requests": {"cpu": "4"}}}]}},
     "spec.podTemplate: spec.containers[runtime/gc].resources"),
    ({"spec": {"volumes": [{"name": "hot", "emptyDir": {}}]}}, "spec.podTemplate: spec.volumes"),
    ({"spec": {"restartPolicy": "Always"}}, "spec.podTemplate: spec.restartPolicy is set by Sparkpoint"),
    ({"metadata": {"labels": {"sparkpoint.dev/job": "other"}}}, "spec.podTemplate: metadata.labels"),
])
def test_pod_template_conflicts_are_cel_rules_worded_as_the_model_words_them(template, rule) -> None:
    spec = valid_with(("podTemplate",), template)
    ok, message = model_verdict(spec)
    assert not ok and message.startswith(rule), message
    assert any(r.startswith(rule) for r in CEL_RULES), rule
    assert schema_accepts(spec)  # only the API server's CEL rule refuses it (checked in e2e/)


def test_every_owned_field_refusal_is_a_cel_rule_of_both_templates() -> None:
    from sparkpoint.runtime.spec.pod_template import EXECUTOR_CONTAINERS, JOB_CONTAINERS, owned_rules

    for path, names in (("spec.podTemplate", JOB_CONTAINERS), ("spec.spark.executors.podTemplate",
                                                                EXECUTOR_CONTAINERS)):
        assert {f"{path}: {r.message}" for r in owned_rules(names)} <= set(CEL_RULES), path
