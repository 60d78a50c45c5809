"""The StreamingJobSavepoint CRD and its model agree, and the committed files are generated ones."""

from __future__ import annotations

import copy
from pathlib import Path

import jsonschema
import pytest
import yaml

from sparkpoint.operator.savepoint import crd as crd_savepoint
from sparkpoint.operator.savepoint.model import (
    SavepointResourceError,
    SavepointSpec,
    parse_spec,
    parse_status,
    savepoint_name,
)
from sparkpoint.runtime.spec import RestoreFrom
from sparkpoint.runtime.store.layout import check_savepoint_name

ROOT = Path(__file__).resolve().parents[2]
CRD_PATH = ROOT / "crds" / "streamingjobsavepoint.yaml"


def _strict(schema: dict) -> dict:
    """Unknown fields are errors and nullable means null is allowed, as on the API server."""
    schema = copy.deepcopy(schema)

    def walk(node: dict) -> None:
        if node.pop("nullable", False):
            node["type"] = [node["type"], "null"]
        if "properties" in node and not node.get("x-kubernetes-preserve-unknown-fields"):
            node["additionalProperties"] = False
        for sub in node.get("properties", {}).values():
            walk(sub)
        if "items" in node:
            walk(node["items"])

    walk(schema)
    return schema


SPEC_SCHEMA = _strict(crd_savepoint.spec_schema())


def schema_accepts(spec: dict) -> bool:
    return jsonschema.Draft7Validator(SPEC_SCHEMA).is_valid(spec)


def test_committed_crd_is_generated_from_the_model() -> None:
    assert CRD_PATH.read_text() == crd_savepoint.render(), "crds/streamingjobsavepoint.yaml is stale: run `make crd`"


def test_chart_ships_the_same_crd() -> None:
    chart = ROOT / "charts" / "sparkpoint" / "crds" / "streamingjobsavepoint.yaml"
    assert chart.read_text() == CRD_PATH.read_text(), "the chart's copy drifted: run `make crd`"


def test_crd_names_columns_and_rules() -> None:
    doc = yaml.safe_load(CRD_PATH.read_text())
    spec = doc["spec"]
    assert doc["metadata"]["name"] == "streamingjobsavepoints.sparkpoint.dev"
    assert spec["names"]["kind"] == "StreamingJobSavepoint" and spec["names"]["shortNames"] == ["sjsp"]
    assert spec["scope"] == "Namespaced"
    version = spec["versions"][0]
    assert version["name"] == "v1alpha1" and version["subresources"] == {"status": {}}
    assert [c["name"] for c in version["additionalPrinterColumns"]] == ["Job", "State", "Size", "Age"]
    root = version["schema"]["openAPIV3Schema"]
    assert root["properties"]["spec"]["x-kubernetes-validations"][0]["rule"] == "self == oldSelf"
    assert "metadata.name" in root["x-kubernetes-validations"][0]["rule"]
    status = root["properties"]["status"]["properties"]
    assert {"state", "id", "sizeBytes", "completedAt", "checkpoint", "error", "observedGeneration",
            "conditions"} <= set(status)


@pytest.mark.parametrize(("spec", "field"), [
    ({}, "spec.jobName"),
    ({"jobName": "Bad_Name"}, "spec.jobName"),
    ({"jobName": "j", "savepointName": "has.dot"}, "spec.savepointName"),
    ({"jobName": "j", "savepointName": "x" * 64}, "spec.savepointName"),
    ({"jobName": "j", "retain": "yes"}, "spec.retain"),
    ({"jobName": "j", "retain": 0}, "spec.retain"),
    ({"jobName": "j", "retian": False}, "spec.retian"),
])
def test_bad_spec_is_named_by_the_model_and_rejected_by_the_schema(spec, field) -> None:
    with pytest.raises(SavepointResourceError) as err:
        parse_spec(spec)
    assert str(err.value).startswith(field + ":"), err.value
    assert not schema_accepts(spec)


@pytest.mark.parametrize("spec", [
    {"jobName": "j"}, {"jobName": "orders", "savepointName": "before-upgrade", "retain": False},
    {"jobName": "a" * 63, "savepointName": "b" * 63},
])
def test_good_spec_passes_both(spec) -> None:
    assert isinstance(parse_spec(spec), SavepointSpec)
    assert schema_accepts(spec)


def test_retain_defaults_to_keeping_the_data() -> None:
    assert parse_spec({"jobName": "j"}).retain is True
    assert SPEC_SCHEMA["properties"]["retain"]["default"] is True


@pytest.mark.parametrize("name", ["sp-1", "before-upgrade", "a" * 63, "0"])
def test_every_accepted_name_is_a_store_name_and_a_restore_from_name(name) -> None:
    got = savepoint_name("resource", parse_spec({"jobName": "j", "savepointName": name}))
    assert check_savepoint_name(got) == name
    assert RestoreFrom.model_validate({"savepoint": got}).savepoint == name


def test_the_resource_name_is_the_default_and_must_qualify() -> None:
    spec = parse_spec({"jobName": "j"})
    assert savepoint_name("nightly-1", spec) == "nightly-1"
    with pytest.raises(SavepointResourceError, match=r"^metadata.name: .*set spec.savepointName"):
        savepoint_name("nightly.1", spec)  # a valid resource name (DNS subdomain), not a savepoint name
    assert savepoint_name("nightly.1", parse_spec({"jobName": "j", "savepointName": "n1"})) == "n1"


def test_status_round_trips_and_junk_starts_over() -> None:
    status = parse_status({"state": "InProgress", "requestId": "req-000001", "pod": "p", "triggers": 1,
                           "storage": {"url": "s3://b/p", "secretName": "creds"}, "kopf": {"x": 1}})
    assert status.state == "InProgress" and status.storage.secret_name == "creds"
    assert status.model_dump(by_alias=True, exclude_none=True)["requestId"] == "req-000001"
    assert parse_status({"state": "Exploded"}).state == "Pending"
    assert parse_status(None).state == "Pending"
