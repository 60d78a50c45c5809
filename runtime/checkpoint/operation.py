"""One checkpoint in flight, after its id is claimed (writer.py's protocol, steps 2 to 4): plan what
to upload from one listing of the job's objects, upload it and re-stat each source, then check the
frozen files, the fence and the pending marker and commit the manifest. Its steps can be driven one
by one (tests interleave operations); `abort` leaves what GC removes.
"""

from __future__ import annotations

import logging
import os
import threading
import time
from collections.abc import Callable
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path
from typing import Any, Protocol

from sparkpoint.runtime.store import JobRef, ObjectStore
from sparkpoint.runtime.store.layout import (
    checkpoint_key,
    checkpoint_number,
    object_key,
    objects_prefix,
    pending_key,
    sha_of_object_key,
)
from sparkpoint.runtime.store.manifest import (
    FileEntry,
    Manifest,
    Totals,
    format_version_for,
    utcnow,
)

from .concurrent_calls import concurrently, in_background
from .errors import CheckpointError
from .fence import check_fence
from .hashing import HashCache
from .own_markers import OwnMarkers
from .plan import ReuseRules, early_uploads, needed_uploads

log = logging.getLogger("sparkpoint.checkpoint")
Progress = Callable[[int], None]
StopCheck = Callable[[], None]


class Writer(Protocol):
    """What an operation reads of the writer that began it (writer.CheckpointWriter)."""

    store: ObjectStore
    job: JobRef
    job_uid: str
    attempt: int
    base: Manifest | None  # the newest committed checkpoint: a commit advances it, under `lock`
    lock: threading.Lock
    hash_cache: HashCache
    own: OwnMarkers
    clock: Callable[[], float]
    full_upload: bool
    reuse_window_seconds: float
    pending_timeout_seconds: float
    upload_workers: int


def no_stop() -> None:
    return None


def _same_file(a: os.stat_result, b: os.stat_result) -> bool:
    return (a.st_ino, a.st_size, a.st_mtime_ns) == (b.st_ino, b.st_size, b.st_mtime_ns)


@dataclass
class CheckpointResult:
    id: str
    files: int
    bytes: int
    new_bytes: int
    reused_bytes: int
    uploaded_objects: int
    hash_seconds: float
    upload_seconds: float
    total_seconds: float
    manifest: Manifest

    def summary(self) -> dict[str, Any]:
        return {k: v for k, v in self.__dict__.items() if k != "manifest"}


