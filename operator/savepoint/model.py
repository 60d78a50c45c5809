"""The StreamingJobSavepoint resource: take a savepoint of a job by creating one (as Flink's operator
has FlinkStateSnapshot). The CRD (crds/streamingjobsavepoint.yaml) is generated from these models
by sparkpoint.operator.savepoint.crd, so the two cannot drift.

Defaults, decided:
- `retain: true`: deleting the resource keeps the savepoint's data unless the spec opts in to
  deleting it. A savepoint is the restore point of last resort; Flink's operator also keeps the data
  of the snapshots it creates unless configured otherwise (savepoint.dispose-on-delete=false), and
  a StreamingJob's own deletion always keeps savepoints.
- No owner reference to the job: a savepoint usually outlives its job (delete the job, re-create
  it with restoreFrom.savepoint). Garbage collection by owner would delete the resource, and with
  retain: false its data, exactly when it is needed.
"""

from __future__ import annotations

from typing import Annotated, Any, Literal

from pydantic import BaseModel, ConfigDict, Field, StringConstraints, ValidationError

from sparkpoint.runtime.spec import API_GROUP, API_VERSION, NAME_PATTERN, SpecModel
from sparkpoint.runtime.store import check_savepoint_name

from ..store.ref import StorageRef

KIND = "StreamingJobSavepoint"
PLURAL = "streamingjobsavepoints"
# A savepoint name must be a valid store name (layout.check_savepoint_name) AND a valid
# StreamingJob restoreFrom.savepoint (a DNS label); a DNS label of at most 63 characters is both.
SAVEPOINT_NAME_MAX = 63
DnsLabel = Annotated[str, StringConstraints(pattern=NAME_PATTERN, max_length=SAVEPOINT_NAME_MAX)]

PENDING, IN_PROGRESS, COMPLETED, FAILED = "Pending", "InProgress", "Completed", "Failed"
TERMINAL = (COMPLETED, FAILED)


class _DnsLabel(BaseModel):
    value: DnsLabel


class SavepointSpec(SpecModel):
    # The StreamingJob (same namespace) to take the savepoint of.
    job_name: DnsLabel
    # The savepoint's name in the store (savepoints/<name>/); defaults to the resource's name.
    savepoint_name: DnsLabel | None = None
    # Keep the savepoint's data in the store when this resource is deleted.
    retain: bool = True

    # A snapshot is immutable: a different savepoint is a different resource.
    model_config = ConfigDict(json_schema_extra={"x-kubernetes-validations": [{
        "rule": "self == oldSelf", "message": "spec is immutable: create a new StreamingJobSavepoint"}]})


class Condition(SpecModel):
    type: str
    status: Literal["True", "False", "Unknown"]
    reason: str | None = None
    message: str | None = None
    observed_generation: int | None = None
    last_transition_time: str | None = None


class SavepointStatus(SpecModel):
    model_config = ConfigDict(extra="ignore", strict=False)  # kopf keeps its own fields here too

    state: Literal["Pending", "InProgress", "Completed", "Failed"] = PENDING
    id: str | None = None  # the savepoint's name in the store, once completed
    size_bytes: int | None = None
    completed_at: str | None = None
    checkpoint: str | None = None  # the checkpoint it copies
    error: str | None = None
    observed_generation: int | None = None
    conditions: list[Condition] = Field(default_factory=list)
    # Bookkeeping that lets a restarted operator continue: the runtime request it follows, the pod
    # (attempt) that request lives in, when it was triggered, how often, and where the data goes.
    request_id: str | None = None
    pod: str | None = None
    triggered_at: str | None = None
    triggers: int = 0
    storage: StorageRef | None = None
    # Completed from a savepoint that was in the store before this resource triggered anything (an
    # existing name adopted): its data is not this resource's to delete.
    adopted: bool = False


class SavepointResourceError(ValueError):
    """An invalid StreamingJobSavepoint; the message names the field."""


def _errors(err: ValidationError, root: str) -> str:
    return "; ".join(".".join([root, *(str(p) for p in e["loc"])]) + ": " + e["msg"].removeprefix("Value error, ")
                     for e in err.errors())


def parse_spec(data: Any) -> SavepointSpec:
    if not isinstance(data, dict):
        raise SavepointResourceError(f"spec: expected a mapping, got {type(data).__name__}")
    try:
        return SavepointSpec.model_validate(data)
    except ValidationError as err:
        raise SavepointResourceError(_errors(err, "spec")) from None


def parse_status(data: Any) -> SavepointStatus:
    """A status this operator wrote; anything unreadable starts over (it is bookkeeping, and the
    store, not the status, says whether the savepoint exists)."""
    try:
        return SavepointStatus.model_validate(data or {})
    except ValidationError:
        return SavepointStatus()


def savepoint_name(resource_name: str, spec: SavepointSpec) -> str:
    """The name in the store: spec.savepointName, else the resource's name (which must then qualify)."""
    name = spec.savepoint_name or resource_name
    try:
        _DnsLabel(value=name)
        return check_savepoint_name(name)
    except (ValidationError, ValueError):
        raise SavepointResourceError(
            f"metadata.name: {resource_name!r} is not a valid savepoint name (a DNS label of at most "
            f"{SAVEPOINT_NAME_MAX} characters); set spec.savepointName") from None


# Root-level CEL rule: the resource's name is the default savepoint name, so it must qualify too.
NAME_RULE = {
    "rule": f"has(self.spec.savepointName) || (size(self.metadata.name) <= {SAVEPOINT_NAME_MAX} && "
            f"self.metadata.name.matches('{NAME_PATTERN}'))",
    "message": "metadata.name is not a valid savepoint name (a DNS label of at most 63 characters); "
               "set spec.savepointName",
}

__all__ = ["API_GROUP", "API_VERSION", "COMPLETED", "FAILED", "IN_PROGRESS", "KIND", "NAME_RULE", "PENDING",
           "PLURAL", "Condition", "SavepointResourceError", "SavepointSpec", "SavepointStatus", "StorageRef", "TERMINAL",
           "parse_spec", "parse_status", "savepoint_name"]
