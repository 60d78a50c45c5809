"""Builds the StreamingJob CRD from the spec and status models, so neither can drift.

`python -m sparkpoint.operator.crd > crds/streamingjob.yaml` regenerates the committed file;
tests/operator/test_crd.py fails when the committed file differs from what the model implies.
"""

from __future__ import annotations

import copy
import sys
from typing import Any

import yaml
from pydantic import BaseModel

from sparkpoint.runtime.spec import API_GROUP, API_VERSION, KIND, NAME_RULES, JobSpec

from ..decisions.status_model import JobStatus
from .pod_template_schema import pod_spec_schema

PLURAL = "streamingjobs"
SINGULAR = "streamingjob"
SHORT_NAMES = ["sj"]

# Keywords of pydantic's JSON schema that a structural OpenAPI v3 schema keeps as they are.
_KEPT = {"type", "pattern", "minimum", "maximum", "enum", "default", "description", "maxLength",
         "minLength", "maxItems", "maxProperties", "format", "x-kubernetes-validations", "x-kubernetes-preserve-unknown-fields",
         "x-kubernetes-list-type", "x-kubernetes-list-map-keys"}


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


# spec.podTemplate is described in full; the executors' own template (rarer) at its top level only,
# which keeps the CRD well under the size an object may have (operator/crd/pod_template_schema.py).
_POD_TEMPLATES = {("podTemplate",): None, ("spark", "executors", "podTemplate"): 1}


def _with_pod_spec_schemas(schema: dict[str, Any]) -> None:
    """The pod templates' `spec` (an open mapping in the model) gets the upstream PodSpec schema."""
    for path, described in _POD_TEMPLATES.items():
        node = schema
        for name in path:
            node = node["properties"][name]
        node["properties"]["spec"] = pod_spec_schema(described)


def spec_schema() -> dict[str, Any]:
    raw = JobSpec.model_json_schema(by_alias=True)
    schema = to_structural(raw, raw.get("$defs", {}))
    _default_sections(JobSpec, schema)
    _with_pod_spec_schemas(schema)
    return schema


def _without_defaults(node: Any) -> Any:
    """The status is written by the operator alone: a schema default would only make the API
    server fill keys into every stored status that the operator did not write."""
    if isinstance(node, dict):
        return {k: _without_defaults(v) for k, v in node.items() if k != "default"}
    if isinstance(node, list):
        return [_without_defaults(v) for v in node]
    return node


def status_schema() -> dict[str, Any]:
    """The status contract (docs/design.md §9), from the model the operator decides on
    (status_model.JobStatus; what stays open-ended there says why)."""
    raw = JobStatus.model_json_schema(by_alias=True)
    return _without_defaults(to_structural(raw, raw.get("$defs", {})))


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
    header = "# Generated from sparkpoint.runtime.spec and sparkpoint.operator.decisions.status_model by `python -m sparkpoint.operator.crd`; do not edit.\n"
    return header + yaml.safe_dump(build_crd(), sort_keys=False, width=100)


if __name__ == "__main__":
    sys.stdout.write(render())
