"""Builds the StreamingJobSavepoint CRD from its model (sparkpoint.operator.savepoint.model).

`python -m sparkpoint.operator.savepoint.crd > crds/streamingjobsavepoint.yaml` regenerates the
committed file; tests/operator/test_savepoint_crd.py fails when it differs from the model.
"""

from __future__ import annotations

import sys
from typing import Any

import yaml

from sparkpoint.operator.crd.streamingjob import crd_document, to_structural
from sparkpoint.operator.savepoint.model import (
    KIND,
    NAME_RULE,
    PLURAL,
    SavepointSpec,
    SavepointStatus,
)

SINGULAR = "streamingjobsavepoint"
SHORT_NAMES = ["sjsp"]


def _schema(model: Any) -> dict[str, Any]:
    raw = model.model_json_schema(by_alias=True)
    return to_structural(raw, raw.get("$defs", {}))


def spec_schema() -> dict[str, Any]:
    return _schema(SavepointSpec)


def status_schema() -> dict[str, Any]:
    schema = _schema(SavepointStatus)
    # kopf records its own progress under status; keep what the model does not name.
    schema["x-kubernetes-preserve-unknown-fields"] = True
    conditions = schema["properties"]["conditions"]
    conditions["x-kubernetes-list-type"] = "map"
    conditions["x-kubernetes-list-map-keys"] = ["type"]
    return schema


def build_crd() -> dict[str, Any]:
    columns = [
        {"name": "Job", "type": "string", "jsonPath": ".spec.jobName"},
        {"name": "State", "type": "string", "jsonPath": ".status.state"},
        {"name": "Size", "type": "integer", "jsonPath": ".status.sizeBytes"},
        {"name": "Age", "type": "date", "jsonPath": ".metadata.creationTimestamp"},
    ]
    return crd_document(kind=KIND, plural=PLURAL, singular=SINGULAR, short_names=SHORT_NAMES, columns=columns,
                        name_rules=[NAME_RULE], spec=spec_schema(), status=status_schema())


def render() -> str:
    header = ("# Generated from sparkpoint.operator.savepoint.model by "
              "`python -m sparkpoint.operator.savepoint.crd`; do not edit.\n")
    return header + yaml.safe_dump(build_crd(), sort_keys=False, width=100)


if __name__ == "__main__":
    sys.stdout.write(render())
