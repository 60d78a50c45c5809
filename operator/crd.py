"""Builds the StreamingJob CRD from the spec model, so the two cannot drift.

`python -m sparkpoint.operator.crd > crds/streamingjob.yaml` regenerates the committed file;
tests/operator/test_crd.py fails when the committed file differs from what the model implies.
"""

from __future__ import annotations

import copy
import sys
from typing import Any

import yaml
from pydantic import BaseModel

from sparkpoint.runtime.config import API_GROUP, API_VERSION, KIND, NAME_RULES, JobSpec

PLURAL = "streamingjobs"
SINGULAR = "streamingjob"
SHORT_NAMES = ["sj"]

# Keywords of pydantic's JSON schema that a structural OpenAPI v3 schema keeps as they are.
_KEPT = {"type", "pattern", "minimum", "maximum", "enum", "default", "description", "maxLength",
         "minLength", "x-kubernetes-validations"}


def _resolve(node: dict[str, Any], defs: dict[str, Any]) -> dict[str, Any]:
    if "$ref" in node:
        return _resolve(defs[node["$ref"].rsplit("/", 1)[1]], defs) | {
            k: v for k, v in node.items() if k != "$ref"}
    return node


def to_structural(node: dict[str, Any], defs: dict[str, Any]) -> dict[str, Any]:
    """Convert one pydantic JSON-schema node to Kubernetes' structural OpenAPI v3 subset."""
    node = _resolve(node, defs)
    nullable = False
    if "anyOf" in node:  # Optional[X] -> X with nullable: true
        options = [o for o in node["anyOf"] if o.get("type") != "null"]
        if len(options) != 1:
            raise ValueError(f"cannot express a union of {len(options)} types in a structural schema")
        nullable = len(options) != len(node["anyOf"])
        merged = {k: v for k, v in node.items() if k != "anyOf"}
        node = _resolve(options[0], defs) | {k: v for k, v in merged.items() if k not in ("title",)}
    out: dict[str, Any] = {k: copy.deepcopy(v) for k, v in node.items() if k in _KEPT}
    if "const" in node:
        out["enum"] = [node["const"]]
    if out.get("default", ...) is None:
        del out["default"]  # a null default means "absent" in Kubernetes
    if nullable:
        out["nullable"] = True
    kind = node.get("type")
    if kind == "object":
        props = node.get("properties")
        extra = node.get("additionalProperties")
        if props:
            out["properties"] = {name: to_structural(sub, defs) for name, sub in props.items()}
            required = node.get("required")
            if required:
                out["required"] = list(required)
        elif extra is True or extra is None:
            out["x-kubernetes-preserve-unknown-fields"] = True
        elif isinstance(extra, dict):
            out["additionalProperties"] = to_structural(extra, defs)
    elif kind == "array":
        out["items"] = to_structural(node.get("items", {}), defs)
    return out


def _default_sections(model: type[BaseModel], node: dict[str, Any]) -> None:
    """Give every section the model always fills in (default_factory) `default: {}`, so the API
    server applies the nested defaults even when a manifest leaves the whole section out."""
    for name, field in model.model_fields.items():
        prop = node.get("properties", {}).get(field.alias or name)
        kind = field.annotation
        if prop is None or not (isinstance(kind, type) and issubclass(kind, BaseModel)):
            continue
        if field.default_factory is not None:
            prop["default"] = {}
        _default_sections(kind, prop)


def spec_schema() -> dict[str, Any]:
    raw = JobSpec.model_json_schema(by_alias=True)
    schema = to_structural(raw, raw.get("$defs", {}))
    _default_sections(JobSpec, schema)
    return schema


