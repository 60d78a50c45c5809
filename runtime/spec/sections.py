"""The sections of the job spec model (docs/design.md §9): job and its sink, spark, checkpoint,
savepoint, restart, restoreFrom, gc. Each section's own rules are here, stated twice as the spec
model states them (a pydantic validator and a CEL rule with the same message). The root `JobSpec`,
the rules across sections, and parsing are job.py's; the package root, `sparkpoint.runtime.spec`,
exports every name others use: import them from there.
"""

from __future__ import annotations

import re
from typing import Annotated, Any, Literal

from pydantic import (
    ConfigDict,
    Field,
    StringConstraints,
    field_validator,
    model_validator,
)

from .executors import ExecutorsSpec, HotVolume
from .pod_conf import MAX_CONF_KEYS, pod_conf_rule, refused_pod_conf
from .rules import (
    CPU_PATTERN,
    ENDPOINT_PATTERN,
    ENTRYPOINT_PATTERN,
    MASTER_PATTERN,
    MEMORY_PATTERN,
    MIN_MEMORY,
    NAME_PATTERN,
    SINK_PATH_PATTERN,
    SUBDOMAIN_PATTERN,
    Duration,
    SpecModel,
    cel,
    duration_at_least,
    duration_between,
    parsable_durations,
    parse_duration,
    quantity_at_least,
)

# Spark settings the runtime owns: a conf entry would contradict a spec field or the runtime itself.
RESERVED_CONF = {
    "spark.master": "set spec.spark.master instead",
    "spark.sql.shuffle.partitions": "set spec.spark.shufflePartitions instead",
    "spark.sql.streaming.stateStore.providerClass": "set spec.spark.stateStore instead",
    "spark.sql.streaming.stateStore.rocksdb.changelogCheckpointing.enabled":
        "set spec.spark.changelogCheckpointing instead",
    "spark.sql.streaming.checkpointLocation": "the runtime keeps the query's checkpoint in its hot dir",
    # With master k8s the runtime is the driver in client mode and owns how executors reach it.
    "spark.executor.instances": "set spec.spark.executors.instances instead",
    "spark.executor.cores": "set spec.spark.executors.cores instead",
    "spark.executor.memory": "set spec.spark.executors.memory instead",
    "spark.dynamicAllocation.enabled": "set spec.spark.executors.dynamic instead",
    "spark.dynamicAllocation.shuffleTracking.enabled": "set spec.spark.executors.dynamic instead",
    "spark.dynamicAllocation.minExecutors": "set spec.spark.executors.dynamic.min instead",
    "spark.dynamicAllocation.maxExecutors": "set spec.spark.executors.dynamic.max instead",
    "spark.dynamicAllocation.executorIdleTimeout": "set spec.spark.executors.dynamic.idleTimeout instead",
    # A heap the container's limit cannot hold is OOM-killed: the heap is sized from the limit.
    "spark.driver.memory": "set spec.spark.resources.memory instead (the driver heap is sized from it)",
    "spark.driver.host": "the runtime sets its pod IP",
    "spark.kubernetes.container.image": "set spec.image instead",
    "spark.kubernetes.executor.podTemplateFile": "the runtime writes the executors' pod template",
    "spark.ui.enabled": "set spec.spark.ui.enabled instead",
    "spark.ui.port": "the UI listens on the Service's spark-ui port (4040)",
    "spark.ui.killEnabled": "the UI is read-only (docs/security.md)",
    # master k8s: the job's own secret authenticates and encrypts its Spark RPC (docs/security.md).
    **{key: "each job's Spark RPC is authenticated with its own secret and encrypted (docs/security.md)"
       for key in ("spark.authenticate", "spark.authenticate.secret", "spark.authenticate.secret.file",
                   "spark.authenticate.secret.driver.file", "spark.authenticate.secret.executor.file",
                   "spark.network.crypto.enabled", "spark.io.encryption.enabled")},
    "spark.eventLog.enabled": "set spec.spark.eventLog.enabled instead",
    "spark.eventLog.dir": "the runtime writes event logs to its work dir and uploads them to the store's history/",
}


