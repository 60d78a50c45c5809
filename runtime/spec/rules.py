"""Value rules of the job spec, each stated once for both checkers: the pydantic model
(runtime/spec/job.py) and the API server (the CRD that operator/crd/streamingjob.py generates from the model).

Patterns are shared as they are (Python's re, pydantic's regex and the API server's RE2 read them
alike); a bound that a pattern cannot express is a validator plus a CEL rule with the same message.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from decimal import Decimal
from typing import Annotated, Any

from pydantic import AfterValidator, BaseModel, ConfigDict, Field, StringConstraints
from pydantic.alias_generators import to_camel

# The prefix of the labels and annotations the operator owns on its objects (the API group's).
API_LABEL_PREFIX = "sparkpoint.dev/"
# The images' one name and tag scheme (issue 40): sparkpoint/runtime:<version> and
# sparkpoint/operator:<version>, the version pyproject.toml's (through the installed package's
# metadata), as `make image` tags them, the chart's appVersion names them and the examples use them.
def project_version() -> str:
    from importlib.metadata import PackageNotFoundError, version

    try:
        return version("sparkpoint")
    except PackageNotFoundError:  # a source tree on sys.path, not installed: its pyproject.toml
        import tomllib
        from pathlib import Path

        pyproject = Path(__file__).resolve().parents[1] / "pyproject.toml"
        return str(tomllib.loads(pyproject.read_text())["project"]["version"])


DEFAULT_IMAGE = f"sparkpoint/runtime:{project_version()}"
# Kubernetes names: DNS-1123 labels (what a pod/configmap name derived from the job must satisfy).
NAME_PATTERN = r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?$"
# Names of objects that only have to be DNS-1123 subdomains, such as a Secret (dots allowed).
SUBDOMAIN_PATTERN = r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$"
# A job's Service is named after it, and a Service name is a DNS-1035 label (starts with a letter,
# at most 63 characters); its pods are `<name>-<attempt>`: 52 leaves room for "-" and ten digits.
JOB_NAME_PATTERN = r"^[a-z]([-a-z0-9]*[a-z0-9])?$"
JOB_NAME_MAX_LENGTH = 52
# At most six digits: 999999h (114 years) still fits the API server's duration type (292 years),
# so a CEL rule that parses the value can never overflow.
DURATION_PATTERN = r"^[0-9]{1,6}(ms|s|m|h)$"
_UNIT_SECONDS = {"ms": 0.001, "s": 1.0, "m": 60.0, "h": 3600.0}
Duration = Annotated[str, StringConstraints(pattern=DURATION_PATTERN)]
ENTRYPOINT_PATTERN = r"^[A-Za-z_][A-Za-z0-9_.]*:[A-Za-z_][A-Za-z0-9_]*$"
# What the pod's image field accepts: [registry[:port]/]path[:tag][@sha256:digest], as docker does.
_PATH_COMPONENT = r"[a-z0-9]+(?:(?:[._]|__|-+)[a-z0-9]+)*"
IMAGE_PATTERN = (r"^(?:[A-Za-z0-9](?:[A-Za-z0-9.-]*[A-Za-z0-9])?(?::[0-9]{1,5})?/)?"
                 rf"{_PATH_COMPONENT}(?:/{_PATH_COMPONENT})*"
                 r"(?::[A-Za-z0-9_][A-Za-z0-9_.-]{0,127})?(?:@sha256:[a-f0-9]{64})?$")
# Kubernetes quantities, restricted to the forms that make sense for each resource.
CPU_PATTERN = r"^([0-9]{1,4}(\.[0-9]{1,3})?|[0-9]{1,7}m)$"
MEMORY_PATTERN = r"^[0-9]{1,7}(\.[0-9]{1,3})?(Ki|Mi|Gi|Ti|k|M|G|T)?$"
# The runtime container: a driver heap Spark accepts (512Mi) plus the JVM's and Python's own memory
# (driver_heap_mib below sizes the heap from the limit; a test keeps the two in step).
MIN_MEMORY = "1Gi"
EXECUTOR_MIN_MEMORY = "512Mi"  # an executor's heap (Spark adds its overhead to the pod)
# What the runtime can run: a local driver with N or all cores, or the driver of executor pods that
# Spark's Kubernetes backend starts (k8s, with spec.spark.executors).
MASTER_PATTERN = r"^(local(\[([1-9][0-9]{0,3}|\*)\])?|k8s)$"
ENDPOINT_PATTERN = r"^https?://[^\s/?#]+/?$"
_SEGMENT = r"[A-Za-z0-9_][A-Za-z0-9_.\-]*"
SINK_PATH_PATTERN = rf"^{_SEGMENT}(/{_SEGMENT})*$"


def cel(rule: str, message: str, field_path: str | None = None) -> dict[str, str]:
    entry = {"rule": rule, "message": message}
    if field_path:
        entry["fieldPath"] = field_path
    return entry


def _at_least(minimum: str, to_number: Callable[[str], Any], rule: str) -> tuple[Any, Any]:
    """One lower bound, stated for the model (a validator) and for the API server (a CEL rule)."""
    message = f"must be at least {minimum}"

    def check(value: str) -> str:
        if to_number(value) < to_number(minimum):
            raise ValueError(f"{message} (got {value})")
        return value
    return Field(json_schema_extra={"x-kubernetes-validations": [cel(rule, message)]}), AfterValidator(check)


def duration_between(minimum: str, maximum: str) -> Any:
    """A duration within [minimum, maximum], for the model and the API server (one CEL rule)."""
    message = f"must be from {minimum} to {maximum}"
    rule = (f"!({parsable_durations('self')}) || (duration(self) >= duration('{minimum}') && "
            f"duration(self) <= duration('{maximum}'))")

    def check(value: str) -> str:
        if not parse_duration(minimum) <= parse_duration(value) <= parse_duration(maximum):
            raise ValueError(f"{message} (got {value})")
        return value
    return Annotated[Duration, Field(json_schema_extra={"x-kubernetes-validations": [cel(rule, message)]}),
                     AfterValidator(check)]


def parsable_durations(*fields: str) -> str:
    """CEL guard: a rule that parses durations holds vacuously for a value that fails the pattern,
    which the pattern already reports (instead of a second, cryptic conversion error)."""
    return " && ".join(f"{f}.matches('{DURATION_PATTERN}')" for f in fields)


def duration_at_least(minimum: str) -> Any:
    rule = f"!({parsable_durations('self')}) || duration(self) >= duration('{minimum}')"
    return Annotated[Duration, *_at_least(minimum, parse_duration, rule)]


def quantity_at_least(minimum: str) -> tuple[Any, Any]:
    return _at_least(minimum, parse_quantity,
                     f"!isQuantity(self) || quantity(self).compareTo(quantity('{minimum}')) >= 0")


def parse_duration(text: str) -> float:
    """'500ms' | '10s' | '5m' | '1h' -> seconds."""
    match = re.fullmatch(r"([0-9]+)(ms|s|m|h)", text)
    if not match:
        raise ValueError(f"invalid duration {text!r}: use a number and one of ms, s, m, h (e.g. 30s)")
    return int(match.group(1)) * _UNIT_SECONDS[match.group(2)]


def parse_quantity(text: str) -> Decimal:
    """'512Mi' | '1.5G' | '500m' -> the amount (bytes or cores), exact, as the API server reads it.
    The fields' patterns (CPU_PATTERN, MEMORY_PATTERN) have refused other forms with a hint first."""
    # Imported here: the kubernetes package costs about 0.2 s to import, which a runtime reading a
    # spec without a quantity to check need not pay.
    from kubernetes.utils import parse_quantity as kube_quantity

    return kube_quantity(text)


