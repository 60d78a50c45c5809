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

from sparkpoint.operator import crd
from sparkpoint.runtime import config

ROOT = Path(__file__).resolve().parents[2]

VALID = {
    "image": "sparkpoint:dev",
    "job": {"entrypoint": "examples.windowed:build", "args": {"rows": 10},
            "sink": {"kind": "upsert", "path": "out/agg", "keyColumns": ["window"]}},
    "spark": {"master": "local[2]", "conf": {"spark.sql.shuffle.partitions": "4"},
              "resources": {"cpu": "2", "memory": "4Gi"}},
    "checkpoint": {"interval": "10s", "timeout": "5m", "minPause": "1s", "retain": 3, "maxConcurrent": 1,
                   "storage": {"url": "s3://sparkpoint/ckpt", "secretRef": {"name": "minio-creds"}},
                   "localRecovery": True},
    "savepoint": {"triggerNonce": 1, "retain": 2},
    "restart": {"policy": "OnFailure", "maxRestarts": 5, "backoff": "5s", "maxBackoff": "1m"},
    "upgradeMode": "savepoint",
    "state": "running",
    "restoreFrom": {"savepoint": "before-upgrade"},
    "gc": {"enabled": True, "interval": "30s", "grace": "5m", "pendingTimeout": "1h", "onDelete": "retain"},
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


def _cel_messages(node: dict[str, Any]) -> list[str]:
    found = [r["message"] for r in node.get("x-kubernetes-validations", [])]
    for sub in node.get("properties", {}).values():
        found += _cel_messages(sub)
    return found


CEL_MESSAGES = _cel_messages(SCHEMA)


def schema_accepts(spec: dict[str, Any]) -> bool:
    return jsonschema.Draft7Validator(SCHEMA).is_valid(spec)


def model_verdict(spec: dict[str, Any]) -> tuple[bool, str]:
    try:
        config.parse_spec(spec)
        return True, ""
    except config.SpecError as err:
        return False, str(err)


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


@pytest.mark.parametrize(("path", "value", "field"), [
    (("checkpoint", "retain"), 0, "spec.checkpoint.retain"),
    (("checkpoint", "interval"), "10 seconds", "spec.checkpoint.interval"),
    (("job", "entrypoint"), "no_colon", "spec.job.entrypoint"),
    (("upgradeMode",), "yolo", "spec.upgradeMode"),
    (("checkpoint", "storage", "url"), "http://x", "spec.checkpoint.storage.url"),
    (("checkpoint", "intervall"), "10s", "spec.checkpoint.intervall"),
])
def test_invalid_field_is_named_by_the_model_and_rejected_by_the_schema(path, value, field) -> None:
    spec = copy.deepcopy(VALID)
    node = spec
    for key in path[:-1]:
        node = node[key]
    node[path[-1]] = value
    ok, message = model_verdict(spec)
    assert not ok and message.startswith(field + ":"), message
    assert not schema_accepts(spec)


def _leaf_paths(node: Any, prefix: tuple = ()) -> list[tuple]:
    if isinstance(node, dict) and node and prefix[-1:] not in (("args",), ("conf",)):
        return [p for k, v in node.items() for p in _leaf_paths(v, prefix + (k,))] + [prefix] * bool(prefix)
    return [prefix]


LEAVES = _leaf_paths(VALID)
ODD_VALUES = st.one_of(
    st.sampled_from([0, -1, 1, 3, 17, 1001, "", "10s", "0ms", "5 m", "1d", "chk-000001", "chk-1",
                     "transactional", "upsert", "console", "Always", "Never", "stateless",
                     "last-checkpoint", "suspended", "s3://ok-bucket/p", "file:///tmp/x", "UPPER",
                     "a:b", "a.b:c_d", ":x", True, False, None, [], ["k"], {}, {"name": "ok"}]),
    st.integers(-5, 2000), st.text(max_size=8))


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
        # Cross-field rules are CEL in the CRD, checked by the API server, not by JSON schema.
        assert any(m in message for m in CEL_MESSAGES), (spec, message)
    else:
        assert model_ok == schema_ok, (spec, message)


def test_chart_ships_the_same_crd() -> None:
    chart_copy = (ROOT / "charts" / "sparkpoint" / "crds" / "streamingjob.yaml").read_text()
    assert chart_copy == (ROOT / "crds" / "streamingjob.yaml").read_text(), \
        "charts/sparkpoint/crds/streamingjob.yaml drifted: run `make crd`"
