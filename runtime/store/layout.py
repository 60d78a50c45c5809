"""The object store key layout (docs/design.md section 3, a contract) as pure functions.

<prefix>/<namespace>/<job>/
  objects/<aa>/<sha256>             content-addressed blobs
  pending/<id>.json                 in-flight checkpoint (or savepoint copy) and what it references
  checkpoints/<checkpoint-id>.json  completed checkpoint manifest
  savepoints/<name>/manifest.json   savepoint manifest ...
  savepoints/<name>/objects/<aa>/<sha256>  ... and its own copies of every object
  fence.json                        current attempt number
  checkpoint-ids.json               {"highest": N}: checkpoint numbers a deleted incarnation used
  attempts/<n>.json                 the claim of attempt n (conditional create; see fence.py)
  lineage/<n>.<kind>.<name>.json    attempt n applied restoreFrom <kind>:<name> (recovery.py)
  outputs/...                       the exactly-once sink's table
  history/<a>/<s>/eventlog_v2_<app>/... Spark's event logs of operator attempt a, runtime start s
                                    (runtime/service/event_log.py; before: history/<s>/eventlog_v2_<app>/...)
"""

from __future__ import annotations

import re
from dataclasses import dataclass

_NAME = re.compile(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?$")
_SAVEPOINT_NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]{0,127}$")
_SHA256 = re.compile(r"^[0-9a-f]{64}$")
CHECKPOINT_ID = re.compile(r"^chk-(\d{6,})$")


@dataclass(frozen=True)
class JobRef:
    """A job's identity in the store: Kubernetes namespace and StreamingJob name."""

    namespace: str
    name: str

    def __post_init__(self) -> None:
        for part in (self.namespace, self.name):
            if not _NAME.match(part):
                raise ValueError(f"invalid job reference part {part!r}: must be a DNS-1123 label")

    @classmethod
    def parse(cls, text: str) -> JobRef:
        """'NAMESPACE/NAME' -> JobRef."""
        namespace, sep, name = text.partition("/")
        if not sep:
            raise ValueError(f"job must be given as NAMESPACE/NAME, got {text!r}")
        return cls(namespace=namespace, name=name)

    def __str__(self) -> str:
        return f"{self.namespace}/{self.name}"

    @property
    def root(self) -> str:
        return f"{self.namespace}/{self.name}"


def check_sha256(digest: str) -> str:
    if not _SHA256.match(digest):
        raise ValueError(f"not a sha256 hex digest: {digest!r}")
    return digest


def object_key(job: JobRef, sha256: str) -> str:
    check_sha256(sha256)
    return f"{job.root}/objects/{sha256[:2]}/{sha256}"


def objects_prefix(job: JobRef) -> str:
    return f"{job.root}/objects/"


def sha_of_object_key(key: str) -> str | None:
    tail = key.rsplit("/", 1)[-1]
    return tail if _SHA256.match(tail) else None


def checkpoint_id(number: int) -> str:
    return f"chk-{number:06d}"


def checkpoint_number(cid: str) -> int:
    m = CHECKPOINT_ID.match(cid)
    if not m:
        raise ValueError(f"invalid checkpoint id {cid!r} (expected chk-NNNNNN)")
    return int(m.group(1))


def checkpoint_key(job: JobRef, cid: str) -> str:
    checkpoint_number(cid)
    return f"{job.root}/checkpoints/{cid}.json"


def checkpoints_prefix(job: JobRef) -> str:
    return f"{job.root}/checkpoints/"


def pending_key(job: JobRef, marker_id: str) -> str:
    return f"{job.root}/pending/{marker_id}.json"


def pending_prefix(job: JobRef) -> str:
    return f"{job.root}/pending/"


def id_from_json_key(key: str) -> str:
    """'…/checkpoints/chk-000007.json' -> 'chk-000007'."""
    return key.rsplit("/", 1)[-1].removesuffix(".json")


def check_savepoint_name(name: str) -> str:
    if not _SAVEPOINT_NAME.match(name):
        raise ValueError(f"invalid savepoint name {name!r}: use letters, digits, '.', '_', '-' (max 128)")
    return name


def savepoint_root(job: JobRef, name: str) -> str:
    return f"{job.root}/savepoints/{check_savepoint_name(name)}"


def savepoint_manifest_key(job: JobRef, name: str) -> str:
    return f"{savepoint_root(job, name)}/manifest.json"


def savepoint_object_key(job: JobRef, name: str, sha256: str) -> str:
    check_sha256(sha256)
    return f"{savepoint_root(job, name)}/objects/{sha256[:2]}/{sha256}"