# --- The driver's JVM heap, sized from the runtime container's memory limit (spark.resources.memory).
# The container holds more than the heap: the JVM's own memory (metaspace, code cache, thread stacks,
# GC structures, Netty's direct buffers), RocksDB's native memory and the Python runtime beside the
# JVM. A heap as large as the limit is OOM-killed by the kernel (on a real node a 1g heap in a 512Mi
# container was: e2e/README.md), so the heap is what a fixed reserve leaves, and at most a fraction
# of the limit (the native parts grow with the job). The operator passes it as DRIVER_MEMORY_ENV.
DRIVER_MEMORY_ENV = "SPARKPOINT_DRIVER_MEMORY"  # spark.driver.memory; unset (a local run): 1g
# Spark's live UI (spec.spark.ui.enabled): a fixed port, the job Service's `spark-ui`. The operator
# sets the env var in the pod; a local run without it keeps the UI off (tests start many sessions).
SPARK_UI_PORT = 4040
SPARK_UI_PORT_ENV = "SPARKPOINT_SPARK_UI_PORT"
# The UI's path behind the chart's Ingress (uiIngress): `<prefix>/<namespace>/<job>`, Spark's
# spark.ui.proxyBase; the operator sets it in every pod when it runs with --ui-path-prefix.
SPARK_UI_PROXY_BASE_ENV = "SPARKPOINT_SPARK_UI_PROXY_BASE"
# A standby pod (issue 43; runtime/service/standby.py): "true" starts `sparkpoint run` as a standby
# that follows the store's checkpoints (every STANDBY_INTERVAL_ENV seconds, default 2) until
# POST /promote; the operator sets both on the standby's pod.
STANDBY_ENV = "SPARKPOINT_STANDBY"
STANDBY_INTERVAL_ENV = "SPARKPOINT_STANDBY_INTERVAL"
STANDBY_WARMUP_ENV = "SPARKPOINT_STANDBY_WARMUP"
_UI_PATH_PREFIX = re.compile(r"^(/[A-Za-z0-9._~-]+)+$")


