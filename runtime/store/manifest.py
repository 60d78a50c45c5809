"""Manifests, pending markers and the fence record: the JSON documents of the store layout.

A manifest's existence under checkpoints/ means "completed"; it lists every file of the frozen
hot dir with its size and content hash (docs/design.md section 3). A small file's bytes may travel in
its entry (`data`) instead of as an object of its own: Spark writes several tiny files per batch
(offset and commit logs, Hadoop .crc sidecars), and a request each would dominate a checkpoint.
"""

from __future__ import annotations

import base64
import binascii
import json
from datetime import UTC, datetime
from typing import Any, Literal

from pydantic import (
    BaseModel,
    ConfigDict,
    Field,
    SerializerFunctionWrapHandler,
    ValidationError,
    model_serializer,
    model_validator,
)

from .base import StoreError

FORMAT_VERSION = 3  # the newest this code reads and writes; readers take every version up to theirs
INLINE_FORMAT_VERSION = 2  # 2: FileEntry.data (inline files)
CRC32_FORMAT_VERSION = 3  # 3: FileEntry.crc32 (what a restore verifies); without either, written as 1


class ManifestError(StoreError):
    """A manifest, pending marker or fence document is unreadable or malformed."""


def utcnow() -> datetime:
    return datetime.now(UTC)


class FileEntry(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)

    path: str  # relative to the hot dir, '/'-separated; validated against escapes at restore
    size: int = Field(ge=0)
    sha256: str = Field(pattern=r"^[0-9a-f]{64}$")
    data: str | None = None  # base64 of the bytes of an inline file (no object); verified at restore
    # CRC-32 of the bytes, 8 hex digits: a restore checks it instead of sha256, at a third of the
    # CPU (store/digests.py). None in manifests written before format 3: those restore by sha256.
    crc32: str | None = Field(default=None, pattern=r"^[0-9a-f]{8}$")

    @model_serializer(mode="wrap")
    def _without_absent_fields(self, handler: SerializerFunctionWrapHandler) -> dict[str, Any]:
        out = handler(self)
        for optional in ("data", "crc32"):  # absent, an entry keeps the version-1 shape
            if out.get(optional) is None:
                out.pop(optional, None)
        return out

    @property
    def inline(self) -> bool:
        return self.data is not None

    def inline_bytes(self) -> bytes:
        """The inline file's bytes as stored (the caller checks size and sha256)."""
        if self.data is None:
            raise ValueError(f"{self.path!r} is not inline")
        try:
            return base64.b64decode(self.data, validate=True)
        except binascii.Error as exc:
            raise ManifestError(f"inline data of {self.path!r} is not base64: {exc}") from None

    @classmethod
    def inline_file(cls, path: str, data: bytes, sha256: str) -> FileEntry:
        return cls(path=path, size=len(data), sha256=sha256, data=base64.b64encode(data).decode())


def format_version_for(files: list[FileEntry]) -> int:
    """The oldest format that holds these entries, so older readers keep reading what they can."""
    if any(f.crc32 is not None for f in files):
        return CRC32_FORMAT_VERSION
    if any(f.inline for f in files):
        return INLINE_FORMAT_VERSION
    return 1


class Totals(BaseModel):
    model_config = ConfigDict(extra="forbid")

    files: int
    bytes: int
    new_bytes: int  # bytes this checkpoint had to upload (objects, and inline files new since its base)
    reused_bytes: int  # bytes already in the store (unchanged files)
    inline_bytes: int = 0  # bytes of the files carried in the manifest itself


class Manifest(BaseModel):
    model_config = ConfigDict(extra="forbid")

    format_version: int = 1
    kind: Literal["checkpoint", "savepoint"] = "checkpoint"
    id: str  # chk-NNNNNN, or the savepoint name
    namespace: str
    job: str
    job_uid: str
    attempt: int
    batch_id: int | None  # the Spark batch a restart resumes after (None: not a Spark tree)
    trigger_time: datetime
    completion_time: datetime
    base_checkpoint: str | None  # checkpoint whose objects this one reused
    source_checkpoint: str | None = None  # for savepoints: the checkpoint it copies
    spark_version: str | None
    state_provider: str | None
    files: list[FileEntry]
    totals: Totals
    # The writer's reuse window: GC refuses a grace period shorter than twice the largest one it
    # finds (None: written before the window was recorded).
    reuse_window_seconds: float | None = Field(default=None, ge=0)
    extra: dict[str, Any] = Field(default_factory=dict)

    @model_validator(mode="after")
    def _readable_version(self) -> Manifest:
        if self.format_version > FORMAT_VERSION:
            raise ValueError(f"format_version {self.format_version} was written by a newer Sparkpoint; "
                             f"this one reads up to {FORMAT_VERSION}")
        return self

    def to_json(self) -> bytes:
        return self.model_dump_json(indent=1).encode()

    @classmethod
    def from_json(cls, data: bytes, *, where: str) -> Manifest:
        return _parse(cls, data, where)

    def shas(self) -> set[str]:
        """The objects (under objects/) this manifest references; inline files have none."""
        return {f.sha256 for f in self.files if f.data is None}


class PendingMarker(BaseModel):
    """Written before any upload; GC treats every object it lists as live until it times out."""

    model_config = ConfigDict(extra="forbid")

    id: str
    kind: Literal["checkpoint", "savepoint"] = "checkpoint"
    attempt: int
    created: datetime
    objects: list[str]  # sha256 of every object under objects/ the operation will reference
    reuse_window_seconds: float | None = Field(default=None, ge=0)  # see Manifest

    def to_json(self) -> bytes:
        return self.model_dump_json().encode()

    @classmethod
    def from_json(cls, data: bytes, *, where: str) -> PendingMarker:
        return _parse(cls, data, where)


class Fence(BaseModel):
    model_config = ConfigDict(extra="forbid")

    attempt: int = Field(ge=0)
    updated: datetime
    owner: str | None = None  # random per claimer: a claim's bytes are never written by two starters
    # On a claim (attempts/<n>.json): the job incarnation (CR uid) and the operator's attempt number
    # of the pod that claimed it, so a zombie pod restarted late cannot fence off a newer pod.
    incarnation: str | None = None
    launch: int | None = None

    def to_json(self) -> bytes:
        return self.model_dump_json(exclude_none=True).encode()  # fence.json keeps its old shape

    @classmethod
    def from_json(cls, data: bytes, *, where: str) -> Fence:
        return _parse(cls, data, where)


def _parse(model: type[BaseModel], data: bytes, where: str):  # type: ignore[no-untyped-def]
    try:
        return model.model_validate(json.loads(data))
    except ValidationError as exc:  # name the fields, e.g. "files.3.sha256: String should match ..."
        found = "; ".join(f"{'.'.join(map(str, e['loc'])) or 'document'}: {e['msg']}" for e in exc.errors()[:3])
        raise ManifestError(f"corrupt {model.__name__.lower()} {where}: {found[:300]}") from None
    except ValueError as exc:  # JSONDecodeError is a ValueError
        raise ManifestError(f"corrupt {model.__name__.lower()} {where}: {str(exc)[:200]}") from None
