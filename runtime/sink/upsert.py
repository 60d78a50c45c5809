"""Low-latency sink: every batch is visible at once; rows are upserts by key (docs/design.md §6).

Layout under `outputs/<path>/upserts/`:

  batch-<B>-a<A>-<run>/part-<i>.parquet  batch B's changed rows as run by attempt A, written by Spark's
                                         executors (`.json`: JSON lines with `job.sink.format: jsonl`)
  batch-<B>-a<A>.json    {"batch", "attempt", "run", "format", "rows", "keys"}: the batch's marker, put
                         after its files; it makes them visible and is the only truth (a re-run of the
                         batch by the same attempt writes a new run and then replaces the marker)
  batch-<B>-a<A>.jsonl   the same written by the driver, before executor-written files (still read)
  _restores/a<A>.json    {"attempt": A, "afterBatch": R, "parent": P, "incarnation": uid}: attempt A
                         (of the StreamingJob with that uid) continues attempt P's history after batch
                         R (P: who took the restored point; no `parent`: the previous attempt)
  _snapshots/            folded snapshots up to a batch S (upsert_snapshot.py): readers start from the
                         newest usable one, and GC then collects the batches <= S

Guarantee (at-least-once delivery, effectively-once state, also across restores to an older point):
a reader folds, in batch order, the batches of one history, keeping the last row per key. An attempt
that starts after batch R (a restore of any checkpoint or savepoint, local recovery, or R = -1 for a
fresh start) first records `_restores/a<A>.json`; its history is then its own batches over its
parent's history up to R (upsert_history.py: attempts form a tree), so a restore never mixes in rows
of batches the restored history has not run (e.g. keys only an abandoned branch produced), also when
it returns to a branch a later attempt left. Once the new run has re-run past the old point, the table
equals the failure-free result; in between a reader sees the state as of R plus the batches re-run so far.

Snapshots (`compact`, at most once per `job.sink.compaction.interval`) keep that output bounded: S is at
or below every checkpoint's and savepoint's batch and what the newest attempt committed, so no later
restore goes back before S except a fresh start, which supersedes everything older anyway; the
argument is in upsert_snapshot.py and docs/design.md §7.

The driver never holds a batch: the executors write it into a local folder of the work dir
(batch_files.py), the driver streams the files to the store and then puts the marker. A store outage
stalls this sink's batches (each batch must reach the store to be visible); it retries with backoff
until the store is back and never drops rows nor ends the query for it.
"""

from __future__ import annotations

import json
import logging
import shutil
import threading
import time
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

from sparkpoint.runtime.checkpoint.fence import FencedError, check_fence, read_fence
from sparkpoint.runtime.store import JobRef, ObjectStore
from sparkpoint.runtime.store.base import StoreUnreachableError

from .batch_files import remove_tries, write_batch_files, write_checked
from .compaction import CompactionSettings
from .keys import FORMATS, sink_root
from .reader import decode_file
from .rows import decode_rows
from .upsert_files import upsert_files, upsert_tree, visible_batches, visible_entries
from .upsert_history import PREVIOUS
from .upsert_snapshot import (
    current_snapshot,
    low_restores,
    restorable_points,
    safe_batch,
    snapshot_rows,
    write_snapshot,
)

log = logging.getLogger("sparkpoint.sink")
MAX_RETRY_DELAY = 30.0


