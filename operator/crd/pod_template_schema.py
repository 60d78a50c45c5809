"""The upstream schema of a Kubernetes pod template (io.k8s.api.core.v1.PodTemplateSpec's `spec`, a
PodSpec) for the CRD's spec.podTemplate, so `kubectl explain streamingjob.spec.podTemplate.spec` and
editors know every field. Generated at `make crd` time from the models of the pinned kubernetes
client (pyproject.toml), which carry the API's OpenAPI definitions with their descriptions; the
CRD (crds/streamingjob.yaml) is the generated file and a test keeps it current.

What differs from the upstream definition, and why:
- `containers` is not required: a template may only add scheduling fields; the operator's own
  containers are always there.
- Quantities (resources, sizeLimit, divisor, overhead) and ports-or-names are int-or-string as
  upstream (the client's models type them as strings).
- Lists the CEL rules of spec.podTemplate walk get a maxItems bound, so the API server's cost
  estimate of those rules stays within its budget (docs/design.md §9).
- Descriptions are kept to DESCRIBED_DEPTH levels and the volume sources outside COMMON_VOLUMES are
  `x-kubernetes-preserve-unknown-fields` objects: the full tree, described at every level, is over
  1 MiB, beyond what a CRD (an etcd object) may be. A field below that depth is still checked by the
  kubelet's API when the operator creates the pod, which names it in the job's Event.
"""

from __future__ import annotations

import re
from typing import Any

# How deep (in object levels below the pod spec) descriptions are kept for `kubectl explain`.
DESCRIBED_DEPTH = 3
# Volume sources described in full; any other (cloud disks, flocker, ...) stays an open object.
COMMON_VOLUMES = {"name", "configMap", "secret", "emptyDir", "persistentVolumeClaim", "projected", "csi",
                  "downwardAPI", "ephemeral", "hostPath", "nfs", "image"}
# Bounds for the lists CEL rules iterate (the API server estimates a rule's cost from them).
MAX_ITEMS = {"containers": 32, "initContainers": 32, "env": 256, "envFrom": 64, "volumeMounts": 64,
             "ports": 64, "volumes": 128}
_QUANTITY_FIELDS = {"sizeLimit", "divisor"}
_QUANTITY_MAPS = {"limits", "requests", "overhead"}
_BOILERPLATE = re.compile(r"\s*Attributes:\s*\n.*", re.S)


def _description(text: str | None) -> str | None:
    if not text:
        return None
    text = _BOILERPLATE.sub("", text).strip()
    return text or None


def _resolve(node: dict[str, Any], defs: dict[str, Any]) -> dict[str, Any]:
    if "$ref" in node:
        return {**defs[node["$ref"].rsplit("/", 1)[1]], **{k: v for k, v in node.items() if k != "$ref"}}
    return node


def _convert(node: dict[str, Any], defs: dict[str, Any], name: str, depth: int,
             described: int = DESCRIBED_DEPTH) -> dict[str, Any]:
    node = _resolve(node, defs)
    description = node.get("description")
    if "anyOf" in node:
        options = [_resolve(o, defs) for o in node["anyOf"] if o.get("type") != "null"]
        kinds = sorted(o.get("type", "") for o in options)
        if kinds == ["integer", "string"]:
            out: dict[str, Any] = {"x-kubernetes-int-or-string": True}
            if depth <= described and _description(description):
                out["description"] = _description(description)
            return out
        if len(options) != 1:
            raise ValueError(f"{name}: a union of {kinds} has no structural schema")
        node = {**options[0], "description": description or options[0].get("description")}
    out = {}
    if depth <= described and _description(node.get("description")):
        out["description"] = _description(node.get("description"))
    kind = node.get("type")
    if name in _QUANTITY_FIELDS and kind == "string":
        return {**out, "x-kubernetes-int-or-string": True}
    if kind == "object" or "properties" in node:
        out["type"] = "object"
        props = node.get("properties")
        extra = node.get("additionalProperties")
        if props:
            out["properties"] = {key: _convert(sub, defs, key, depth + 1, described) for key, sub in sorted(props.items())}
            required = [r for r in node.get("required", []) if r in props]
            if required:
                out["required"] = required
        elif isinstance(extra, dict):
            value = ({"x-kubernetes-int-or-string": True} if name in _QUANTITY_MAPS
                     else _convert(extra, defs, name, depth + 1, described))
            value.pop("description", None)
            out["additionalProperties"] = value
        else:
            out["x-kubernetes-preserve-unknown-fields"] = True
    elif kind == "array":
        out["type"] = "array"
        out["items"] = _convert(node.get("items", {}), defs, name, depth, described)
        if name in MAX_ITEMS:
            out["maxItems"] = MAX_ITEMS[name]
    elif kind in ("string", "integer", "boolean", "number"):
        out["type"] = kind
        if "format" in node:
            out["format"] = node["format"]
    else:
        out["x-kubernetes-preserve-unknown-fields"] = True
    return out


def _open_uncommon_volumes(pod_spec: dict[str, Any]) -> None:
    volume = pod_spec["properties"]["volumes"]["items"]
    for key in list(volume["properties"]):
        if key not in COMMON_VOLUMES:
            volume["properties"][key] = {"type": "object", "x-kubernetes-preserve-unknown-fields": True,
                                         **({"description": d} if (d := volume["properties"][key].get(
                                             "description")) else {})}


def pod_spec_schema(described: int | None = None) -> dict[str, Any]:
    """The structural schema of a pod template's spec (upstream PodSpec, as described above), with
    descriptions `described` levels deep (DESCRIBED_DEPTH unless given)."""
    # Imported here: the client's models cost seconds to import, and only `make crd` needs them.
    from kubernetes.client.models.v1_pod_spec import V1PodSpec

    raw = V1PodSpec.model_json_schema(by_alias=True)
    schema = _convert(raw, raw.get("$defs", {}), "spec", 0, DESCRIBED_DEPTH if described is None else described)
    schema.pop("required", None)  # containers: the operator's own are always there
    _open_uncommon_volumes(schema)
    return schema
