"""Taking a checkpoint of a frozen directory (docs/design.md section 4, asynchronous phase).

Protocol, in this order (the GC relies on it):
 1. hash every file (cache by inode/size/mtime), then, in ticket order (tickets.py), claim the next
    id with a conditional put of `pending/<id>.json` that lists every object the checkpoint will
    reference and the writer's reuse window;
 2. decide what to upload from ONE listing of the job's objects/ (not a request per object): an
    object is reused only if the store holds it with the right size and it belongs to
      - the base checkpoint (the newest completed one, which GC always retains), or
      - another pending marker of this writer that still exists and is younger than half the pending
        timeout (an operation in flight, or a failed one whose marker is kept: `carry_failed`), or
      - is younger than `reuse_window_seconds` (GC refuses a grace shorter than twice that window;
        0 = never, the runtime's setting, which lets GC delete orphans as soon as they are unreferenced);
    anything missing is uploaded again from the frozen files, so one lost object heals at the next
    checkpoint. What no listing can spare (plan.py) is uploaded while the listing is read. Once
    planned, this writer's failed markers claimed before this one are deleted: this operation's own
    marker lists every object it references;
 3. after each upload, re-stat the source: a file changed since it was hashed fails the checkpoint;
 4. re-stat every frozen file, check the fence, check that the pending marker still exists (if GC
    expired it, the objects it protected may be gone: fail rather than commit blindly), write the
    manifest with a conditional put, delete the pending marker.
A crash anywhere leaves at most a pending marker and unreferenced objects, which GC removes.
Why reusing from a kept marker M is safe: this operation's marker was written before it planned, and M
existed then; a GC pass that starts before M is deleted sees M (it is younger than the pending timeout),
and one that starts after sees this operation's marker, which lists every object it references.
`stop_check` (e.g. "has the request timed out?") is called between files and may raise to stop.
"""

from __future__ import annotations

import logging
import os
import threading
import time
from collections.abc import Callable
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from sparkpoint.runtime.store import JobRef, ObjectStore
from sparkpoint.runtime.store.layout import (
    checkpoint_id,
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
    PendingMarker,
    Totals,
    format_version_for,
    utcnow,
)

from . import inline
from .catalog import highest_checkpoint_number, latest_readable_checkpoint
from .concurrent_calls import concurrently, in_background
from .errors import CheckpointError
from .fence import check_fence
from .hashing import HashCache, cache_key
from .id_floor import kept_id_floor
from .own_markers import OwnMarkers
from .plan import ReuseRules, early_uploads, needed_uploads
from .tickets import IdTickets
from .tree import scan_tree, tree_digests

log = logging.getLogger("sparkpoint.checkpoint")
Progress = Callable[[int], None]
StopCheck = Callable[[], None]


def _no_stop() -> None:
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

    writer: CheckpointWriter
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
    stop_check: StopCheck = _no_stop
    source_stats: dict[str, os.stat_result] = field(default_factory=dict)

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
        sizes = {sha: self.source_stats[sha].st_size for sha in self.sources}
        self.to_upload = needed_uploads(rules, sizes, held, self.writer.clock())
        self.planned = True
        self.writer.own.note_verified(self.id, set(self.sources) - set(self.to_upload))
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
                if sha not in self.uploaded and sha not in sent:
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


