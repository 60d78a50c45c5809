"""The documents between the driver and an executor (docs/design.md §4, "Executor-side state").

`PrepareRequest`: the batch C and, for checkpoint format v2, the committed uuids. `ExecutorReport` (after `prepare`): which state partition directories this executor holds complete
for a restart after batch C, which it holds incompletely and why (a stale copy of a partition that
moved, a gap), and every file of the complete ones with its size and digests. `UploadAck` (after
`upload`): which of the objects the driver asked for this executor uploaded, under which key, for
which pending checkpoint, and which it refused because the file changed after it was hashed.
"""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel, ConfigDict, Field


class PrepareRequest(BaseModel):
    """What the driver asks an executor to prepare: batch C, and for checkpoint format v2 the
    `stateUniqueIds` of the commit entries on the driver's disk up to C (an executor has no commits/,
    and the uuids say which copy of a version is the committed one: checkpoint/freeze.py)."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    batch: int = Field(ge=0)
    lineage: dict[int, dict[str, Any]] = {}  # commit batch -> its stateUniqueIds {operator: [[uuid...]...]}

    def to_json(self) -> bytes:
        return self.model_dump_json().encode()

    @classmethod
    def from_json(cls, data: bytes | str) -> PrepareRequest:
        return cls.model_validate_json(data)


class StateFile(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)

    path: str  # relative to the checkpoint location, '/'-separated: state/<op>/<partition>/...
    size: int = Field(ge=0)
    sha256: str = Field(pattern=r"^[0-9a-f]{64}$")  # names the object: objects/<aa>/<sha256>
    crc32: str = Field(pattern=r"^[0-9a-f]{8}$")  # what a restore checks


class ExecutorReport(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)

    executor: str
    batch: int = Field(ge=0)  # the committed batch C the driver asked for (state version C+1)
    covered: list[str]  # state/<op>/<partition> directories whose restart set is complete here
    incomplete: dict[str, str] = {}  # state/<op>/<partition> -> why its restart set is not
    files: list[StateFile]  # every file of the covered directories' restart sets, by path

    def to_json(self) -> bytes:
        return self.model_dump_json().encode()

    @classmethod
    def from_json(cls, data: bytes | str) -> ExecutorReport:
        return cls.model_validate_json(data)


class UploadRequest(BaseModel):
    """What the driver asks an executor to upload: objects of the batch it prepared, for a checkpoint."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    batch: int = Field(ge=0)
    checkpoint: str = Field(pattern=r"^chk-\d{6,}$")
    shas: list[str]

    def to_json(self) -> bytes:
        return self.model_dump_json().encode()


class UploadAck(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)

    executor: str
    checkpoint: str  # the driver's pending checkpoint id the uploads were made under
    uploaded: dict[str, str]  # sha256 -> the object key written
    changed: list[str] = []  # sha256s whose file changed after hashing: uploaded, then not acknowledged
    uploaded_bytes: int = 0
    seconds: float = 0.0

    def to_json(self) -> bytes:
        return self.model_dump_json().encode()

    @classmethod
    def from_json(cls, data: bytes | str) -> UploadAck:
        return cls.model_validate_json(data)