def ui_path_prefix(value: str) -> str:
    """--ui-path-prefix: '/a/b' (no trailing '/', path-safe characters), or a ValueError naming it."""
    if not _UI_PATH_PREFIX.match(value):
        raise ValueError(f"--ui-path-prefix {value!r}: a path like /sparkpoint (segments of letters, digits, "
                         "'.', '_', '~', '-'; no trailing '/')")
    return value


def ui_proxy_base(prefix: str, namespace: str, name: str) -> str:
    return f"{ui_path_prefix(prefix)}/{namespace}/{name}"
MIB = 1 << 20
# JVM non-heap (about 250 MiB for a Spark driver) plus the Python runtime (about 150 MiB), with margin.
NON_HEAP_RESERVE_MIB = 512
HEAP_FRACTION = Decimal("0.75")
# Spark refuses a driver whose heap is under 1.5 times its 300 MiB reserved memory ("System memory ...
# must be at least 471859200"); 512 MiB clears it with the JVM's own accounting (one survivor space less).
MIN_HEAP_MIB = 512
# The smallest container limit that leaves MIN_HEAP_MIB: MIN_MEMORY (a test keeps the two in step).
MIN_CONTAINER_MIB = MIN_HEAP_MIB + NON_HEAP_RESERVE_MIB


def driver_heap_mib(limit_bytes: int | Decimal) -> int:
    """The heap in MiB for a container limited to `limit_bytes`: min(limit - reserve, 0.75 limit).
    A limit too small for MIN_HEAP_MIB is a ValueError (the spec's minimum refuses it first)."""
    limit_mib = Decimal(limit_bytes) / MIB
    heap = int(min(limit_mib - NON_HEAP_RESERVE_MIB, limit_mib * HEAP_FRACTION))
    if heap < MIN_HEAP_MIB:
        raise ValueError(f"a memory limit of {limit_mib:.0f}Mi leaves a {heap}Mi driver heap; Spark needs "
                         f"{MIN_HEAP_MIB}Mi, so the limit must be at least {MIN_CONTAINER_MIB}Mi")
    return heap


def driver_memory(limit: str) -> str:
    """spark.driver.memory for a container limit given as a Kubernetes quantity ('2Gi' -> '1536m')."""
    return f"{driver_heap_mib(parse_quantity(limit))}m"


# What a value of each pattern looks like, for errors a person can act on without reading a regex.
PATTERN_HINTS = {
    DURATION_PATTERN: "a duration of up to six digits and a unit: 500ms, 30s, 5m or 1h",
    CPU_PATTERN: "a CPU quantity such as 1, 0.5 or 500m",
    MEMORY_PATTERN: "a memory quantity such as 512Mi, 2Gi or 4G",
    IMAGE_PATTERN: "an image reference such as sparkpoint/runtime:0.1.0 or ghcr.io/org/sparkpoint:1.0",
    MASTER_PATTERN: "local, local[N], local[*] or k8s",
    ENDPOINT_PATTERN: "http://host[:port] or https://host[:port]",
    SINK_PATH_PATTERN: "a relative path of segments like out/agg (no '.', '..' or empty segment)",
    SUBDOMAIN_PATTERN: "a DNS-1123 subdomain (lowercase letters, digits, '-' and '.')",
    JOB_NAME_PATTERN: "a DNS-1035 label (lowercase letters, digits and '-', starting with a letter)",
}


class SpecModel(BaseModel):
    """camelCase on the wire, snake_case in Python, unknown fields rejected (typos name the field),
    types strict as the API server checks them (0 is not a boolean, "3" is not an integer)."""

    model_config = ConfigDict(alias_generator=to_camel, populate_by_name=True, extra="forbid", strict=True)
