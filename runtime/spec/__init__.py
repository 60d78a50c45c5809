"""The job spec model: one typed shape for a StreamingJob's `spec` and for a local JOB.yaml.

This package root is the model's public surface (its __all__), the one the operator, the plugin and the
CRD generator import (pyproject.toml's import contracts): the root `JobSpec`, parsing and loading
(job.py), the sections (sections.py), the executors and hot volume (executors.py), the pod template
sections (pod_template.py) and their merge into pods (pod_merge.py), the value rules (rules.py) and the
changes Spark cannot apply to a job's state (changes.py).
"""

from __future__ import annotations

from .changes import (
    HDFS_PARTITIONS_MESSAGE,
    STATE_STORE_MESSAGE,
    TRANSITION_RULES,
)
from .executors import (
    DEFAULT_INSTANCES,
    INSTANCES_OR_DYNAMIC,
    DynamicAllocation,
    ExecutorsSpec,
    HotVolume,
)
from .job import (
    API_GROUP,
    API_VERSION,
    EXECUTORS_NEED_HOT_VOLUME,
    GC_SECRET_MESSAGE,
    KIND,
    NAME_LENGTH_MESSAGE,
    NAME_RULES,
    SERVICE_ACCOUNT_LOCAL_ONLY,
    JobIdentity,
    JobSpec,
    SpecError,
    load_job_file,
    load_job_spec,
    parse_document,
    parse_spec,
    state_change_refusal,
)
from .pod_merge import (
    executor_template,
    merge_pod,
    pinned_to_node,
    scheduling,
)
from .pod_template import (
    ExecutorPodTemplate,
    PodTemplate,
    pod_template_document,
)
from .rules import (
    DEFAULT_IMAGE,
    DRIVER_MEMORY_ENV,
    IMAGE_PATTERN,
    JOB_NAME_MAX_LENGTH,
    JOB_NAME_PATTERN,
    NAME_PATTERN,
    PATTERN_HINTS,
    SPARK_UI_PORT,
    SPARK_UI_PORT_ENV,
    SPARK_UI_PROXY_BASE_ENV,
    STANDBY_ENV,
    STANDBY_INTERVAL_ENV,
    STANDBY_WARMUP_ENV,
    SUBDOMAIN_PATTERN,
    SpecModel,
    cel,
    driver_memory,
    duration_at_least,
    parsable_durations,
    parse_duration,
    parse_quantity,
    ui_path_prefix,
    ui_proxy_base,
)
from .sections import (
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

__all__ = [
    "API_GROUP", "API_VERSION", "COMPACTION_NEEDS_DELTA", "CheckpointSection", "Compaction", "DEFAULT_IMAGE",
    "DEFAULT_INSTANCES", "DELTA_NEEDS_PARQUET", "DRIVER_MEMORY_ENV", "DynamicAllocation",
    "EXECUTORS_NEED_HOT_VOLUME", "EXECUTORS_NEED_K8S", "ExecutorPodTemplate", "ExecutorsSpec",
    "GC_SECRET_MESSAGE", "GcSection", "HDFS_PARTITIONS_MESSAGE", "HotVolume", "IMAGE_PATTERN",
    "INSTANCES_OR_DYNAMIC", "JOB_NAME_MAX_LENGTH", "JOB_NAME_PATTERN", "JobIdentity", "JobSection", "JobSpec",
    "K8S_NEEDS_EXECUTORS", "KIND", "NAME_LENGTH_MESSAGE", "NAME_PATTERN", "NAME_RULES", "PATTERN_HINTS",
    "PodTemplate", "RESERVED_CONF", "Resources", "RestartSection", "RestoreFrom",
    "SERVICE_ACCOUNT_LOCAL_ONLY", "SPARK_UI_PORT", "SPARK_UI_PORT_ENV", "SPARK_UI_PROXY_BASE_ENV",
    "STANDBY_ENV", "STANDBY_INTERVAL_ENV", "STANDBY_WARMUP_ENV", "STATE_STORE_MESSAGE", "SUBDOMAIN_PATTERN", "SavepointSection", "SecretRef", "SinkSpec", "SparkEventLog",
    "SparkSection", "SparkUi", "SpecError", "SpecModel", "StandbySection", "StorageSpec", "TRANSITION_RULES", "cel",
    "driver_memory", "duration_at_least", "executor_template", "load_job_file", "load_job_spec", "merge_pod",
    "parsable_durations", "parse_document", "parse_duration", "parse_quantity", "parse_spec",
    "pinned_to_node", "pod_template_document", "scheduling", "state_change_refusal", "ui_path_prefix",
    "ui_proxy_base",
]