DELTA_NEEDS_PARQUET = "format must be parquet when kind is delta (a Delta table's data files are Parquet)"


COMPACTION_NEEDS_DELTA = "compaction applies only when kind is delta or upsert"


class Compaction(SpecModel):
    # A delta sink's small-file compaction, run by the runtime (the table's one fenced writer) after a
    # checkpoint's publish, at most once per interval ("0s": after every checkpoint). It merges runs of
    # consecutive files smaller than targetFileSize, of batches every retained checkpoint and savepoint
    # shares, into files up to that size; a run of fewer than minFiles files stays. The small files go
    # when no kept point needs them and spec.gc.deltaRetention has passed (docs/design.md §7).
    # An upsert sink's: at most once per interval the runtime folds the batches no restorable point
    # can go back before into a snapshot (parts up to targetFileSize, at most 64Mi), once at least
    # minFiles batches are not in the last one; GC then collects those batches.
    enabled: bool = True
    interval: Duration = "1h"
    target_file_size: Annotated[str, StringConstraints(pattern=MEMORY_PATTERN), *quantity_at_least("1Mi")] = "128Mi"
    min_files: Annotated[int, Field(ge=2)] = 10


class SinkSpec(SpecModel):
    # transactional: exactly-once, published with checkpoints; delta: the same, also committed to a
    # Delta Lake table at outputs/<path>/ (Parquet only); upsert: per batch, idempotent by key;
    # console: development only.
    kind: Literal["transactional", "delta", "upsert", "console"] = "transactional"
    # Where output goes, relative to the job's store prefix (outputs/<path>/...): segments that each
    # start with a letter, digit or '_', so no '.', '..' or empty segment (stores refuse such keys).
    path: Annotated[str, StringConstraints(pattern=SINK_PATH_PATTERN)] = "default"
    key_columns: list[Annotated[str, StringConstraints(min_length=1)]] = Field(default_factory=list)
    # transactional, delta and upsert: the files Spark's executors write per batch (JSON lines for
    # small jobs whose readers want text); console always prints JSON lines.
    format: Literal["parquet", "jsonl"] = "parquet"
    # delta and upsert only; unset: the defaults of Compaction (None keeps it out of the operator's job document
    # and spec key for every other kind)
    compaction: Compaction | None = None

    # The same rule for the API server (CEL), carried into the CRD by sparkpoint.operator.crd.streamingjob.
    model_config = ConfigDict(json_schema_extra={"x-kubernetes-validations": [{
        "rule": "!has(self.kind) || self.kind != 'upsert' || (has(self.keyColumns) && size(self.keyColumns) > 0)",
        "message": "keyColumns must name at least one column when kind is upsert"}, {
        "rule": "!has(self.kind) || self.kind != 'delta' || !has(self.format) || self.format == 'parquet'",
        "message": DELTA_NEEDS_PARQUET}, {
        "rule": "!has(self.compaction) || (has(self.kind) && (self.kind == 'delta' || self.kind == 'upsert'))",
        "message": COMPACTION_NEEDS_DELTA}]})

    @model_validator(mode="after")
    def _upsert_needs_keys(self) -> SinkSpec:
        if self.kind == "upsert" and not self.key_columns:
            raise ValueError("keyColumns must name at least one column when kind is upsert")
        if self.kind == "delta" and self.format != "parquet":
            raise ValueError(DELTA_NEEDS_PARQUET)
        if self.kind not in ("delta", "upsert") and self.compaction is not None:
            raise ValueError(COMPACTION_NEEDS_DELTA)
        return self