def status_schema() -> dict[str, Any]:
    """The status contract (docs/design.md §9): the fields users, printer columns and alerts read.
    status.tracking is the operator's own bookkeeping (preserved, not part of the contract)."""
    string, integer = {"type": "string"}, {"type": "integer"}
    time = {"type": "string", "format": "date-time"}
    condition = {
        "type": "object",
        "required": ["type", "status"],
        "properties": {
            "type": string,
            "status": {"type": "string", "enum": ["True", "False", "Unknown"]},
            "reason": string,
            "message": string,
            "observedGeneration": integer,
            "lastTransitionTime": time,
        },
    }
    checkpoint = {
        "type": "object",
        "properties": {"id": string, "batch": {"type": "integer", "nullable": True}, "completedAt": string,
                       "bytes": {"type": "integer", "nullable": True},
                       "newBytes": {"type": "integer", "nullable": True}},
    }
    savepoint = {
        "type": "object",
        "properties": {"name": string, "checkpoint": {"type": "string", "nullable": True},
                       "batch": {"type": "integer", "nullable": True}, "bytes": integer, "completedAt": string},
    }
    return {
        "type": "object",
        # kopf's own bookkeeping (status.kopf) lives here too.
        "x-kubernetes-preserve-unknown-fields": True,
        "properties": {
            "phase": {"type": "string", "enum": ["Pending", "Running", "Recovering", "Upgrading", "Suspended",
                                                 "Failed", "Finished"]},
            "observedGeneration": integer,
            "attempt": integer,
            "pod": string,
            "latestCheckpoint": checkpoint,
            "checkpoints": {"type": "array", "items": checkpoint},
            "savepoints": {"type": "array", "items": savepoint},
            "restarts": integer,
            "localRecoveries": integer,
            "nextAttemptAt": time,  # while Recovering: when the next attempt starts (its backoff)
            "lastFailure": {"type": "object", "properties": {"reason": string, "message": string, "at": string}},
            "restore": {"type": "object", "x-kubernetes-preserve-unknown-fields": True},
            "tracking": {"type": "object", "x-kubernetes-preserve-unknown-fields": True},
            "conditions": {"type": "array", "items": condition,
                           "x-kubernetes-list-type": "map", "x-kubernetes-list-map-keys": ["type"]},
        },
    }


def crd_document(*, kind: str, plural: str, singular: str, short_names: list[str],
                 columns: list[dict[str, Any]], name_rules: list[dict[str, Any]],
                 spec: dict[str, Any], status: dict[str, Any]) -> dict[str, Any]:
    """A namespaced sparkpoint.dev CRD with a status subresource (shared by both of our kinds)."""
    return {
        "apiVersion": "apiextensions.k8s.io/v1",
        "kind": "CustomResourceDefinition",
        "metadata": {"name": f"{plural}.{API_GROUP}"},
        "spec": {
            "group": API_GROUP,
            "scope": "Namespaced",
            "names": {"kind": kind, "plural": plural, "singular": singular,
                      "shortNames": short_names, "listKind": f"{kind}List"},
            "versions": [{
                "name": API_VERSION,
                "served": True,
                "storage": True,
                "subresources": {"status": {}},
                "additionalPrinterColumns": columns,
                "schema": {"openAPIV3Schema": {
                    "type": "object",
                    "required": ["spec"],
                    # Rules on metadata.name (the only metadata CEL can see).
                    "x-kubernetes-validations": name_rules,
                    "properties": {
                        "apiVersion": {"type": "string"},
                        "kind": {"type": "string"},
                        "metadata": {"type": "object"},
                        "spec": spec,
                        "status": status,
                    },
                }},
            }],
        },
    }


def build_crd() -> dict[str, Any]:
    columns = [
        {"name": "Phase", "type": "string", "jsonPath": ".status.phase"},
        {"name": "Last Checkpoint", "type": "string", "jsonPath": ".status.latestCheckpoint.id"},
        {"name": "Checkpoint Age", "type": "date", "jsonPath": ".status.latestCheckpoint.completedAt"},
        {"name": "Restarts", "type": "integer", "jsonPath": ".status.restarts"},
        {"name": "Age", "type": "date", "jsonPath": ".metadata.creationTimestamp"},
    ]
    # The name rules leave room for the names derived from it (pods, Service).
    return crd_document(kind=KIND, plural=PLURAL, singular=SINGULAR, short_names=SHORT_NAMES, columns=columns,
                        name_rules=copy.deepcopy(NAME_RULES), spec=spec_schema(), status=status_schema())


def render() -> str:
    header = "# Generated from sparkpoint.runtime.config by `python -m sparkpoint.operator.crd`; do not edit.\n"
    return header + yaml.safe_dump(build_crd(), sort_keys=False, width=100)


if __name__ == "__main__":
    sys.stdout.write(render())
