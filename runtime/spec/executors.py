"""The spec's sections for Spark executors on Kubernetes (spark.master k8s, docs/design.md §9):
`spark.executors` (a fixed count, or dynamic allocation) and `checkpoint.hotVolume`, the volume the
driver and its executors share. Part of the spec model (sparkpoint.runtime.spec exports them); every
cross-field rule is a validator and a CEL rule with the same message, as in job.py.
"""

from __future__ import annotations

from typing import Annotated, Any, Literal

from pydantic import (
    ConfigDict,
    Field,
    SerializerFunctionWrapHandler,
    StringConstraints,
    field_validator,
    model_serializer,
    model_validator,
)

from .pod_template import ExecutorPodTemplate, pod_template_document
from .rules import (
    EXECUTOR_MIN_MEMORY,
    MEMORY_PATTERN,
    SUBDOMAIN_PATTERN,
    SpecModel,
    cel,
    duration_at_least,
    quantity_at_least,
)

DEFAULT_INSTANCES = 2  # executors when neither instances nor dynamic is given
INSTANCES_OR_DYNAMIC = ("instances and dynamic are mutually exclusive: a fixed executor count, or dynamic "
                        "allocation between dynamic.min and dynamic.max")
MIN_NOT_ABOVE_MAX = "min must not be greater than max"


class DynamicAllocation(SpecModel):
    """Spark's dynamic allocation with shuffle tracking (Kubernetes has no external shuffle service):
    Spark adds executors while tasks wait (a backlog) and releases one that ran no task for
    idleTimeout, between min and max executors."""

    # A streaming query always has a next batch: one executor kept spares each batch after an idle
    # spell an executor pod's start; 0 is allowed.
    min: Annotated[int, Field(ge=0, le=1000)] = 1
    max: Annotated[int, Field(ge=1, le=1000)]
    idle_timeout: duration_at_least("1s") = "60s"

    # has(): the API server checks the rule before the field's own default fills min in.
    model_config = ConfigDict(json_schema_extra={"x-kubernetes-validations": [
        cel("!has(self.min) || self.min <= self.max", MIN_NOT_ABOVE_MAX, ".min")]})

    @model_validator(mode="after")
    def _min_not_above_max(self) -> DynamicAllocation:
        if self.min > self.max:
            raise ValueError(MIN_NOT_ABOVE_MAX)
        return self


class ExecutorsSpec(SpecModel):
    # Executor pods started by Spark's Kubernetes backend (spark.master: k8s), each running the
    # job's image with this many task slots and this JVM heap (Spark adds its memory overhead).
    # Either a fixed count (instances; 2 when neither is given) or dynamic allocation.
    instances: Annotated[int, Field(ge=1, le=1000)] | None = None
    dynamic: DynamicAllocation | None = None
    cores: Annotated[int, Field(ge=1, le=64)] = 1
    memory: Annotated[str, StringConstraints(pattern=MEMORY_PATTERN),
                      *quantity_at_least(EXECUTOR_MIN_MEMORY)] = "1Gi"
    # The executors' pod template when it differs from spec.podTemplate (which executors get
    # otherwise); its main container is `executor` (docs/design.md §9).
    pod_template: ExecutorPodTemplate | None = None  # type: ignore[valid-type]

    model_config = ConfigDict(json_schema_extra={"x-kubernetes-validations": [
        cel("!has(self.instances) || !has(self.dynamic)", INSTANCES_OR_DYNAMIC, ".dynamic")]})

    @field_validator("pod_template")
    @classmethod
    def _empty_template_is_none(cls, template: Any) -> Any:
        return template if pod_template_document(template) else None

    @model_validator(mode="after")
    def _instances_or_dynamic(self) -> ExecutorsSpec:
        if self.instances is not None and self.dynamic is not None:
            raise ValueError(INSTANCES_OR_DYNAMIC)
        if self.dynamic is None and self.instances is None:
            self.instances = DEFAULT_INSTANCES
        return self

    @model_serializer(mode="wrap")
    def _without_the_unused_mode(self, handler: SerializerFunctionWrapHandler) -> dict[str, Any]:
        """A fixed count dumps as before `dynamic` existed ({instances, cores, memory}): the operator's
        spec key hashes the dump, and a new null key would make every running executors job upgrade
        (a new pod) when the operator is upgraded. The CRD's schema is the validation schema: unchanged."""
        doc = handler(self)
        for key in ("dynamic", "instances", "podTemplate"):
            if doc.get(key, 0) is None:
                del doc[key]
        return doc


class ClaimSource(SpecModel):
    claim_name: Annotated[str, StringConstraints(pattern=SUBDOMAIN_PATTERN, max_length=253)]


class HostPathSource(SpecModel):
    path: Annotated[str, StringConstraints(pattern=r"^/.*$", max_length=4096)]
    type: Literal["Directory", "DirectoryOrCreate"] = "Directory"


HOT_VOLUME_ONE_SOURCE = "set exactly one of persistentVolumeClaim and hostPath"


class HotVolume(SpecModel):
    """Where the hot dir lives when executors share it (Kubernetes volume sources, as in a pod):
    a ReadWriteMany claim in production; hostPath on a one-node test cluster (Pod Security
    `restricted` refuses hostPath). Each attempt works in its own subdirectory (docs/design.md §9)."""

    persistent_volume_claim: ClaimSource | None = None
    host_path: HostPathSource | None = None

    model_config = ConfigDict(json_schema_extra={"x-kubernetes-validations": [
        cel("has(self.persistentVolumeClaim) != has(self.hostPath)", HOT_VOLUME_ONE_SOURCE)]})

    @model_validator(mode="after")
    def _one_source(self) -> HotVolume:
        if (self.persistent_volume_claim is None) == (self.host_path is None):
            raise ValueError(HOT_VOLUME_ONE_SOURCE)
        return self

    def volume_source(self) -> dict[str, Any]:
        """The pod's volume entry without its name: {"persistentVolumeClaim": {...}} or {"hostPath": {...}}."""
        return self.model_dump(by_alias=True, exclude_none=True, mode="json")

    def describe(self) -> str:
        """"claim NAME" or "hostPath PATH", for messages."""
        if self.persistent_volume_claim is not None:
            return f"claim {self.persistent_volume_claim.claim_name}"
        return f"hostPath {self.host_path.path}" if self.host_path else "?"