class JobSection(SpecModel):
    entrypoint: str = Field(json_schema_extra={"pattern": ENTRYPOINT_PATTERN})
    args: dict[str, Any] = Field(default_factory=dict)
    sink: SinkSpec = Field(default_factory=SinkSpec)
    # Micro-batch trigger of the query; checkpoints are independent of it. Below 100ms (0 included)
    # Spark starts batches back to back: a busy driver, and a sink journal entry per empty batch.
    trigger_interval: duration_at_least("100ms") = "1s"
    # Extra PYTHONPATH entries so `module` in the entrypoint can be found.
    python_path: list[str] = Field(default_factory=list)

    @field_validator("entrypoint")
    @classmethod
    def _module_colon_function(cls, value: str) -> str:
        if not re.fullmatch(ENTRYPOINT_PATTERN, value):
            raise ValueError(f"{value!r} is not of the form module:function (e.g. examples.windowed:build)")
        return value


class Resources(SpecModel):
    # The runtime container's request (cpu) and request and limit (memory); the driver's JVM heap is
    # sized from the memory (spec_rules.driver_memory: 2Gi -> 1536m).
    cpu: Annotated[str, StringConstraints(pattern=CPU_PATTERN)] = "1"
    memory: Annotated[str, StringConstraints(pattern=MEMORY_PATTERN),
                      *quantity_at_least(MIN_MEMORY)] = "2Gi"


class SparkUi(SpecModel):
    # Spark's live UI on the pod's and the Service's `spark-ui` port (4040). It has no
    # authentication: the chart's NetworkPolicy admits only the operator's namespace (docs/security.md).
    enabled: bool = True


class SparkEventLog(SpecModel):
    # Spark's event logs of every attempt, rolled and compressed, uploaded to the job's store under
    # history/<attempt>/ (docs/design.md §3) for Spark's History Server; the GC sidecar keeps the
    # newest `retainAttempts` attempts' logs and never the current attempt's.
    enabled: bool = True
    retain_attempts: Annotated[int, Field(ge=1, le=1000)] = 5


def _reserved_conf_rules() -> list[dict[str, str]]:
    return [cel(f"!('{key}' in self)", f"{key} is set by Sparkpoint: {why}") for key, why in RESERVED_CONF.items()]


EXECUTORS_NEED_K8S = "executors needs master: k8s (local masters run every task in the driver)"
K8S_NEEDS_EXECUTORS = "master k8s needs executors (instances, cores, memory)"


class SparkSection(SpecModel):
    master: Annotated[str, StringConstraints(pattern=MASTER_PATTERN)] = "local[2]"
    conf: Annotated[dict[str, str], Field(max_length=MAX_CONF_KEYS, json_schema_extra={
        "x-kubernetes-validations": [*_reserved_conf_rules(), pod_conf_rule()]})] = Field(default_factory=dict)
    resources: Resources = Field(default_factory=Resources)
    state_store: Literal["rocksdb", "hdfs"] = "rocksdb"
    changelog_checkpointing: bool = True
    shuffle_partitions: Annotated[int, Field(ge=1, le=10000)] = 4
    executors: ExecutorsSpec | None = None
    ui: SparkUi = Field(default_factory=SparkUi)
    event_log: SparkEventLog = Field(default_factory=SparkEventLog)

    model_config = ConfigDict(json_schema_extra={"x-kubernetes-validations": [
        cel("!has(self.executors) || (has(self.master) && self.master == 'k8s')", EXECUTORS_NEED_K8S, ".executors"),
        cel("!has(self.master) || self.master != 'k8s' || has(self.executors)", K8S_NEEDS_EXECUTORS, ".master")]})

    @model_validator(mode="after")
    def _executors_with_k8s(self) -> SparkSection:
        if self.executors is not None and self.master != "k8s":
            raise ValueError(EXECUTORS_NEED_K8S)
        if self.master == "k8s" and self.executors is None:
            raise ValueError(K8S_NEEDS_EXECUTORS)
        return self

    @field_validator("conf")
    @classmethod
    def _no_reserved_keys(cls, conf: dict[str, str]) -> dict[str, str]:
        for rule in _reserved_conf_rules():
            key = rule["message"].split(" ", 1)[0]
            if key in conf:
                raise ValueError(rule["message"])
        refused = refused_pod_conf(conf)
        if refused:
            raise ValueError(refused)
        return conf


