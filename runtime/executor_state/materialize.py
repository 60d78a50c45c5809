"""An executor's side of a restore (docs/design.md §4, "Restores on N executors"): the state partitions
of the restore point, fetched by the executor that opens them, when it first does.

The driver restores only its share and tells each agent the restore point with the files of every
state partition (`RestoreSet`: the executor role cannot read manifests). The JVM file system
(jvm/, `sparkpoint://`) asks the agent to `materialize` a partition directory the first time its
process touches it. The agent downloads that partition's files, checks each one's size and digest
(checkpoint/restore.py's checks: a corrupt or missing object is a RestoreError that names the restore
point, as a driver's restore blames it) and puts each in place atomically (a temp file in the same
directory, then a rename). It is idempotent (a partition is fetched once per restore point; a file
already on disk with the right size and digests is kept) and concurrent calls for one directory wait
for the one fetch.
"""

from __future__ import annotations

import os
import threading
import time
import uuid
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

from pydantic import BaseModel, ConfigDict

from sparkpoint.runtime.checkpoint.freeze import partition_dir_of
from sparkpoint.runtime.checkpoint.restore import (
    RestoreError,
    fetch_verified,
    local_copy_matches,
    safe_relative_path,
)
from sparkpoint.runtime.store import JobRef, ObjectStore
from sparkpoint.runtime.store.layout import object_key, savepoint_object_key
from sparkpoint.runtime.store.manifest import FileEntry, Manifest


class RestoreSet(BaseModel):
    """What the driver tells an agent before the query starts: the restore point and the files of its
    state partitions. `point` None: a fresh start (nothing to fetch; a partition starts empty)."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    point: str | None  # the restore point's tag: checkpoint:chk-000007 or savepoint:<name>
    savepoint: str | None = None  # a savepoint's objects live under savepoints/<name>/objects/
    files: list[FileEntry] = []

    @classmethod
    def of(cls, manifest: Manifest, savepoint: str | None = None) -> RestoreSet:
        """The state stores' entries of a manifest (the driver's share is everything else: restore.py)."""
        tag = f"savepoint:{savepoint}" if savepoint else f"{manifest.kind}:{manifest.id}"
        return cls(point=tag, savepoint=savepoint,
                   files=[e for e in manifest.files if partition_dir_of(e.path) and e.path.split("/")[3:4] != ["_metadata"]])

    def key_of(self, job: JobRef) -> Callable[[str], str]:
        name = self.savepoint
        return (lambda sha: savepoint_object_key(job, name, sha)) if name else (lambda sha: object_key(job, sha))


class Materialized(BaseModel):
    dir: str  # state/<op>/<partition>
    files: int  # of the restore point in this partition
    bytes: int
    fetched_files: int  # downloaded now (0 for a repeated call, or files already on disk)
    fetched_bytes: int
    seconds: float


class NoRestorePoint(Exception):
    """The driver has not told this agent the restore point yet: nothing may be materialized."""


class Materializer:
    """An agent's restores of one restore point into `state_root` (this executor's disk)."""

    def __init__(self, state_root: str | os.PathLike[str], store: ObjectStore, job: JobRef, *, workers: int = 8):
        self.root, self.store, self.job, self.workers = Path(state_root).absolute(), store, job, workers
        self.restore_set: RestoreSet | None = None
        self.by_dir: dict[str, list[FileEntry]] = {}
        self.done: dict[str, Materialized] = {}
        self.lock = threading.Lock()
        self.dir_locks: dict[str, threading.Lock] = {}

    def set_point(self, restore_set: RestoreSet) -> None:
        """Before the query starts. Setting the same point again is a no-op; another point once a
        partition was materialized is refused (its directory holds the first point's state)."""
        by_dir: dict[str, list[FileEntry]] = {}
        for entry in restore_set.files:
            part = partition_dir_of(str(safe_relative_path(entry.path)))
            if part is None or entry.inline:
                raise ValueError(f"{entry.path!r} is not a state partition's object file")
            by_dir.setdefault(part, []).append(entry)
        with self.lock:
            if self.restore_set is not None and self.done and restore_set.point != self.restore_set.point:
                raise NoRestorePoint(f"partitions were materialized from {self.restore_set.point} already; "
                                     f"not switching to {restore_set.point}")
            self.restore_set, self.by_dir = restore_set, by_dir

    def relative(self, directory: str) -> str:
        """`state/<op>/<partition>` of an absolute partition directory under the state root."""
        try:
            rel = Path(directory).absolute().relative_to(self.root).as_posix()
        except ValueError:
            raise ValueError(f"{directory} is not under this agent's state root {self.root}") from None
        if partition_dir_of(rel) != rel:
            raise ValueError(f"{directory} is not a state partition directory (state/<op>/<partition>)")
        return rel

    def materialize(self, directory: str) -> Materialized:
        rel = self.relative(directory)
        with self.lock:
            restore_set = self.restore_set
            if restore_set is None:
                raise NoRestorePoint("the driver has not set the restore point: refusing to start a partition "
                                     "empty")
            lock = self.dir_locks.setdefault(rel, threading.Lock())
        with lock:
            known = self.done.get(rel)
            if known is not None:
                return known.model_copy(update={"fetched_files": 0, "fetched_bytes": 0, "seconds": 0.0})
            result = self._fetch(rel, restore_set)
            with self.lock:
                self.done[rel] = result
            return result

    def _fetch(self, rel: str, restore_set: RestoreSet) -> Materialized:
        started = time.perf_counter()
        entries = self.by_dir.get(rel, [])
        key_of = restore_set.key_of(self.job)

        def one(entry: FileEntry) -> bool:
            """Put one file in place; False when the copy on disk is it already."""
            dest = self.root / entry.path
            dest.parent.mkdir(parents=True, exist_ok=True)
            if dest.is_file() and local_copy_matches(dest, entry):
                return False
            tmp = dest.with_name(f".{dest.name}.sparkpoint-{uuid.uuid4().hex[:8]}.tmp")
            try:
                fetch_verified(self.store, key_of(entry.sha256), entry, tmp)
                os.replace(tmp, dest)
            except RestoreError as exc:
                raise RestoreError(f"restore point {restore_set.point}: {exc}", reason=exc.reason,
                                   points=(restore_set.point,) if restore_set.point else ()) from exc
            finally:
                tmp.unlink(missing_ok=True)
            return True

        (self.root / rel).mkdir(parents=True, exist_ok=True)
        with ThreadPoolExecutor(max(1, min(self.workers, len(entries) or 1))) as pool:
            fetched = [e for e, new in zip(entries, pool.map(one, entries), strict=True) if new]
        return Materialized(dir=rel, files=len(entries), bytes=sum(e.size for e in entries),
                            fetched_files=len(fetched), fetched_bytes=sum(e.size for e in fetched),
                            seconds=round(time.perf_counter() - started, 4))

    def summary(self) -> dict[str, object]:
        """What this agent materialized: the restore point, each partition's figures, the totals."""
        with self.lock:
            done = sorted(self.done.values(), key=lambda m: m.dir)
            point = self.restore_set.point if self.restore_set else None
        return {"point": point, "partitions": [m.model_dump() for m in done],
                "fetched_files": sum(m.fetched_files for m in done), "fetched_bytes": sum(m.fetched_bytes for m in done)}


