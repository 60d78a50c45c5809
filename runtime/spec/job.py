"""The job spec model: one typed shape for a StreamingJob's `spec` and for a local JOB.yaml.

The runtime reads it to run a job; the operator parses the custom resource into it once. The CRD's
OpenAPI schema (crds/) is generated from this model, and every rule here that a pattern or bound
cannot say is stated twice: as a pydantic validator and as a CEL rule for the API server, with the
same message; tests/operator/test_crd.py and e2e/test_streamingjob_crd.py check they agree.

This module holds the root `JobSpec` and the rules across its sections, the StreamingJob's metadata
rules, parsing and loading; the package root (`sparkpoint.runtime.spec`) is the model's public face,
over this module, the sections (`sections.py`), the executors and hot volume (`executors.py`) and the
value rules (`rules.py`).
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Annotated, Any, Literal

import yaml
from pydantic import (
    ConfigDict,
    Field,
    StringConstraints,
    ValidationError,
    field_validator,
    model_validator,
)

from .changes import (  # noqa: F401  (part of the spec model: imported from here)
    HDFS_PARTITIONS_MESSAGE,
    STATE_STORE_MESSAGE,
    TRANSITION_RULES,
)
from .executors import (  # noqa: F401  (part of the spec model: imported from here)
    DEFAULT_INSTANCES,
    INSTANCES_OR_DYNAMIC,
    DynamicAllocation,
    ExecutorsSpec,
    HotVolume,
)
from .pod_template import (  # noqa: F401  (part of the spec model: imported from here)
    ExecutorPodTemplate,
    PodTemplate,
    pod_template_document,
)
from .rules import (  # noqa: F401  (NAME_PATTERN, parse_duration, SpecModel: imported from here)
    DEFAULT_IMAGE,
    IMAGE_PATTERN,
    JOB_NAME_MAX_LENGTH,
    JOB_NAME_PATTERN,
    NAME_PATTERN,
    PATTERN_HINTS,
    SUBDOMAIN_PATTERN,
    SpecModel,
    cel,
    duration_at_least,
    parsable_durations,
    parse_duration,
)
from .sections import (  # noqa: F401  (part of the spec model: imported from here)
    COMPACTION_NEEDS_DELTA,
    DELTA_NEEDS_PARQUET,
    EXECUTORS_NEED_K8S,
    K8S_NEEDS_EXECUTORS,
    RESERVED_CONF,
    CheckpointSection,
    Compaction,
    GcSection,
    JobSection,
    Resources,
    RestartSection,
    RestoreFrom,
    SavepointSection,
    SecretRef,
    SinkSpec,
    SparkEventLog,
    SparkSection,
    SparkUi,
    StandbySection,
    StorageSpec,
)

API_GROUP = "sparkpoint.dev"
API_VERSION = "v1alpha1"
KIND = "StreamingJob"

EXECUTORS_NEED_HOT_VOLUME = ("spark.executors needs checkpoint.hotVolume: executors write the query's state "
                             "files into the checkpoint directory, which the driver must see to checkpoint it")
SERVICE_ACCOUNT_LOCAL_ONLY = ("serviceAccountName is for local[N] jobs: a master k8s job's pod runs as the "
                              "operator's --driver-service-account, which starts its executors")
GC_SECRET_MESSAGE = "gc.secretRef needs an s3:// checkpoint.storage.url (its credential is for that store)"


class JobSpec(SpecModel):
    image: Annotated[str, StringConstraints(pattern=IMAGE_PATTERN, max_length=255)] = DEFAULT_IMAGE
    job: JobSection
    spark: SparkSection = Field(default_factory=SparkSection)
    checkpoint: CheckpointSection = Field(default_factory=CheckpointSection)
    savepoint: SavepointSection = Field(default_factory=SavepointSection)
    restart: RestartSection = Field(default_factory=RestartSection)
    upgrade_mode: Literal["stateless", "savepoint", "last-checkpoint"] = "savepoint"
    # An upgraded attempt not Ready within this rolls back; unset: the operator's --upgrade-timeout.
    upgrade_timeout: duration_at_least("30s") | None = None
    state: Literal["running", "suspended"] = "running"
    restore_from: RestoreFrom | None = None
    gc: GcSection = Field(default_factory=GcSection)
    # Merged into every pod of the job (docs/design.md §9, "Pod templates"); the executors' too
    # unless spark.executors.podTemplate is set.
    pod_template: PodTemplate | None = None  # type: ignore[valid-type]
    # Changing it restarts the job from its latest checkpoint, with no other change (as in Flink's
    # operator); the operator alone reads it.
    restart_nonce: int | None = None
    # The ServiceAccount the job's pod runs as: its cloud identity for the store (IRSA's or Pod
    # Identity's annotations, or a projected token in podTemplate) when no storage Secret is named.
    # local[N] jobs only (a k8s driver runs as the operator's --driver-service-account). docs/security.md.
    service_account_name: Annotated[str, StringConstraints(pattern=SUBDOMAIN_PATTERN, max_length=253)] | None = None
    # A standby pod promoted when the active attempt is lost (StandbySection); unset: none.
    standby: StandbySection | None = None

    # GC treats a pending marker older than pendingTimeout as abandoned and frees its objects, so a
    # checkpoint still within its timeout must never be that old. Go-style durations parse in CEL.
    # TRANSITION_RULES judge an update against the spec before it (changes.py).
    model_config = ConfigDict(json_schema_extra={"x-kubernetes-validations": [{
        "rule": f"!({parsable_durations('self.gc.pendingTimeout', 'self.checkpoint.timeout')}) || "
                "duration(self.gc.pendingTimeout) > duration(self.checkpoint.timeout)",
        "message": "gc.pendingTimeout must be longer than checkpoint.timeout",
        "fieldPath": ".gc.pendingTimeout"}, {
        "rule": "!has(self.gc) || !has(self.gc.secretRef) || (has(self.checkpoint) && "
                "has(self.checkpoint.storage) && self.checkpoint.storage.url.startsWith('s3://'))",
        "message": GC_SECRET_MESSAGE, "fieldPath": ".gc.secretRef"}, cel(
        "!has(self.spark) || !has(self.spark.executors) || (has(self.checkpoint) && has(self.checkpoint.hotVolume))",
        EXECUTORS_NEED_HOT_VOLUME, ".spark.executors"), cel(
        "!has(self.serviceAccountName) || !has(self.spark) || !has(self.spark.master) || self.spark.master != 'k8s'",
        SERVICE_ACCOUNT_LOCAL_ONLY, ".serviceAccountName"), *TRANSITION_RULES]})

    @field_validator("pod_template")
    @classmethod
    def _empty_template_is_none(cls, template: Any) -> Any:
        return template if pod_template_document(template) else None

    @model_validator(mode="after")
    def _pending_outlives_checkpoint(self) -> JobSpec:
        if parse_duration(self.gc.pending_timeout) <= parse_duration(self.checkpoint.timeout):
            raise ValueError("gc.pendingTimeout must be longer than checkpoint.timeout")
        return self

    @model_validator(mode="after")
    def _executors_share_the_hot_dir(self) -> JobSpec:
        if self.spark.executors is not None and self.checkpoint.hot_volume is None:
            raise ValueError(EXECUTORS_NEED_HOT_VOLUME)
        return self

    @model_validator(mode="after")
    def _own_service_account_local_only(self) -> JobSpec:
        if self.service_account_name and self.spark.master == "k8s":
            raise ValueError(SERVICE_ACCOUNT_LOCAL_ONLY)
        return self

    @model_validator(mode="after")
    def _gc_secret_needs_s3(self) -> JobSpec:
        storage = self.checkpoint.storage
        if self.gc.secret_ref and (storage is None or not storage.url.startswith("s3://")):
            raise ValueError(GC_SECRET_MESSAGE)
        return self


class JobIdentity(SpecModel):
    namespace: Annotated[str, StringConstraints(pattern=NAME_PATTERN, max_length=63)] = "default"
    name: Annotated[str, StringConstraints(pattern=JOB_NAME_PATTERN)]

    @field_validator("name")
    @classmethod
    def _room_for_derived_names(cls, name: str) -> str:
        if len(name) > JOB_NAME_MAX_LENGTH:
            raise ValueError(f"{NAME_LENGTH_MESSAGE} (got {len(name)})")
        return name


NAME_LENGTH_MESSAGE = (f"metadata.name must be at most {JOB_NAME_MAX_LENGTH} characters: the job's Service "
                       "(<name>) and pods (<name>-<attempt>) are named after it")
# The same rules on a StreamingJob's metadata.name for the API server (the root of the CRD's schema;
# a fieldPath cannot point into metadata, so the messages name the field themselves).
NAME_RULES = [
    cel(f"!has(self.metadata.name) || size(self.metadata.name) <= {JOB_NAME_MAX_LENGTH}", NAME_LENGTH_MESSAGE),
    cel(f"!has(self.metadata.name) || self.metadata.name.matches('{JOB_NAME_PATTERN}')",
         "metadata.name must start with a letter and hold only lowercase letters, digits and '-': "
         "the job's Service is named after it (a DNS-1035 label)"),
]


class SpecError(ValueError):
    """An invalid job spec; the message names every offending field (e.g. spec.checkpoint.retain),
    `problems` holds one line per field (what `sparkpoint validate` prints)."""

    def __init__(self, message: str, problems: list[str] | None = None):
        super().__init__(message)
        self.problems = problems or [message]


def _error_lines(err: ValidationError, root: str) -> list[str]:
    lines = []
    for item in err.errors():
        where = ".".join([root, *(str(p) for p in item["loc"])])
        msg = item["msg"].removeprefix("Value error, ")
        hint = PATTERN_HINTS.get((item.get("ctx") or {}).get("pattern", ""))
        if item["type"] == "string_pattern_mismatch" and hint:
            msg = f"{item['input']!r} is not {hint}"
        lines.append(f"{where}: {msg}")
    return lines


def parse_spec(data: Any, root: str = "spec") -> JobSpec:
    """Validate a spec mapping; raise SpecError naming the fields on failure."""
    if not isinstance(data, dict):
        raise SpecError(f"{root}: expected a mapping, got {type(data).__name__}")
    try:
        return JobSpec.model_validate(data)
    except ValidationError as err:
        lines = _error_lines(err, root)
        raise SpecError("; ".join(lines), lines) from None


def parse_document(doc: Any, default_name: str = "job") -> tuple[JobIdentity, JobSpec]:
    """Accept a full StreamingJob manifest or a bare spec (so a manifest's spec runs locally unchanged)."""
    if isinstance(doc, dict) and doc.get("kind") == KIND:
        meta = doc.get("metadata") or {}
        problems: list[str] = []  # the metadata's and the spec's, all of them
        try:
            ident = JobIdentity(namespace=meta.get("namespace") or "default", name=meta.get("name", ""))
        except ValidationError as err:
            problems += _error_lines(err, "metadata")
        try:
            spec = parse_spec(doc.get("spec"), "spec")
        except SpecError as err:
            problems += err.problems
        if problems:
            raise SpecError("; ".join(problems), problems)
        return ident, spec
    name = re.sub(r"[^a-z0-9-]+", "-", default_name.lower()).strip("-")
    name = name if name[:1].isalpha() else f"job-{name}".strip("-")
    return JobIdentity(name=name[:JOB_NAME_MAX_LENGTH].rstrip("-")), parse_spec(doc, "spec")


def load_job_file(path: str | Path) -> tuple[JobIdentity, JobSpec]:
    path = Path(path)
    try:
        text = path.read_text()
    except OSError as err:
        raise SpecError(f"cannot read job file {path}: {err.strerror}") from None
    try:
        doc = yaml.safe_load(text)
    except yaml.YAMLError as err:
        raise SpecError(f"{path} is not valid YAML: {err}") from None
    return parse_document(doc, default_name=path.stem)


def load_job_spec(path: str | Path) -> JobSpec:
    return load_job_file(path)[1]


def state_change_refusal(before: JobSpec, after: JobSpec) -> str | None:
    """Why `after` cannot replace `before` (the spec the job last ran), or None. The same judgement
    as changes.TRANSITION_RULES, with their messages."""
    fresh = after.restore_from.fresh if after.restore_from else None
    fresh_before = before.restore_from.fresh if before.restore_from else None
    if after.upgrade_mode == "stateless" or (fresh is not None and fresh != fresh_before):
        return None
    if before.spark.state_store != after.spark.state_store:
        return STATE_STORE_MESSAGE
    if before.spark.state_store == "hdfs" and before.spark.shuffle_partitions != after.spark.shuffle_partitions:
        return HDFS_PARTITIONS_MESSAGE
    return None