class SecretRef(SpecModel):
    # A Secret holding AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY; credentials never live in the spec.
    name: Annotated[str, StringConstraints(pattern=SUBDOMAIN_PATTERN, max_length=253)]


class StorageSpec(SpecModel):
    # s3://bucket/prefix (MinIO/S3) or file:///abs/path (the embedded default).
    url: Annotated[str, StringConstraints(pattern=r"^(s3://[a-z0-9][a-z0-9.\-]{1,61}[a-z0-9](/.*)?|file:///.*)$")]
    # http(s)://host[:port] of the S3 API; the environment's SPARKPOINT_S3_ENDPOINT wins over it.
    endpoint: Annotated[str, StringConstraints(pattern=ENDPOINT_PATTERN)] | None = None
    secret_ref: SecretRef | None = None
    # How long STS keys of the cloud's own identity live (web identity; unset: the STS's default, an
    # hour); the runtime fetches new ones 5 minutes before they expire (docs/design.md §9).
    sts_duration: duration_between("15m", "12h") | None = None  # type: ignore[valid-type]


class CheckpointSection(SpecModel):
    interval: duration_at_least("1s") = "30s"
    timeout: duration_at_least("1s") = "10m"
    min_pause: Duration = "0s"
    retain: Annotated[int, Field(ge=1, le=1000)] = 3
    max_concurrent: Annotated[int, Field(ge=1, le=16)] = 1
    storage: StorageSpec | None = None
    local_recovery: bool = True
    hot_volume: HotVolume | None = None
    # Changing the nonce asks the operator for a checkpoint now (as savepoint.triggerNonce does for a
    # savepoint); the operator alone reads it, so it is no upgrade.
    trigger_nonce: int | None = None


class SavepointSection(SpecModel):
    # Changing the nonce asks the operator for a new savepoint (as in Flink's operator).
    trigger_nonce: int | None = None
    # How many periodic savepoints (periodic-<unix time>) the operator keeps (0: all); other
    # savepoints are never pruned.
    retain: Annotated[int, Field(ge=0, le=1000)] = 5
    # The operator takes a savepoint this often (none if unset).
    interval: duration_at_least("1m") | None = None


class RestartSection(SpecModel):
    policy: Literal["Always", "OnFailure", "Never"] = "OnFailure"
    max_restarts: Annotated[int, Field(ge=0)] = 10
    # Between attempts (new pods); 0s would replace a crashing pod in a tight loop.
    backoff: duration_at_least("1s") = "10s"
    max_backoff: Duration = "5m"
    # maxRestarts counts the restarts within this window (failures of the job itself: not pod
    # deletions, evictions, preemptions or node loss, which restart at once).
    window: duration_at_least("1m") = "1h"
    # An attempt that ran this long was stable: the next failure waits `backoff` again, not a
    # doubled wait (backoff is for crash loops; like Flink's reset-backoff threshold).
    stable_after: Duration = "5m"
    # A running attempt whose runtime has not answered the operator's GET /status for this long, every
    # request since the first unanswered one timing out (or its node NotReady), is lost: the next
    # attempt starts at once, not after Kubernetes' eviction (5 minutes). The store's fence keeps the
    # old attempt from committing (docs/design.md §11, "Lost attempts").
    lost_after: duration_at_least("5s") = "15s"

    # has(): the API server also checks this rule against the section's `default: {}`, before the
    # fields' own defaults fill it in; a real object always has both by then.
    model_config = ConfigDict(json_schema_extra={"x-kubernetes-validations": [cel(
        "!has(self.backoff) || !has(self.maxBackoff) || "
        f"!({parsable_durations('self.backoff', 'self.maxBackoff')}) || "
        "duration(self.backoff) <= duration(self.maxBackoff)",
        "backoff must not be longer than maxBackoff", ".backoff")]})

    @model_validator(mode="after")
    def _backoff_within_max(self) -> RestartSection:
        if parse_duration(self.backoff) > parse_duration(self.max_backoff):
            raise ValueError("backoff must not be longer than maxBackoff")
        return self

    def backoff_seconds(self, failures: int) -> float:
        """The one backoff formula (operator and --supervise): 0 before the first failure, then
        backoff, doubled per further failure in a row, capped at maxBackoff."""
        if failures <= 0:
            return 0.0
        return min(parse_duration(self.max_backoff), parse_duration(self.backoff) * 2 ** (failures - 1))


