"""Garbage collection, the only deleter of checkpoint data (docs/design.md section 7).

One pass, in this order:
 1. list pending/ (markers older than the pending timeout are abandoned);
 2. list checkpoints/ (a checkpoint completing meanwhile is seen in one of the two lists:
    its manifest is written before its pending marker is deleted);
 3. keep the newest `retain` checkpoints plus pins; delete the other manifests, oldest first;
 4. live objects = objects of kept manifests and of live pending markers;
 5. list objects/, re-list pending/ (markers that appeared meanwhile are live too), and delete
    every object that is not live and older than the grace period, re-checking its age first.
Every step is idempotent; a crash between any two leaves a state the next pass finishes.
Steps 3 and 5 are refused (GcGraceError, nothing deleted) when the grace period is shorter than
twice the largest reuse window recorded by the kept manifests and live pending markers: the grace
must outlast any object a writer may still decide to reuse.
Savepoints live outside objects/ and are never touched.

Why a concurrent checkpoint is safe: the pass takes `now` before listing pending/, so an object
uploaded after that is never older than `now - grace`; objects the writer reuses without uploading
are either in the newest checkpoint (always kept) or younger than its reuse window (< grace).
Residual window: a writer re-uploading an *old orphan* between this pass's re-check (stat) and
its delete would lose that object; S3 has no conditional delete to close it.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Iterable
from dataclasses import asdict, dataclass, field

from sparkpoint.runtime.store import JobRef, ObjectInfo, ObjectStore, StoreError
from sparkpoint.runtime.store.layout import (
    CHECKPOINT_ID,
    checkpoint_key,
    id_from_json_key,
    objects_prefix,
    pending_prefix,
    sha_of_object_key,
)
from sparkpoint.runtime.store.manifest import ManifestError, PendingMarker

from .catalog import list_checkpoint_ids, load_manifest
from .records_gc import records_gc

log = logging.getLogger("sparkpoint.gc")


class GcError(StoreError):
    """GC could not establish which objects are live; it deleted no objects."""


class GcGraceError(GcError):
    """The grace period is too short for the reuse window writers recorded in the store."""


def min_grace_seconds(reuse_window_seconds: float) -> float:
    """The shortest safe grace for a writer reusing unreferenced objects younger than the window."""
    return 2 * reuse_window_seconds


def _duration_text(seconds: float) -> str:
    for unit, size in (("h", 3600), ("m", 60)):
        if seconds >= size and seconds % size == 0:
            return f"{seconds / size:g}{unit}"
    return f"{seconds:g}s"


@dataclass
class GcResult:
    kept_checkpoints: list[str] = field(default_factory=list)
    deleted_manifests: list[str] = field(default_factory=list)
    deleted_objects: int = 0
    deleted_bytes: int = 0
    live_objects: int = 0
    live_bytes: int = 0
    orphan_objects: int = 0  # unreferenced, still inside the grace period
    orphan_bytes: int = 0
    live_pending: list[str] = field(default_factory=list)
    deleted_pending: list[str] = field(default_factory=list)
    deleted_claims: int = 0  # attempt claims and lineage records no start reads any more (records_gc.py)
    deleted_lineage: int = 0
    dry_run: bool = False
    seconds: float = 0.0

    def to_dict(self) -> dict:
        return asdict(self)


class GcPass:
    """One GC pass; `run()` performs every step, tests may call the steps one at a time."""

    def __init__(
        self,
        store: ObjectStore,
        job: JobRef,
        *,
        retain: int,
        grace_seconds: float,
        pins: Iterable[str] = (),
        pending_timeout_seconds: float = 3600.0,
        dry_run: bool = False,
        clock: Callable[[], float] = time.time,
    ):
        if retain < 1:
            raise ValueError("retain must be at least 1 (the newest checkpoint is the writers' base)")
        if grace_seconds < 0 or pending_timeout_seconds < 0:
            raise ValueError("grace and pending timeout must not be negative")
        self.store, self.job, self.retain = store, job, retain
        self.grace, self.pending_timeout = grace_seconds, pending_timeout_seconds
        self.pins = {p for p in pins if CHECKPOINT_ID.match(p)}
        self.dry_run, self.clock = dry_run, clock
        self.result = GcResult(dry_run=dry_run)
        self.live: set[str] = set()
        self.abandoned: list[str] = []
        self.to_delete_manifests: list[str] = []
        self.candidates: list[ObjectInfo] = []
        self._seen_pending: set[str] = set()
        self.max_reuse_window, self._window_source = 0.0, ""

    # --- steps -----------------------------------------------------------------------------
    def list_pending(self) -> None:
        self.now = self.clock()
        self._read_pending(initial=True)

    def _read_pending(self, initial: bool) -> None:
        for info in self.store.list(pending_prefix(self.job)):
            if info.key in self._seen_pending or not info.key.endswith(".json"):
                continue
            self._seen_pending.add(info.key)
            marker_id = id_from_json_key(info.key)
            if initial and self.now - info.last_modified > self.pending_timeout:
                self.abandoned.append(info.key)
                continue
            try:
                marker = PendingMarker.from_json(self.store.get_bytes(info.key), where=info.key)
            except StoreError as exc:
                if isinstance(exc, ManifestError) or self.store.stat(info.key):
                    raise GcError(f"cannot read live pending marker {info.key}: {exc}") from exc
                continue  # completed and removed while we listed
            self.live.update(marker.objects)
            self.result.live_pending.append(marker_id)
            self._note_window(marker.reuse_window_seconds, f"pending {marker_id}")

    def list_checkpoints(self) -> None:
        ids = list_checkpoint_ids(self.store, self.job)
        newest = ids[-self.retain:]
        kept = [cid for cid in ids if cid in newest or cid in self.pins]
        self.result.kept_checkpoints = kept
        self.to_delete_manifests = [cid for cid in ids if cid not in kept]  # oldest first
        for cid in kept:
            try:
                manifest = load_manifest(self.store, self.job, cid)
            except ManifestError as exc:
                raise GcError(f"kept checkpoint {cid} is unreadable, so its objects are unknown: {exc}") from exc
            self.live.update(manifest.shas())
            self._note_window(manifest.reuse_window_seconds, f"checkpoint {cid}")
        self.check_grace()

    def _note_window(self, window: float | None, source: str) -> None:
        if window is not None and window > self.max_reuse_window:
            self.max_reuse_window, self._window_source = window, source

    def check_grace(self) -> None:
        """Refuse to delete anything with a grace shorter than twice the recorded reuse window."""
        needed = min_grace_seconds(self.max_reuse_window)
        if self.grace < needed:
            raise GcGraceError(
                f"job {self.job}: gc grace {_duration_text(self.grace)} is shorter than twice the largest "
                f"reuse window recorded in the store ({_duration_text(self.max_reuse_window)}, by "
                f"{self._window_source}): set the grace (--grace, spec.gc.grace) to at least "
                f"{_duration_text(needed)}, or take checkpoints with a smaller reuse window "
                "(--reuse-window of `sparkpoint checkpoints create`)")

    def delete_manifests(self) -> None:
        for cid in self.to_delete_manifests:
            if not self.dry_run:
                self.store.delete(checkpoint_key(self.job, cid))
            self.result.deleted_manifests.append(cid)

    def list_objects(self) -> None:
        cutoff = self.now - self.grace
        listed = list(self.store.list(objects_prefix(self.job)))
        self._read_pending(initial=False)  # markers written since step 1 keep their objects
        self.check_grace()
        for info in listed:
            sha = sha_of_object_key(info.key)
            if sha is not None and sha in self.live:
                self.result.live_objects += 1
                self.result.live_bytes += info.size
            elif info.last_modified < cutoff:
                self.candidates.append(info)
            else:
                self.result.orphan_objects += 1
                self.result.orphan_bytes += info.size

    def delete_object(self, info: ObjectInfo) -> None:
        if not self.dry_run:
            # Re-check: a writer may have re-uploaded (refreshed) this object since the listing.
            current = self.store.stat(info.key)
            if current is None:
                return
            if current.last_modified >= self.now - self.grace:
                self.result.orphan_objects += 1
                self.result.orphan_bytes += current.size
                return
            self.store.delete(info.key)
        self.result.deleted_objects += 1
        self.result.deleted_bytes += info.size

    def delete_abandoned_pending(self) -> None:
        for key in self.abandoned:
            if not self.dry_run:
                self.store.delete(key)
            self.result.deleted_pending.append(id_from_json_key(key))

    def run(self) -> GcResult:
        started = time.perf_counter()
        self.list_pending()
        self.list_checkpoints()
        self.delete_manifests()
        self.list_objects()
        for info in self.candidates:
            self.delete_object(info)
        self.delete_abandoned_pending()
        records = records_gc(self.store, self.job, now=self.now, grace_seconds=self.grace, dry_run=self.dry_run)
        self.result.deleted_claims, self.result.deleted_lineage = records.deleted_claims, records.deleted_lineage
        self.result.seconds = round(time.perf_counter() - started, 4)
        log.info("gc pass", extra={"job": str(self.job), **{k: v for k, v in self.result.to_dict().items()
                                                            if not isinstance(v, list)},
                                   "deleted_manifests": len(self.result.deleted_manifests)})
        return self.result


def gc_pass(
    store: ObjectStore,
    job: JobRef,
    retain: int = 3,
    grace_seconds: float = 3600.0,
    pins: Iterable[str] = (),
    pending_timeout_seconds: float = 3600.0,
    dry_run: bool = False,
    clock: Callable[[], float] = time.time,
) -> GcResult:
    return GcPass(store, job, retain=retain, grace_seconds=grace_seconds, pins=pins,
                  pending_timeout_seconds=pending_timeout_seconds, dry_run=dry_run, clock=clock).run()

