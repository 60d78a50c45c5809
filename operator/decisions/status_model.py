"""A StreamingJob's status as a typed model (JobStatus): what the machine decides on and writes.

The CRD's status schema is generated from it (crd.py), as the spec's is from JobSpec. On the wire
it is camelCase, as before: `document()` gives the same JSON the dict-based code wrote, so statuses
of running clusters parse and a round that changes nothing writes nothing.

Presence rules (the status is written as JSON merge patches, where null deletes a key):
- a field is written only if it was read from the stored status or assigned since (exclude_unset),
  so defaults such as `checkpointHealthy: true` never appear in a status that did not have them;
- None means absent: `clear()` (or assigning None) removes a key on the next write.
Parsing ignores keys it does not know and drops a value it cannot read (with a warning) rather than
the whole status: an operator must never lose an attempt number to one odd value.
"""

from __future__ import annotations

import logging
from typing import Annotated, Any, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError, WithJsonSchema
from pydantic.alias_generators import to_camel

from sparkpoint.runtime.spec import RestoreFrom

log = logging.getLogger("sparkpoint.operator")

Phase = Literal["Pending", "Running", "Recovering", "Upgrading", "Suspended", "Failed", "Finished"]
IsoTime = Annotated[str, WithJsonSchema({"type": "string", "format": "date-time"})]


class StatusModel(BaseModel):
    model_config = ConfigDict(alias_generator=to_camel, populate_by_name=True, extra="ignore")

    def document(self) -> dict[str, Any]:
        """The wire form (camelCase), with only the keys that are present (see the module's rules)."""
        return self.model_dump(by_alias=True, exclude_unset=True, exclude_none=True, mode="json")

    def clear(self, *names: str) -> None:
        """Remove fields (snake_case names): each reads as its default and is not written."""
        for name in names:
            setattr(self, name, type(self).model_fields[name].get_default(call_default_factory=True))
            self.model_fields_set.discard(name)


class Point(StatusModel):
    """A restore point as the operator records it: one of a RestoreFrom's sources, or `newestIn`
    (the newest checkpoint in that storage URL: a rollback across a storage change)."""

    checkpoint: str | None = None
    savepoint: str | None = None
    fresh: str | None = None
    newest_in: str | None = None

    @classmethod
    def of(cls, point: RestoreFrom | None) -> Point | None:
        return cls.model_validate(point.model_dump(exclude_none=True)) if point is not None else None

    def restore_from(self) -> RestoreFrom:
        return RestoreFrom(checkpoint=self.checkpoint, savepoint=self.savepoint, fresh=self.fresh)

    def tag(self) -> str | None:
        """`checkpoint:<id>` / `savepoint:<name>` / `fresh:<name>`: how blame and the runtime name a point."""
        for kind in ("checkpoint", "savepoint", "fresh"):
            if getattr(self, kind):
                return f"{kind}:{getattr(self, kind)}"
        return None


def same_point(a: Point | None, b: Point | None) -> bool:
    """Equal as written (a None field and a missing one are the same on the server)."""
    return (a.document() if a else None) == (b.document() if b else None)


class CheckpointRecord(StatusModel):
    """A completed checkpoint (status.latestCheckpoint, status.checkpoints)."""

    id: str
    batch: int | None = None
    completed_at: str | None = None
    bytes: int | None = None
    new_bytes: int | None = None


class SavepointRecord(StatusModel):
    """A savepoint in the store (status.savepoints)."""

    name: str
    checkpoint: str | None = None
    batch: int | None = None
    bytes: int | None = None
    completed_at: str | None = None


class RescaleRecord(StatusModel):
    """A repartition of the job's state (spark.shufflePartitions changed), as its runtime reported it."""

    from_partitions: int | None = Field(default=None, alias="from")
    to: int | None = None
    duration_seconds: float | None = None
    attempt: int | None = None
    batch: int | None = None  # the batch Spark's repartition wrote (it reads no input)
    at: IsoTime | None = None  # when the operator saw it


class Failure(StatusModel):
    """Why the latest attempt was lost (or the job failed)."""

    reason: str | None = None
    message: str | None = None
    at: str | None = None