class StandbySection(SpecModel):
    """A standby attempt: a second pod of the job, with its JVM and SparkSession up and the newest
    checkpoint's files on its disk, that the operator promotes when the running attempt is lost instead
    of starting a new pod (docs/design.md §11, "Standby attempts"). Turning it on or off never restarts
    the running attempt."""

    enabled: bool = False
    # A standby whose last look at the store ended longer ago than this (a hung or starved process,
    # a download that never ends) is stale: the operator starts a cold pod instead of promoting it.
    max_lag: duration_between("5s", "1h") = "60s"
    # The standby runs the job's query once before any promotion (a scratch checkpoint, a sink that
    # writes nothing) so the promoted query starts on a warm JVM; it reads the job's sources as a new
    # query would, hence off by default (runtime/service/warmup.py). Takes effect with the next standby.
    # It also makes the job's state stores snapshot every 10 versions instead of 50 (session.py
    # wants_fast_restore): a promotion replays fewer changelogs, for more bytes per checkpoint.
    warmup: bool = False


class RestoreFrom(SpecModel):
    checkpoint: Annotated[str, StringConstraints(pattern=r"^chk-[0-9]{6,}$")] | None = None
    savepoint: Annotated[str, StringConstraints(pattern=NAME_PATTERN)] | None = None
    # Start once without any state (upgradeMode stateless sets it); the name marks that start, so the
    # attempts after it continue its history and a new name starts afresh again.
    fresh: Annotated[str, StringConstraints(pattern=NAME_PATTERN)] | None = None

    model_config = ConfigDict(json_schema_extra={"x-kubernetes-validations": [{
        "rule": "(has(self.checkpoint) ? 1 : 0) + (has(self.savepoint) ? 1 : 0) + (has(self.fresh) ? 1 : 0) <= 1",
        "message": "set at most one of checkpoint, savepoint and fresh"}]})

    @model_validator(mode="after")
    def _one_source(self) -> RestoreFrom:
        if sum(1 for v in (self.checkpoint, self.savepoint, self.fresh) if v) > 1:
            raise ValueError("set at most one of checkpoint, savepoint and fresh")
        return self


class GcSection(SpecModel):
    enabled: bool = True
    interval: duration_at_least("1s") = "60s"
    grace: Duration = "1m"
    pending_timeout: Duration = "1h"
    # A delta sink's table keeps the data files a commit removed for this long (Delta's
    # deletedFileRetentionDuration, default a week): time travel and readers of an older version
    # still find them. Files a retained checkpoint needs are kept regardless (docs/design.md §7).
    delta_retention: Duration = "168h"
    # The GC sidecar's memory limit (request and limit), when the default does not fit: a steady pass
    # holds ~45 MiB at any age, but the first pass over a store written before the output GC cursors
    # (docs/design.md §7) grows with that store's age (a month: 559 MiB transactional, 846 MiB delta).
    memory: Annotated[str, StringConstraints(pattern=MEMORY_PATTERN), *quantity_at_least("128Mi")] | None = None
    # What happens to checkpoints when the StreamingJob is deleted (savepoints are always kept).
    on_delete: Literal["retain", "delete"] = "retain"
    # A second Secret (same keys as checkpoint.storage.secretRef) for whatever deletes checkpoint
    # data: the GC sidecar and the operator's deletions. Then the storage Secret may hold a
    # credential that cannot delete (access_policy.py, role runtime; docs/security.md).
    secret_ref: SecretRef | None = None