@dataclass
class CheckpointOperation:
    """One in-flight checkpoint; its steps can be driven one by one (tests interleave them)."""

    writer: Writer
    id: str
    entries: list[FileEntry]
    sources: dict[str, Path]  # sha256 -> a file with that content
    files: list[tuple[Path, os.stat_result]]  # every frozen file and its stat when it was hashed
    trigger_time: datetime
    batch_id: int | None
    spark_version: str | None
    state_provider: str | None
    extra: dict[str, Any]
    hash_seconds: float
    started: float
    to_upload: list[str] = field(default_factory=list)
    planned: bool = False
    base_id: str | None = None
    base_file_shas: set[str] = field(default_factory=set)  # every content of the base, inline or not
    uploaded: set[str] = field(default_factory=set)
    upload_seconds: float = 0.0
    stop_check: StopCheck = no_stop
    source_stats: dict[str, os.stat_result] = field(default_factory=dict)
    remote_sizes: dict[str, int] = field(default_factory=dict)  # sha256 -> size of objects others upload

    @property
    def store(self) -> ObjectStore:
        return self.writer.store

    def _rules(self) -> ReuseRules:
        """What this operation may reuse; read before the listing (see module doc)."""
        self.stop_check()
        base_manifest = self.writer.base  # may move on if another operation commits meanwhile
        self.base_id = base_manifest.id if base_manifest else None
        self.base_file_shas = {e.sha256 for e in base_manifest.files} if base_manifest else set()
        return ReuseRules(base=frozenset(base_manifest.shas() if base_manifest else ()),
                          carried=frozenset(self.writer.own.reusable(exclude=self.id)),
                          reuse_window_seconds=self.writer.reuse_window_seconds,
                          full_upload=self.writer.full_upload)

    def _decide(self, rules: ReuseRules) -> list[str]:
        """Plan from one listing of the job's objects: missing ones are always uploaded."""
        listing = self.store.list(objects_prefix(self.writer.job))
        held = {sha: i for i in listing if (sha := sha_of_object_key(i.key)) is not None}
        sizes = {sha: self.source_stats[sha].st_size for sha in self.sources} | self.remote_sizes
        self.to_upload = needed_uploads(rules, sizes, held, self.writer.clock())
        self.planned = True
        self.writer.own.note_verified(self.id, set(sizes) - set(self.to_upload))
        self.writer.own.drop_failed(before=self.id)
        return self.to_upload

    def plan(self) -> list[str]:
        """Decide which objects must be uploaded (after the pending marker exists)."""
        return self._decide(self._rules())

    def upload_one(self, sha: str) -> None:
        self.stop_check()
        key, path = object_key(self.writer.job, sha), self.sources[sha]
        self.store.put_file(key, str(path))
        if not _same_file(os.stat(path), self.source_stats[sha]):
            # The bytes uploaded may not be the ones hashed: never leave them under this hash.
            self.store.delete(key)
            raise CheckpointError(f"checkpoint {self.id}: {path} changed while it was uploaded "
                                  "(size or mtime differ from when it was hashed); not committing")
        self.uploaded.add(sha)
        self.writer.own.note_verified(self.id, {sha})

    def upload_all(self, progress: Progress | None = None) -> None:
        """Upload what the plan says; unplanned, plan first, and upload what no listing can spare
        (plan.py: early_uploads) while the listing is read."""
        t0 = time.perf_counter()
        sent: set[str] = set()
        futures: list[Future[None]] = []

        def upload(sha: str) -> None:
            self.upload_one(sha)
            if progress:
                progress(self.source_stats[sha].st_size)

        def send(shas: list[str]) -> None:
            for sha in shas:
                if sha in self.sources and sha not in self.uploaded and sha not in sent:
                    sent.add(sha)
                    futures.append(pool.submit(upload, sha))
        with ThreadPoolExecutor(self.writer.upload_workers) as pool:
            try:
                if not self.planned:
                    rules = self._rules()
                    send(early_uploads(rules, self.sources))
                    self._decide(rules)
                send(self.to_upload)
                for f in futures:
                    f.result()  # the first failure
            except BaseException:
                for f in futures:
                    f.cancel()
                raise
        self.upload_seconds += time.perf_counter() - t0

    def remote_uploads(self) -> list[str]:
        """The planned objects that only remote files provide (the executors upload them)."""
        return [sha for sha in self.to_upload if sha not in self.sources and sha not in self.uploaded]

    def remote_uploaded(self, shas: set[str]) -> None:
        """An executor acknowledged these uploads (executor_state/driver.py)."""
        unknown = shas - set(self.remote_sizes)
        if unknown:
            raise CheckpointError(f"checkpoint {self.id}: acknowledged objects it does not reference: {sorted(unknown)[:3]}")
        self.uploaded |= shas
        self.writer.own.note_verified(self.id, shas)

    def _check_before_commit(self) -> None:
        changed = [str(path) for path, st in self.files if not _same_file(os.stat(path), st)]
        if changed:
            raise CheckpointError(f"checkpoint {self.id}: {len(changed)} frozen file(s) changed after "
                                  f"hashing, e.g. {changed[0]}; not committing")
        w = self.writer
        # One round trip: the fence's probes and the marker's stat run at once (concurrent_calls.py).
        _, marker = concurrently(lambda: check_fence(w.store, w.job, w.attempt),
                                 lambda: w.store.stat(pending_key(w.job, self.id)))
        if marker is None:
            raise CheckpointError(
                f"checkpoint {self.id} of job {w.job}: its pending marker is gone (expired and removed by "
                "GC?), so objects it protected may be gone too; not committing")
        if w.clock() - marker.last_modified >= w.pending_timeout_seconds:
            raise CheckpointError(
                f"checkpoint {self.id} of job {w.job}: its pending marker is older than the GC pending "
                f"timeout ({w.pending_timeout_seconds:g}s), so GC may have collected what it protected; "
                "not committing")

    def commit(self) -> CheckpointResult:
        """Fence check, conditional manifest write, pending marker removal."""
        w = self.writer
        if not self.planned or set(self.to_upload) - self.uploaded:
            raise CheckpointError(f"checkpoint {self.id}: commit before all objects were uploaded")
        sizes = {e.sha256: e.size for e in self.entries}
        total = sum(e.size for e in self.entries)
        carried = {e.sha256: e.size for e in self.entries if e.inline}
        # Inline files are new when their base did not have them (their bytes travel in this manifest).
        new_bytes = sum(sizes[sha] for sha in self.uploaded) + sum(
            size for sha, size in carried.items() if sha not in self.base_file_shas)
        manifest = Manifest(
            format_version=format_version_for(self.entries), id=self.id, namespace=w.job.namespace,
            job=w.job.name, job_uid=w.job_uid,
            attempt=w.attempt, batch_id=self.batch_id, trigger_time=self.trigger_time,
            completion_time=utcnow(), base_checkpoint=self.base_id,
            spark_version=self.spark_version, state_provider=self.state_provider, files=self.entries,
            totals=Totals(files=len(self.entries), bytes=total, new_bytes=new_bytes,
                          reused_bytes=total - new_bytes, inline_bytes=sum(e.size for e in self.entries if e.inline)),
            extra=self.extra, reuse_window_seconds=w.reuse_window_seconds,
        )
        self.stop_check()
        self._check_before_commit()
        if not w.store.put_if_absent(checkpoint_key(w.job, self.id), manifest.to_json()):
            raise CheckpointError(f"checkpoint {self.id} of job {w.job} already exists; not overwriting")
        # Completed: the marker's removal and the hash cache's save (local disk) overlap.
        removed = in_background(lambda: w.store.delete(pending_key(w.job, self.id)))
        with w.lock:
            if w.base is None or checkpoint_number(manifest.id) > checkpoint_number(w.base.id):
                w.base = manifest
            w.hash_cache.save()
        removed.result()
        w.own.committed(self.id)
        result = CheckpointResult(
            id=self.id, files=len(self.entries), bytes=total, new_bytes=new_bytes,
            reused_bytes=total - new_bytes, uploaded_objects=len(self.uploaded),
            hash_seconds=round(self.hash_seconds, 4), upload_seconds=round(self.upload_seconds, 4),
            total_seconds=round(time.perf_counter() - self.started, 4), manifest=manifest)
        log.info("checkpoint completed", extra={"job": str(w.job), **result.summary()})
        return result

    def abort(self, keep: bool | None = None) -> None:
        """Give the operation up; its pending marker is kept for the next checkpoint to reuse from, or
        deleted (own_markers.OwnMarkers.give_up)."""
        self.writer.own.give_up(self.id, keep)