class UpsertSink:
    kind = "upsert"

    def __init__(self, store: ObjectStore, job: JobRef, *, path: str, key_columns: list[str], staging_dir: Path,
                 attempt: int = 0, incarnation: str | None = None, fmt: str = "parquet",
                 write_files: Callable[[Any, Path, str], int] = write_batch_files,
                 compaction: CompactionSettings | None = None):
        self.store, self.job, self.path, self.key_columns, self.attempt = store, job, path, key_columns, attempt
        self.incarnation = incarnation  # attempts are unique across jobs of one name (the fence is kept)
        self.fmt, self.write_files = fmt, write_files  # write_files: Spark's executors write the batch
        self.staging_dir = Path(staging_dir)  # in the work dir: executors on Kubernetes share it
        shutil.rmtree(self.staging_dir, ignore_errors=True)  # a killed run's leftovers
        self.staging_dir.mkdir(parents=True, exist_ok=True)
        self.stopping = threading.Event()
        self.compaction = compaction  # None: never snapshots
        self.short_writes = 0  # tries whose part files held fewer rows than Spark counted (batch_files.py)
        self._compacted_at = time.monotonic()

    def write_batch(self, df: Any, batch_id: int) -> int:
        missing = [c for c in self.key_columns if c not in df.columns]
        if missing:
            raise ValueError(f"upsert sink: key columns {missing} are not in the output {df.columns}")
        run = uuid.uuid4().hex[:12]
        local = self.staging_dir / f"batch-{batch_id}-{run}"
        try:
            rows, _, parts = write_checked(self.write_files, df, local, self.fmt, on_short=self._short_write)
            if not rows:
                return 0
            root = f"{sink_root(self.job, self.path)}/upserts/batch-{batch_id:09d}-a{self.attempt:06d}"
            keys = [f"{root}-{run}/part-{i:05d}{FORMATS[self.fmt]}" for i in range(len(parts))]
            for part, key in zip(parts, keys, strict=True):  # streamed from disk: a batch may be gigabytes
                self._until_stored(self.store.put_file, key, str(part))
            marker = {"batch": batch_id, "attempt": self.attempt, "run": run, "format": self.fmt,
                      "rows": rows, "keys": keys}
            self._until_stored(self.store.put_bytes, f"{root}.json", json.dumps(marker).encode())
            return rows
        finally:
            remove_tries(local)

    def _short_write(self) -> None:
        self.short_writes += 1

    def _until_stored(self, put: Callable[[str, Any], object], key: str, source: Any) -> None:
        delay = 1.0
        while True:
            try:
                put(key, source)
                return
            except StoreUnreachableError as exc:
                if self.stopping.is_set():
                    raise
                log.warning("store unreachable; the upsert batch waits", extra={"error": str(exc),
                                                                               "retry_in_s": delay})
                time.sleep(delay)
                delay = min(MAX_RETRY_DELAY, delay * 2)

    def maintain(self) -> dict[str, Any] | None:
        """After a checkpoint completed (its thread): a snapshot if the interval has passed."""
        if self.compaction is None or time.monotonic() - self._compacted_at < self.compaction.interval_seconds:
            return None
        self._compacted_at = time.monotonic()
        return self.compact()

    def compact(self) -> dict[str, Any] | None:
        """Fold the visible batches up to the safe batch into a snapshot (upsert_snapshot.py), when at
        least `minFiles` batches are not in the current one. The result, or None."""
        settings = self.compaction or CompactionSettings()
        listed = list(self.store.list(f"{sink_root(self.job, self.path)}/upserts/"))
        files, restores = upsert_files(self.store, listed)
        newest = read_fence(self.store, self.job)
        if newest != self.attempt:
            raise FencedError(f"attempt {self.attempt} is fenced by attempt {newest}")
        tree = upsert_tree(files, restores)
        up_to = safe_batch(restorable_points(self.store, self.job), newest, restores, tree)
        base = current_snapshot(self.store, listed, restores, tree)
        after = -1 if base is None else base.up_to
        batches = [b for b, _ in visible_entries(files, restores) if after < b <= (up_to if up_to is not None else -1)]
        if up_to is None or len(batches) < settings.min_files:
            return None
        up_to = batches[-1]

        utc: set[str] = set(base.utc_columns) if base is not None else set()

        def rows() -> Iterator[tuple[str, str]]:
            # keys as readers compute them (row_key on the local-time row), rows stored in UTC
            if base is not None:
                local = snapshot_rows(self.store, base)
                for r in snapshot_rows(self.store, base, as_stored=True):
                    yield row_key(next(local), self.key_columns), json.dumps(r)
            for _, parts in visible_batches(self.store, listed, after=after, up_to=up_to):
                for key, fmt in parts:
                    data = self.store.get_bytes(key)
                    if fmt == "legacy":
                        yield from ((row_key(r, self.key_columns), json.dumps(r)) for r in decode_rows(data))
                        continue
                    for r, stored in zip(decode_file(data, fmt), decode_file(data, fmt, utc), strict=True):
                        yield row_key(r, self.key_columns), json.dumps(stored)

        doc = write_snapshot(self.store, self.job, self.path, rows=rows(), up_to=up_to,
                             restores=low_restores(restores, up_to), batches=len(batches),
                             base=None if base is None else base.key, attempt=self.attempt,
                             incarnation=self.incarnation, work_dir=self.staging_dir.parent / "upsert-fold",
                             part_bytes=min(settings.target_bytes, 64 << 20), utc_columns=utc)
        log.info("upsert output snapshot written", extra={"upToBatch": up_to, "batches": len(batches),
                                                          "rows": doc["rows"]})
        return {"files": len(batches), "upToBatch": up_to, "rows": doc["rows"]}

    def manifest_extra(self, up_to_batch: int) -> dict[str, Any]:
        return {}

    def upload_staged(self, extra: dict[str, Any]) -> None:
        pass

    def publish(self, checkpoint_id: str, extra: dict[str, Any]) -> bool:
        return False

    def resume(self, checkpoint_id: str | None, extra: dict[str, Any] | None, *, local: bool = False,
               batch: int | None = None, parent: int | None = PREVIOUS) -> None:
        """Record where this attempt's history starts and whose history it continues (`parent`: the
        attempt that took the restored point, None for a fresh start; upsert_history.py)."""
        check_fence(self.store, self.job, self.attempt)
        after = -1 if batch is None else batch
        doc: dict[str, Any] = {"attempt": self.attempt, "afterBatch": after}
        if parent != PREVIOUS:
            doc["parent"] = None if after < 0 else parent
        if self.incarnation:  # which job of this name wrote the attempt's files
            doc["incarnation"] = self.incarnation
        self.store.put_bytes(f"{sink_root(self.job, self.path)}/upserts/_restores/a{self.attempt:06d}.json",
                             json.dumps(doc).encode())


def row_key(row: dict[str, Any], key_columns: list[str]) -> str:
    return json.dumps([row.get(c) for c in key_columns], sort_keys=True, default=str)


def iter_upserted_rows(store: ObjectStore, job: JobRef, path: str) -> Iterator[dict[str, Any]]:
    """The rows to fold, in order: the newest usable snapshot's (upsert_snapshot.py), then the visible
    batches after it; one file in memory at a time. Folding them gives what folding every batch gives."""
    listed = list(store.list(f"{sink_root(job, path)}/upserts/"))
    files, restores = upsert_files(store, listed)
    snapshot = current_snapshot(store, listed, restores, upsert_tree(files, restores))
    if snapshot is not None:
        yield from snapshot_rows(store, snapshot)
    for _, parts in visible_batches(store, listed, after=-1 if snapshot is None else snapshot.up_to):
        for key, fmt in parts:
            data = store.get_bytes(key)
            yield from (decode_rows(data) if fmt == "legacy" else decode_file(data, fmt))


def read_upserted(store: ObjectStore, job: JobRef, path: str, key_columns: list[str]) -> dict[str, dict]:
    """The current table: key -> latest row (the table is in memory; a batch's file one at a time)."""
    table: dict[str, dict] = {}
    for row in iter_upserted_rows(store, job, path):
        table[row_key(row, key_columns)] = row
    return table