class Condition(StatusModel):
    type: str
    status: Literal["True", "False", "Unknown"]
    reason: str | None = None
    message: str | None = None
    observed_generation: int | None = None
    last_transition_time: IsoTime | None = None


# --- status.tracking: the operator's own bookkeeping (times as epoch seconds) --------------------
class Drain(StatusModel):
    at: float = 0.0
    restarts: int | None = None  # the runtime container's restart count when the stop was requested


class Lineage(StatusModel):
    """The restore point the runtime's history descends from, the spec restoreFrom it was chosen
    over, and the storage it belongs to."""

    point: Point | None = None
    over: Point | None = None
    storage: str | None = None


class UpgradeInFlight(StatusModel):
    rollback_point: Point | None = None


class PendingTrigger(StatusModel):
    at: float
    id: str | None = None


class PendingSavepoint(StatusModel):
    name: str
    at: float
    tries: int = 1


class CreateFailed(StatusModel):
    attempt: int | None = None
    reason: str | None = None
    message: str | None = None


class StandbyRecord(StatusModel):
    """The job's standby pod (spec.standby; decisions/standby.py) as the operator last saw it."""

    pod: str | None = None
    attempt: int | None = None  # the attempt it would be promoted as
    ready: bool | None = None  # it would be promoted now (its runtime follows the store, no error, not stale)
    checkpoint: str | None = None  # the newest checkpoint whose objects it holds
    behind_checkpoints: int | None = None  # completed checkpoints newer than that one
    message: str | None = None  # why it is not ready


class StandbyTrack(StatusModel):
    """A standby pod the operator created, and the backoff of standbys that died."""

    pod: str | None = None
    created_at: float | None = None
    unhealthy_since: float | None = None  # since when it would not be promoted (health); None: it would
    failures: int = 0  # standbys in a row that died (pod failed or gone): the next waits the backoff
    next_at: float | None = None  # no new standby before this
    promote_refused: CreateFailed | None = None  # POST /promote answered 409 for this attempt


class Tracking(StatusModel):
    """Bookkeeping that must survive an operator restart (docs/design.md §11)."""

    # the current attempt
    pod_seen: bool | None = None
    pod_ready: bool | None = None
    running_since: float | None = None
    container_restarts: int | None = None
    fallback_reported: int | None = None
    store_wait_reported: int | None = None
    create_failed: CreateFailed | None = None
    attempt_spec: str | None = None
    attempt_storage: str | None = None
    # checkpoints
    last_trigger_at: float | None = None
    pending_trigger: PendingTrigger | None = None
    checkpoint_nonce: int | None = None  # the spec.checkpoint.triggerNonce last answered with a trigger
    checkpoint_healthy: bool = True
    checkpoint_reason: str | None = None
    history_storage: str | None = None
    gc_pins: list[str] | None = None
    # spec.restartNonce the current attempt was started with (a change restarts the job)
    restart_nonce: int | None = None
    # savepoints
    savepoint_nonce: int | None = None
    pending_savepoint: PendingSavepoint | None = None
    periodic_savepoint_at: float | None = None
    pruned_savepoints: dict[str, float] | None = None
    # restore points
    restore_from: Point | None = None  # what the current attempt was created with
    attempt_point: Point | None = None  # what it was given (restoreFrom or the lineage's)
    lineage: Lineage | None = None
    restore_target: str | None = None  # a drain's savepoint
    fresh_start: str | None = None
    next_point: Point | None = None
    chosen_over: Point | None = None
    bad_restore_points: list[str] | None = None
    blamed_at_checkpoint: str | None = None
    # failures and restarts
    restart_times: list[float] | None = None
    failure_streak: int = 0
    next_attempt_at: float | None = None
    failed_generation: int | None = None
    drain: Drain | None = None
    # pods of attempts given up as lost (lost_attempt.py): deleted, they no longer hold up the next attempt
    lost_pods: list[str] | None = None
    standby: StandbyTrack | None = None  # spec.standby (decisions/standby.py)
    # upgrades
    stable_spec: str | None = None
    stable_spec_doc: dict[str, Any] | None = None  # a JobSpec document of an earlier operator version
    rejected_spec: str | None = None
    rejected_generation: int | None = None  # the generation a rollback (or its report) was for
    upgrade: UpgradeInFlight | None = None
    upgrade_deadline: float | None = None
    trial_since: float | None = None  # when the new spec's first attempt of the trial was created
    upgrade_crash_loop: int | None = None
    rollback_point: Point | None = None
    hot_node_reported: int | None = None  # the attempt whose pod could not go to status.hotVolumeNode
    # deletion (deletion.py writes these with its own patches)
    delete_drain_at: float | None = None
    delete_data_since: float | None = None


