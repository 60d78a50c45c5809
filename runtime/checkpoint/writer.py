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
Here: step 1 (CheckpointWriter.begin); operation.py: steps 2 to 4 (CheckpointOperation).
"""

from __future__ import annotations

import logging
import os
import threading
import time
from collections.abc import Callable, Sequence
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from sparkpoint.runtime.store import JobRef, ObjectStore
from sparkpoint.runtime.store.layout import checkpoint_id, pending_key
from sparkpoint.runtime.store.manifest import FileEntry, Manifest, PendingMarker, utcnow

from . import inline
from .catalog import highest_checkpoint_number, latest_readable_checkpoint
from .concurrent_calls import in_background
from .errors import CheckpointError
from .hashing import HashCache, cache_key
from .id_floor import kept_id_floor
from .operation import CheckpointOperation, CheckpointResult, Progress, StopCheck, no_stop
from .own_markers import OwnMarkers
from .tickets import IdTickets
from .tree import scan_tree, tree_digests

log = logging.getLogger("sparkpoint.checkpoint")


def _with_remote(entries: list[FileEntry], remote: Sequence[FileEntry], carried: dict[str, str],
                 sources: dict[str, Path]) -> tuple[list[FileEntry], dict[str, int]]:
    """Local and remote entries by path (as one tree's scan would list them), and the objects only
    remote files provide: a content the driver also holds is uploaded by it, or carried inline."""
    if not remote:
        return entries, {}
    clash = {e.path for e in entries} & {e.path for e in remote}
    if clash:
        raise CheckpointError(f"not committing: {sorted(clash)[0]} is both the driver's and an executor's file")
    merged = entries + [e.model_copy(update={"data": carried.get(e.sha256)}) for e in remote]
    sizes = {e.sha256: e.size for e in remote if e.sha256 not in carried and e.sha256 not in sources}
    return sorted(merged, key=lambda e: e.path), sizes


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
        remote: Sequence[FileEntry] = (),
    ) -> CheckpointOperation:
        """Hash the tree, then (in ticket order) claim an id by writing the pending marker.
        `ticket` comes from `self.tickets.take()` in the caller's synchronous phase; begin always
        releases it. `remote`: files hashed elsewhere (the executors' state partitions, executor_state/),
        part of the manifest and named by the marker; their uploads are not this writer's
        (CheckpointOperation.remote_uploads)."""
        ticket = self.tickets.take() if ticket is None else ticket
        stop = stop_check or no_stop
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
            entries, remote_sizes = _with_remote(entries, remote, carried, sources)
            self.tickets.wait_turn(ticket, stop)
            stop()
            marker_id = self._claim_id(sorted({*sources, *remote_sizes}), highest.result())
        finally:
            self.tickets.release(ticket)
        return CheckpointOperation(
            writer=self, id=marker_id, entries=entries, sources=sources,
            files=[(path, st) for _, path, st in files], trigger_time=trigger_time,
            batch_id=batch_id, spark_version=spark_version, state_provider=state_provider,
            extra=dict(extra or {}), hash_seconds=hash_seconds, started=started, stop_check=stop,
            source_stats=stats, remote_sizes=remote_sizes)

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
