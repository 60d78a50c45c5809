"""What the state machine sees (Observed) and what it may ask for (actions): plain data, no I/O.

The operator keeps no state beyond the CR status and the store (docs/design.md §11): everything the
machine needs to remember between reconciles lives in `status`, the bookkeeping part of it under
`status.tracking` (times as epoch seconds), so after a restart the same observation gives the
same answer.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from sparkpoint.runtime.spec import JobSpec, RestoreFrom

from .failure_causes import KnownCause
from .liveness import NodeObs
from .status_model import CheckpointRecord, JobStatus, parse_status

RESTORE_FAILED_EXIT = 3  # the runtime's exit code when no restore point could be restored
RESCALE_FAILED_EXIT = 4  # the runtime's exit code when Spark refused to repartition the restored state


@dataclass(frozen=True)
class RescaleFailure:
    """Exit 4's termination message ({"rescaleFailed": {from, to, reason, error}}, runtime/cli/run.py):
    the partition counts Spark could not repartition between and its reason label."""

    source: int | None = None
    target: int | None = None
    reason: str | None = None


@dataclass(frozen=True)
class PodObs:
    """One pod of the job, reduced to what decisions depend on."""

    name: str
    attempt: int
    phase: str = "Pending"  # Pending | Running | Succeeded | Failed | Unknown
    ready: bool = False
    deleting: bool = False
    ip: str | None = None
    restart_count: int = 0  # of the runtime container (in-place restarts by the kubelet)
    last_exit_code: int | None = None  # the runtime container's latest termination, if any
    exit_code: int | None = None  # set while the runtime container is terminated now
    termination_reason: str | None = None  # of its newest termination: OOMKilled, Error, Completed
    reason: str | None = None  # pod-level reason, e.g. Evicted, NodeLost
    node_lost: bool = False
    deleting_since: float | None = None  # metadata.deletionTimestamp (epoch seconds)
    # Exit 3: the restore points (tags) the runtime could not restore, from its termination message;
    # None when it did not say (an older runtime, or no such exit).
    failed_points: tuple[str, ...] | None = None
    # Exit 4: what the runtime could not repartition, from its termination message; None when unsaid.
    rescale_failure: RescaleFailure | None = None
    # Exit 1 with a cause the operator knows (operator/decisions/failure_causes.py): reason and message, or None.
    known_cause: KnownCause | None = None
    # The uid of the StreamingJob named by the pod's controller owner reference; None without one
    # (labels and annotations anyone may set; only the operator creates pods the job controls).
    owner_uid: str | None = None
    node: str | None = None  # spec.nodeName, once scheduled
    unschedulable: str | None = None  # the scheduler's message while it cannot place the pod
    # Started as a standby (decisions/standby.py; annotation sparkpoint.dev/standby): the spec key it
    # runs and the restore point (tag) its job file held; None for a pod started as an attempt.
    standby_spec: str | None = None
    standby_point: str | None = None

    @property
    def standby(self) -> bool:
        return self.standby_spec is not None

    @property
    def can_drain(self) -> bool:
        """The runtime process is up and may answer POST /stop (Ready may flap under load: a slow
        /readyz answer is no reason to skip the final savepoint)."""
        return self.phase == "Running" and bool(self.ip) and not self.deleting and self.exit_code is None


@dataclass(frozen=True)
class CheckpointFact:
    """A completed checkpoint as status shows it (status.latestCheckpoint / status.checkpoints)."""

    id: str
    batch: int | None
    completed_at: str  # ISO-8601
    bytes: int | None = None
    new_bytes: int | None = None

    def to_record(self) -> CheckpointRecord:
        return CheckpointRecord(id=self.id, batch=self.batch, completed_at=self.completed_at,
                                bytes=self.bytes, new_bytes=self.new_bytes)

    def to_status(self) -> dict[str, Any]:
        return self.to_record().document()

    @classmethod
    def from_record(cls, rec: CheckpointRecord) -> CheckpointFact:
        return cls(id=rec.id, batch=rec.batch, completed_at=rec.completed_at or "",
                   bytes=rec.bytes, new_bytes=rec.new_bytes)


@dataclass(frozen=True)
class Observed:
    spec: JobSpec
    generation: int
    status: JobStatus  # a stored status document is parsed (as the model world and tests give it)
    pods: list[PodObs]
    now: float
    name: str = "job"  # the StreamingJob's name (pods are <name>-<attempt>)
    runtime: dict[str, Any] | None = None  # GET /status of the current pod, None if unreachable
    store_checkpoints: list[CheckpointFact] | None = None  # newest last; None: store not read
    store_savepoints: list[dict[str, Any]] | None = None  # {name, completedAt, ...}, oldest first
    deleting: bool = False
    upgrade_timeout: float = 300.0  # the operator's default; spec.upgradeTimeout wins
    # The current pod's runtime as the operator's requests found it (liveness.py): since when it has
    # not answered (None: it answers, or nothing is known yet), since when every request to it timed
    # out or found no route (refusals end that), and its node, read while it is silent (None: not read).
    runtime_silent_since: float | None = None
    runtime_unreachable_since: float | None = None
    node: NodeObs | None = None
    # spec.standby: pods started as standbys and not promoted (pod_view.split_standbys), and GET /status
    # of those whose runtime answered, by pod name.
    standbys: list[PodObs] = field(default_factory=list)
    standby_runtime: dict[str, dict[str, Any]] = field(default_factory=dict)

    def __post_init__(self) -> None:
        if not isinstance(self.status, JobStatus):
            object.__setattr__(self, "status", parse_status(self.status))


# --- actions (each small and idempotent) --------------------------------------------------------
@dataclass(frozen=True)
class CreateAttempt:
    """ConfigMap (with the chosen restore point) + Service + pod of this attempt."""

    attempt: int
    restore_from: RestoreFrom | None = None
    spec: JobSpec | None = None  # run this spec instead of the CR's (a rollback to the last stable one)


@dataclass(frozen=True)
class CreateStandby:
    """A standby pod (builders.build_standby_pod) that would be promoted as `attempt`."""

    attempt: int
    spec_key: str  # what it is started for: the spec key and restartNonce (standby.started_for)
    point: str | None  # the restore point (tag) of the job file it reads (the current attempt's)
    spec: JobSpec | None = None  # as CreateAttempt's: the stable spec after a rollback


@dataclass(frozen=True)
class PromoteStandby:
    """POST /promote {"attempt": n} to the standby pod that becomes attempt n (idempotent: 200 and
    202 are success; a 409 is recorded in status.tracking.standby.promoteRefused)."""

    pod: str
    attempt: int
    ip: str | None = None  # the pod's IP as the round saw it


@dataclass(frozen=True)
class DeletePod:
    name: str
    force: bool = False  # grace period 0: the node is lost, the pod will never report back


@dataclass(frozen=True)
class TriggerCheckpoint:
    lag: float  # seconds the trigger is late against its schedule (a metric)


@dataclass(frozen=True)
class TriggerSavepoint:
    name: str


@dataclass(frozen=True)
class DeleteSavepoint:
    """Delete a periodic savepoint's data from the store (beyond savepoint.retain)."""

    name: str


