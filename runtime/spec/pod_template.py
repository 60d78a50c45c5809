"""spec.podTemplate and spec.spark.executors.podTemplate: a Kubernetes PodTemplateSpec the operator
merges into the pods it creates (docs/design.md §9, "Pod templates"). Part of the spec model.

The template's pod spec stays the user's mapping (the API server checks it against the upstream
PodSpec schema in the CRD, operator/crd/pod_template_schema.py); the model parses the metadata and
checks what the merge (runtime/spec/pod_merge.py) must refuse: the fields the operator owns. Each
refusal is one OWNED_RULES entry, stated twice as every rule of the spec model is: a Python check
and a CEL rule with the same message, which names the field.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from pydantic import ConfigDict, Field, field_validator, model_validator

from .rules import API_LABEL_PREFIX, SpecModel, cel

# The containers of the job's pod the template may name (matched by name), per pod kind.
JOB_CONTAINERS = ("runtime", "gc")
EXECUTOR_CONTAINERS = ("executor",)
# What the operator sets in its own containers and pods (operator/kube/builders.py,
# runtime/spark/executors.py; tests/runtime/test_pod_template.py keeps them in step).
OWNED_VOLUMES = ("hot", "job", "control-token", "tmp", "gc-tmp")
OWNED_MOUNT_PATHS = ("/var/lib/sparkpoint", "/etc/sparkpoint", "/var/run/sparkpoint/control", "/tmp")
OWNED_PORT_NAMES = ("control", "metrics", "gc-metrics", "spark-ui", "spark-driver", "spark-blocks")
OWNED_PORTS = (8080, 9091, 9090, 4040, 7078, 7079)
OWNED_ENV = ("POD_IP", "HOME", "AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY", "AWS_REGION")
OWNED_ENV_PREFIX = "SPARKPOINT_"
# The labels the operator, its Service and its NetworkPolicies select on; every sparkpoint.dev/ key.
OWNED_LABELS = ("app.kubernetes.io/name", "app.kubernetes.io/instance", "app.kubernetes.io/component",
                "app.kubernetes.io/managed-by")
OWNED_CONTAINER_FIELDS = {
    "image": "set spec.image instead",
    "command": "the operator runs sparkpoint",
    "args": "the operator runs sparkpoint",
    "workingDir": "the operator runs sparkpoint",
    "livenessProbe": "the operator probes its control port",
    "readinessProbe": "the operator probes its control port",
    "startupProbe": "the operator probes its control port",
}
OWNED_POD_FIELDS = {
    "restartPolicy": "set spec.restart.policy instead",
    "terminationGracePeriodSeconds": "the operator stops a pod with a drain that it waits for",
    "serviceAccountName": "the operator's --job-service-account/--driver-service-account set it",
    "serviceAccount": "the operator's --job-service-account/--driver-service-account set it",
    "automountServiceAccountToken": "the operator mounts a token only where Spark's backend needs it",
}
METADATA_KEYS = ("labels", "annotations")
MAX_KEYS = 256  # labels or annotations of a template (a bound for the CEL rules' cost estimate)


def _list(values: tuple[Any, ...]) -> str:
    return "[" + ", ".join(f"'{v}'" if isinstance(v, str) else str(v) for v in values) + "]"


@dataclass(frozen=True)
class OwnedRule:
    """One operator-owned field: `refuses(template)` in Python and `rule` in CEL, one message."""

    message: str
    rule: str
    refuses: Callable[[dict[str, Any]], bool]
    field_path: str

    def cel(self) -> dict[str, str]:
        return cel(self.rule, self.message, self.field_path)


def _map(value: Any) -> dict[str, Any]:
    return value if isinstance(value, dict) else {}


def _items(value: Any) -> list[dict[str, Any]]:
    """The mappings of a list (a mistyped entry is the API server's to refuse, by the PodSpec schema)."""
    return [item for item in value if isinstance(item, dict)] if isinstance(value, list) else []


def _pod(template: dict[str, Any], key: str) -> list[dict[str, Any]]:
    return _items(_map(template.get("spec")).get(key))


def _containers(template: dict[str, Any], names: tuple[str, ...]) -> list[dict[str, Any]]:
    return [c for c in _pod(template, "containers") if c.get("name") in names]


def _in_each(template: dict[str, Any], names: tuple[str, ...], key: str) -> list[dict[str, Any]]:
    return [item for c in _containers(template, names) for item in _items(c.get(key))]


def _container_sets(field: str, names: tuple[str, ...]) -> Callable[[dict[str, Any]], bool]:
    return lambda template: any(field in c for c in _containers(template, names))


def _pod_sets(field: str) -> Callable[[dict[str, Any]], bool]:
    return lambda template: field in _map(template.get("spec"))


def _container_rules(names: tuple[str, ...]) -> list[OwnedRule]:
    which = "/".join(names)
    ours = f"!has(self.spec) || !has(self.spec.containers) || self.spec.containers.all(c, !(c.name in {_list(names)}) || "
    rules = [OwnedRule(f"spec.containers[{which}].{name} is set by Sparkpoint: {why}", f"{ours}!has(c.{name}))",
                       _container_sets(name, names), ".spec.containers")
             for name, why in OWNED_CONTAINER_FIELDS.items()]
    env_ok = f"!(e.name in {_list(OWNED_ENV)}) && !e.name.startsWith('{OWNED_ENV_PREFIX}')"
    rules.append(OwnedRule(
        f"spec.containers[{which}].env: {', '.join(OWNED_ENV)} and {OWNED_ENV_PREFIX}* are set by Sparkpoint",
        f"{ours}!has(c.env) || c.env.all(e, {env_ok}))",
        lambda t: any(e.get("name") in OWNED_ENV or str(e.get("name", "")).startswith(OWNED_ENV_PREFIX)
                      for e in _in_each(t, names, "env")), ".spec.containers"))
    rules.append(OwnedRule(
        f"spec.containers[{which}].ports: the ports {', '.join(map(str, OWNED_PORTS))} and the names "
        f"{', '.join(OWNED_PORT_NAMES)} are Sparkpoint's",
        f"{ours}!has(c.ports) || c.ports.all(p, !(p.containerPort in {_list(OWNED_PORTS)}) && "
        f"(!has(p.name) || !(p.name in {_list(OWNED_PORT_NAMES)}))))",
        lambda t: any(p.get("containerPort") in OWNED_PORTS or p.get("name") in OWNED_PORT_NAMES
                      for p in _in_each(t, names, "ports")), ".spec.containers"))
    rules.append(OwnedRule(
        f"spec.containers[{which}].volumeMounts: the volumes {', '.join(OWNED_VOLUMES)} and the paths "
        f"{', '.join(OWNED_MOUNT_PATHS)} are Sparkpoint's",
        f"{ours}!has(c.volumeMounts) || c.volumeMounts.all(m, !(m.name in {_list(OWNED_VOLUMES)}) && "
        f"!(m.mountPath in {_list(OWNED_MOUNT_PATHS)})))",
        lambda t: any(m.get("name") in OWNED_VOLUMES or m.get("mountPath") in OWNED_MOUNT_PATHS
                      for m in _in_each(t, names, "volumeMounts")), ".spec.containers"))
    cpu_memory = ("(!has(c.resources.{0}) || (!('cpu' in c.resources.{0}) && !('memory' in c.resources.{0})))")
    rules.append(OwnedRule(
        f"spec.containers[{which}].resources: cpu and memory are set by Sparkpoint (spec.spark.resources, "
        "spec.spark.executors); other resources may be added",
        f"{ours}!has(c.resources) || ({cpu_memory.format('requests')} && {cpu_memory.format('limits')}))",
        lambda t: any(k in _map(_map(c.get("resources")).get(kind)) for c in _containers(t, names)
                      for kind in ("requests", "limits") for k in ("cpu", "memory")), ".spec.containers"))
    return rules


def _pod_rules(names: tuple[str, ...]) -> list[OwnedRule]:
    spec = "!has(self.spec) || "
    rules = [OwnedRule(f"spec.{name} is set by Sparkpoint: {why}", f"{spec}!has(self.spec.{name})",
                       _pod_sets(name), f".spec.{name}")
             for name, why in OWNED_POD_FIELDS.items()]
    rules.append(OwnedRule(
        f"spec.volumes: the volume names {', '.join(OWNED_VOLUMES)} are Sparkpoint's",
        f"{spec}!has(self.spec.volumes) || self.spec.volumes.all(v, !(v.name in {_list(OWNED_VOLUMES)}))",
        lambda t: any(v.get("name") in OWNED_VOLUMES for v in _pod(t, "volumes")),
        ".spec.volumes"))
    rules.append(OwnedRule(
        f"spec.initContainers: the names {', '.join(names)} are Sparkpoint's containers",
        f"{spec}!has(self.spec.initContainers) || self.spec.initContainers.all(c, !(c.name in {_list(names)}))",
        lambda t: any(c.get("name") in names for c in _pod(t, "initContainers")),
        ".spec.initContainers"))
    meta = "!has(self.metadata) || "
    rules.append(OwnedRule(
        f"metadata.labels: {', '.join(OWNED_LABELS)} and {API_LABEL_PREFIX}* are set by Sparkpoint "
        "(it selects its pods by them)",
        f"{meta}!has(self.metadata.labels) || self.metadata.labels.all(k, !(k in {_list(OWNED_LABELS)}) && "
        f"!k.startsWith('{API_LABEL_PREFIX}'))",
        lambda t: any(k in OWNED_LABELS or k.startswith(API_LABEL_PREFIX)
                      for k in _map(_map(t.get("metadata")).get("labels"))), ".metadata.labels"))
    rules.append(OwnedRule(
        f"metadata.annotations: {API_LABEL_PREFIX}* are set by Sparkpoint",
        f"{meta}!has(self.metadata.annotations) || self.metadata.annotations.all(k, "
        f"!k.startsWith('{API_LABEL_PREFIX}'))",
        lambda t: any(k.startswith(API_LABEL_PREFIX) for k in _map(_map(t.get("metadata")).get("annotations"))),
        ".metadata.annotations"))
    return rules


def owned_rules(names: tuple[str, ...]) -> list[OwnedRule]:
    return [*_container_rules(names), *_pod_rules(names)]


METADATA_MESSAGE = ("metadata: only labels and annotations may be set (the operator names its pods and sets "
                    "their owner references)")


class TemplateMetadata(SpecModel):
    # Any other key is an unknown field to the API server: kubectl (strict field validation, its
    # default) is refused naming it; a client that asks for no validation has it pruned with a warning.
    labels: dict[str, str] = Field(default_factory=dict, max_length=MAX_KEYS)
    annotations: dict[str, str] = Field(default_factory=dict, max_length=MAX_KEYS)

    @model_validator(mode="before")
    @classmethod
    def _labels_and_annotations_only(cls, data: Any) -> Any:
        if isinstance(data, dict) and any(k not in METADATA_KEYS for k in data):
            raise ValueError(METADATA_MESSAGE)
        return data


def _pruned(value: Any) -> Any:
    """The template without nulls and empty lists, and without empty mappings at the pod level:
    `tolerations: []` or `nodeSelector: {}` says what leaving it out says, so a template differing
    only in such defaults is the same template (the spec key). A nested `{}` can mean something
    (`emptyDir: {}`) and stays."""
    def drop(node: Any) -> Any:
        if isinstance(node, dict):
            return {k: drop(v) for k, v in node.items() if v is not None and v != []}
        if isinstance(node, list):
            return [drop(v) for v in node]
        return node
    return {k: v for k, v in drop(value).items() if v != {}}


def _template_model(names: tuple[str, ...]) -> type[SpecModel]:
    rules = owned_rules(names)

    class Template(SpecModel):
        metadata: TemplateMetadata | None = None
        # A PodSpec; the CRD carries its upstream schema (operator/crd/streamingjob.py).
        spec: dict[str, Any] | None = None

        model_config = ConfigDict(json_schema_extra={
            "x-kubernetes-validations": [r.cel() for r in rules]})  # type: ignore[misc]

        @field_validator("spec", mode="before")
        @classmethod
        def _canonical(cls, spec: Any) -> Any:
            return (_pruned(spec) or None) if isinstance(spec, dict) else spec

        @model_validator(mode="after")
        def _operator_owned(self) -> Template:
            doc = self.document()
            refused = [r.message for r in rules if r.refuses(doc)]
            if refused:
                raise ValueError("; ".join(refused))
            if self.metadata is not None and not (self.metadata.labels or self.metadata.annotations):
                self.metadata = None
            return self

        def document(self) -> dict[str, Any]:
            """The template as a Kubernetes PodTemplateSpec mapping."""
            return self.model_dump(by_alias=True, exclude_none=True, exclude_defaults=True, mode="json")

    return Template


PodTemplate = _template_model(JOB_CONTAINERS)
PodTemplate.__name__ = PodTemplate.__qualname__ = "PodTemplate"
ExecutorPodTemplate = _template_model(EXECUTOR_CONTAINERS)
ExecutorPodTemplate.__name__ = ExecutorPodTemplate.__qualname__ = "ExecutorPodTemplate"


def pod_template_document(template: Any) -> dict[str, Any]:
    """A parsed template as a PodTemplateSpec mapping; {} for none."""
    return template.document() if template is not None else {}