def savepoints_prefix(job: JobRef) -> str:
    return f"{job.root}/savepoints/"


def fence_key(job: JobRef) -> str:
    return f"{job.root}/fence.json"


def checkpoint_ids_key(job: JobRef) -> str:
    """The highest checkpoint number a deleted incarnation of the job name used (kept, as the fence)."""
    return f"{job.root}/checkpoint-ids.json"


def attempt_claim_key(job: JobRef, attempt: int) -> str:
    return f"{job.root}/attempts/{attempt:06d}.json"


def outputs_prefix(job: JobRef) -> str:
    return f"{job.root}/outputs/"


def lineage_prefix(job: JobRef) -> str:
    return f"{job.root}/lineage/"


def lineage_record_key(job: JobRef, attempt: int, tag: str) -> str:
    """The record that `attempt` applied the restore point `tag` ('fresh:upgrade-3')."""
    kind, sep, name = tag.partition(":")
    if not sep or kind not in ("checkpoint", "savepoint", "fresh") or not name or "/" in name:
        raise ValueError(f"invalid restore point tag {tag!r}")
    return f"{lineage_prefix(job)}{attempt:06d}.{kind}.{name}.json"


def lineage_record_of(key: str) -> tuple[int, str] | None:
    """'…/lineage/000007.fresh.upgrade-3.json' -> (7, 'fresh:upgrade-3'); None for another key."""
    if not key.endswith(".json"):
        return None
    parts = key.rsplit("/", 1)[-1].removesuffix(".json").split(".", 2)
    if len(parts) != 3 or not parts[0].isdigit() or not parts[2]:
        return None
    return int(parts[0]), f"{parts[1]}:{parts[2]}"


def history_prefix(job: JobRef) -> str:
    return f"{job.root}/history/"


def history_attempt_prefix(job: JobRef, attempt: int) -> str:
    """Every runtime start of the operator's attempt `attempt` (and a legacy start numbered so)."""
    return f"{history_prefix(job)}{attempt:06d}/"


@dataclass(frozen=True)
class HistoryEntry:
    """One event log file under history/ (docs/design.md §3). `attempt` is the operator's attempt
    (status.attempt, SPARKPOINT_ATTEMPT), `start` the number that runtime start claimed in the store
    (the fence, §5), unique per start, in-place restarts included. Keys written before the attempt
    level existed (`legacy`: history/<start>/eventlog_v2_<app>/<file>) carry only the start; they
    read as attempt = start."""

    attempt: int
    start: int
    app_dir: str
    name: str
    legacy: bool = False

    @property
    def run(self) -> tuple[int, int]:
        return self.attempt, self.start


def _check_event_log_relative(relative: str) -> None:
    parts = relative.split("/")
    if len(parts) != 2 or not parts[0].startswith("eventlog_v2_") or not all(parts) or \
            any(p in (".", "..") or p.startswith(".") for p in parts):
        raise ValueError(f"not an event log file of a rolling log directory: {relative!r}")


def history_key(job: JobRef, attempt: int, start: int, relative: str) -> str:
    """'eventlog_v2_local-1/events_1_local-1.zstd' of attempt 2, start 7 ->
    '…/history/000002/000007/eventlog_v2_local-1/events_1_local-1.zstd'."""
    _check_event_log_relative(relative)
    if attempt < 1 or start < 1:
        raise ValueError(f"attempt and start must be at least 1, not {attempt} and {start}")
    return f"{history_attempt_prefix(job, attempt)}{start:06d}/{relative}"


def history_entry_of(key: str, job: JobRef) -> HistoryEntry | None:
    """'…/history/000002/000007/eventlog_v2_X/events_1_X.zstd' -> attempt 2, start 7; the legacy
    '…/history/000007/eventlog_v2_X/events_1_X.zstd' -> attempt 7, start 7, legacy. None otherwise."""
    prefix = history_prefix(job)
    if not key.startswith(prefix):
        return None
    parts = key[len(prefix):].split("/")
    if len(parts) == 4 and parts[0].isdigit() and parts[1].isdigit() and parts[2].startswith("eventlog_v2_") \
            and parts[3]:
        return HistoryEntry(int(parts[0]), int(parts[1]), parts[2], parts[3])
    if len(parts) == 3 and parts[0].isdigit() and parts[1].startswith("eventlog_v2_") and parts[2]:
        return HistoryEntry(int(parts[0]), int(parts[0]), parts[1], parts[2], legacy=True)
    return None