@dataclass(frozen=True)
class PinCheckpoints:
    """Write the GC sidecar's pins (the job ConfigMap's gc-pins.json): checkpoint ids an attempt may
    restore from, kept beyond checkpoint.retain. CreateAttempt writes them with the ConfigMap too."""

    ids: tuple[str, ...]


@dataclass(frozen=True)
class StopRuntime:
    """POST /stop: drain, final checkpoint, optional savepoint, exit 0."""

    savepoint: str | None = None


@dataclass(frozen=True)
class Emit:
    type: str  # Normal | Warning
    reason: str
    message: str


@dataclass(frozen=True)
class CheckpointResult:
    """A trigger this operator made has finished (a metric: triggers by result)."""

    result: str  # completed | failed | timed_out | skipped | error


@dataclass
class Decision:
    # The whole new status as it is written (JobStatus.document(): camelCase, what the status
    # writer diffs into merge patches); decide() fills it in from the typed status it decided.
    status: dict[str, Any] = field(default_factory=dict)
    state: JobStatus | None = None  # the typed status `status` was documented from (to read)
    actions: list[Any] = field(default_factory=list)
    requeue_after: float = 10.0

    def emit(self, type_: str, reason: str, message: str) -> None:
        self.actions.append(Emit(type_, reason, message))

    def of(self, kind: type) -> list[Any]:
        return [a for a in self.actions if isinstance(a, kind)]