class CheckpointWriter:
    """Takes checkpoints for one attempt of one job; operations may overlap (ids are claimed in
    ticket order, see tickets.py)."""

    def __init__(
        self,
        store: ObjectStore,
        job: JobRef,
        *,
        attempt: int,
        job_uid: str,
        hash_cache: HashCache | None = None,
        upload_workers: int = 8,
        hash_workers: int | None = None,
        reuse_window_seconds: float = 300.0,
        pending_timeout_seconds: float = 3600.0,  # GC's (gc --pending-timeout, spec.gc.pendingTimeout)
        clock: Callable[[], float] = time.time,
        full_upload: bool = False,
        carry_failed: bool = False,
        inline_max: int | None = None,
    ):
        self.store, self.job, self.attempt, self.job_uid = store, job, attempt, job_uid
        # Benchmark baseline only (bench/peer_bench.py "Sparkpoint full", `sparkpoint run --full-upload`):
        # every checkpoint uploads every file, as a non-incremental design would.
        self.full_upload = full_upload
        self.hash_cache = hash_cache if hash_cache is not None else HashCache(None)
        self.upload_workers = max(1, upload_workers)
        # Files up to this size travel in the manifest (inline.py); None: SPARKPOINT_CHECKPOINT_INLINE_MAX.
        self.inline_max = inline.max_file_from_env() if inline_max is None else inline_max
        self.hash_workers = hash_workers or min(4, os.cpu_count() or 1)
        self.reuse_window_seconds = reuse_window_seconds
        self.pending_timeout_seconds = pending_timeout_seconds
        self.clock = clock
        if reuse_window_seconds < 0:
            raise ValueError("reuse window must not be negative")
        self.base: Manifest | None = latest_readable_checkpoint(store, job)
        # ids never repeat for a job name: above what a deleted incarnation used (id_floor.py)
        self._next_number = kept_id_floor(store, job) + 1
        self.lock = threading.Lock()
        self.tickets = IdTickets()
        # Markers of this writer's operations, in flight or failed-and-kept (`carry_failed`, for a
        # long-lived writer such as the runtime's; a one-shot CLI drops its marker on failure).
        self.own = OwnMarkers(store, job, carry_failed=carry_failed, pending_timeout_seconds=pending_timeout_seconds,
                              clock=clock)

    def base_shas(self) -> set[str]:
        return self.base.shas() if self.base else set()

    def close(self) -> None:
        """Delete the kept markers of failed operations (the run ends: nothing will reuse them)."""
        self.own.drop_failed()

    def begin(
        self,
        frozen_dir: str | os.PathLike[str],
        *,
        batch_id: int | None,
        spark_version: str | None = None,
        state_provider: str | None = None,
        extra: dict[str, Any] | None = None,
        trigger_time: datetime | float | None = None,
        ticket: int | None = None,
        stop_check: StopCheck | None = None,
    ) -> CheckpointOperation:
        """Hash the tree, then (in ticket order) claim an id by writing the pending marker.
        `ticket` comes from `self.tickets.take()` in the caller's synchronous phase; begin always
        releases it."""
        ticket = self.tickets.take() if ticket is None else ticket
        stop = stop_check or _no_stop
        # The claim's lower bound is listed while the tree is scanned and hashed (one round trip
        # off the critical path); _claim_id's conditional create still decides.
        highest = in_background(lambda: highest_checkpoint_number(self.store, self.job))
        try:
            started = time.perf_counter()
            if isinstance(trigger_time, int | float):
                trigger_time = datetime.fromtimestamp(trigger_time, UTC)
            trigger_time = trigger_time or utcnow()
            files = scan_tree(Path(frozen_dir))

            digests = tree_digests(files, self.hash_cache, self.hash_workers, stop)
            shas = [d.sha256 for d in digests]
            self.hash_cache.retain_only({cache_key(st) for _, _, st in files})
            hash_seconds = time.perf_counter() - started
            try:
                carried = inline.choose(((path, st.st_size, sha) for (_, path, st), sha in zip(files, shas, strict=True)),
                                        max_file=self.inline_max, known=inline.carried_by(self.base))
            except inline.InlineError as exc:
                raise CheckpointError(f"not committing: {exc}") from None
            entries = [FileEntry(path=rel, size=st.st_size, sha256=d.sha256, crc32=d.crc32, data=carried.get(d.sha256))
                       for (rel, _, st), d in zip(files, digests, strict=True)]
            # Objects to upload or reuse: every hash not carried inline.
            sources = {sha: path for (_, path, _), sha in zip(files, shas, strict=True) if sha not in carried}
            stats = {sha: st for (_, _, st), sha in zip(files, shas, strict=True) if sha not in carried}
            self.tickets.wait_turn(ticket, stop)
            stop()
            marker_id = self._claim_id(sorted(sources), highest.result())
        finally:
            self.tickets.release(ticket)
        return CheckpointOperation(
            writer=self, id=marker_id, entries=entries, sources=sources,
            files=[(path, st) for _, path, st in files], trigger_time=trigger_time,
            batch_id=batch_id, spark_version=spark_version, state_provider=state_provider,
            extra=dict(extra or {}), hash_seconds=hash_seconds, started=started, stop_check=stop,
            source_stats=stats)

    def _claim_id(self, shas: list[str], highest: int) -> str:
        """Claim the first free id above `highest` (listed in the store) and this writer's last."""
        number = max(self._next_number, highest + 1)
        for _ in range(100):
            cid = checkpoint_id(number)
            marker = PendingMarker(id=cid, attempt=self.attempt, created=utcnow(), objects=shas,
                                   reuse_window_seconds=self.reuse_window_seconds)
            written_after = self.clock()
            if self.store.put_if_absent(pending_key(self.job, cid), marker.to_json()):
                self._next_number = number + 1
                self.own.written(cid, written_after)
                return cid
            number += 1
        raise CheckpointError(f"job {self.job}: could not claim a checkpoint id near {checkpoint_id(number)}")

    def take_checkpoint(
        self,
        frozen_dir: str | os.PathLike[str],
        batch_id: int | None = None,
        spark_version: str | None = None,
        state_provider: str | None = None,
        extra: dict[str, Any] | None = None,
        trigger_time: datetime | float | None = None,
        progress: Progress | None = None,
        stop_check: StopCheck | None = None,
    ) -> CheckpointResult:
        op = self.begin(frozen_dir, batch_id=batch_id, spark_version=spark_version,
                        state_provider=state_provider, extra=extra, trigger_time=trigger_time,
                        stop_check=stop_check)
        try:
            op.upload_all(progress)  # plans too
            return op.commit()
        except BaseException:
            op.abort()
            raise