# status.tracking is bookkeeping, not contract: its keys change between operator versions, and the
# chart's CRD is not upgraded with the operator (helm never upgrades crds/), so an older CRD must
# not prune a key it does not know. Hence an open object in the schema, typed only in Python.
_OPEN_OBJECT = WithJsonSchema({"type": "object", "description": "The operator's own bookkeeping "
                               "(not a contract; its keys change between operator versions)."})


class JobStatus(StatusModel):
    """The status contract (docs/design.md, section 9) plus the operator's bookkeeping (tracking)."""

    # kopf keeps its own progress under status too (status.kopf): unknown keys are preserved.
    model_config = ConfigDict(json_schema_extra={"x-kubernetes-preserve-unknown-fields": True})

    phase: Phase | None = None
    observed_generation: int | None = None
    attempt: int = 0
    pod: str | None = None
    latest_checkpoint: CheckpointRecord | None = None
    checkpoints: list[CheckpointRecord] | None = None
    savepoints: list[SavepointRecord] | None = None
    restarts: int = 0
    local_recoveries: int = 0
    next_attempt_at: IsoTime | None = None  # while Recovering: when the next attempt starts (its backoff)
    last_failure: Failure | None = None
    # How the current attempt restored, as its runtime reports it (GET /status "restore"): the
    # runtime's document, open-ended.
    restore: dict[str, Any] | None = None
    last_rescale: RescaleRecord | None = None  # the newest repartition of the state (issue 26)
    # A hostPath hot volume: the node whose disk holds the job's directory; every later pod of the
    # job runs there (operator/decisions/hot_node.py).
    hot_volume_node: str | None = None
    standby: StandbyRecord | None = None  # spec.standby: the pod that would be promoted (decisions/standby.py)
    tracking: Annotated[Tracking, _OPEN_OBJECT] = Field(default_factory=Tracking)
    conditions: list[Condition] | None = Field(default=None, json_schema_extra={
        "x-kubernetes-list-type": "map", "x-kubernetes-list-map-keys": ["type"]})


def parse_status(doc: dict[str, Any] | None) -> JobStatus:
    """A stored status (kopf's keys and unknown ones ignored). A value that does not fit the model
    (hand-edited, or an operator version that wrote it differently) is dropped, not the status."""
    doc = _copy(doc or {})
    for _ in range(100):
        try:
            return JobStatus.model_validate(doc)
        except ValidationError as err:
            loc = err.errors()[0]["loc"]
            log.warning("status value dropped", extra={"field": ".".join(map(str, loc)), "error": str(err)[:300]})
            _drop(doc, list(loc))
    return JobStatus()


def _drop(doc: dict[str, Any], path: list[Any]) -> None:
    """Delete the value at `path`, or (a required field missing) the nearest enclosing one that exists."""
    while path:
        parent: Any = doc
        for key in path[:-1]:
            parent = parent.get(key) if isinstance(parent, dict) else (
                parent[key] if isinstance(parent, list) and isinstance(key, int) and key < len(parent) else None)
        key = path.pop()
        if isinstance(parent, dict) and key in parent:
            del parent[key]
            return
        if isinstance(parent, list) and isinstance(key, int) and key < len(parent):
            del parent[key]
            return


def _copy(value: Any) -> Any:
    if isinstance(value, dict):
        return {k: _copy(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_copy(v) for v in value]
    return value
