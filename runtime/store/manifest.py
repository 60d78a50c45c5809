"""Manifests, pending markers and the fence record: the JSON documents of the store layout.

A manifest's existence under checkpoints/ means "completed"; it lists every file of the frozen
hot dir with its size and content hash (DESIGN.md section 3).
"""

from __future__ import annotations

import json
from datetime import UTC, datetime
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from .base import StoreError

FORMAT_VERSION = 1


class ManifestError(StoreError):
    """A manifest, pending marker or fence document is unreadable or malformed."""


def utcnow() -> datetime:
    return datetime.now(UTC)


class FileEntry(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)

    path: str  # relative to the hot dir, '/'-separated; validated against escapes at restore
    size: int = Field(ge=0)
    sha256: str = Field(pattern=r"^[0-9a-f]{64}$")


class Totals(BaseModel):
    model_config = ConfigDict(extra="forbid")

    files: int
    bytes: int
    new_bytes: int  # bytes this checkpoint had to upload
    reused_bytes: int  # bytes already in the store (unchanged files)


class Manifest(BaseModel):
    model_config = ConfigDict(extra="forbid")

    format_version: int = FORMAT_VERSION
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

    def to_json(self) -> bytes:
        return self.model_dump_json(indent=1).encode()

    @classmethod
    def from_json(cls, data: bytes, *, where: str) -> Manifest:
        return _parse(cls, data, where)

    def shas(self) -> set[str]:
        return {f.sha256 for f in self.files}


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

    def to_json(self) -> bytes:
        return self.model_dump_json(exclude_none=True).encode()  # fence.json keeps its old shape

    @classmethod
    def from_json(cls, data: bytes, *, where: str) -> Fence:
        return _parse(cls, data, where)


def _parse(model: type, data: bytes, where: str):  # type: ignore[no-untyped-def]
    try:
        return model.model_validate(json.loads(data))
    except (ValueError, ValidationError) as exc:  # JSONDecodeError is a ValueError
        first = str(exc).splitlines()[0][:200]
        raise ManifestError(f"corrupt {model.__name__.lower()} {where}: {first}") from None
