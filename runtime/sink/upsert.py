"""Low-latency sink: every batch is visible at once; rows are upserts by key (docs/design.md §6).

Layout under `outputs/<path>/upserts/`:

  batch-<B>-a<A>.jsonl   batch B's changed rows as run by attempt A
  _restores/a<A>.json    {"attempt": A, "afterBatch": R, "incarnation": uid}: attempt A (of the
                         StreamingJob with that uid) continues from batch R

Guarantee (at-least-once delivery, effectively-once state, also across restores to an older point):
a reader folds, in batch order, for each batch the file of the newest attempt that may see it, keeping
the last row per key. An attempt that starts after batch R (a restore of any checkpoint or savepoint,
local recovery, or R = -1 for a fresh start) first records `_restores/a<A>.json`; from then on files
of older attempts for batches after R are superseded, so a restore to an older point never mixes in
rows of batches the restored history has not re-run (e.g. keys only the abandoned run produced).
Once the new run has re-run past the old point, the table equals the failure-free result; in between
a reader sees the state as of R plus the batches re-run so far.

A store outage stalls this sink's batches (each batch must reach the store to be visible); it
retries with backoff until the store is back and never drops rows nor ends the query for it.
"""

from __future__ import annotations

import json
import logging
import re
import threading
import time
from collections.abc import Iterable
from typing import Any

from sparkpoint.runtime.checkpoint.fence import check_fence
from sparkpoint.runtime.store import JobRef, ObjectInfo, ObjectStore
from sparkpoint.runtime.store.base import StoreUnreachableError

from .keys import sink_root
from .rows import collect_rows, decode_rows, encode_rows

log = logging.getLogger("sparkpoint.sink")
_FILE = re.compile(r"/batch-(\d+)(?:-a(\d+))?\.jsonl$")  # files from before attempts count as attempt 0
_RESTORE = re.compile(r"/_restores/a(\d+)\.json$")
MAX_RETRY_DELAY = 30.0


class UpsertSink:
    kind = "upsert"

    def __init__(self, store: ObjectStore, job: JobRef, *, path: str, key_columns: list[str], attempt: int = 0,
                 incarnation: str | None = None):
        self.store, self.job, self.path, self.key_columns, self.attempt = store, job, path, key_columns, attempt
        self.incarnation = incarnation  # attempts are unique across jobs of one name (the fence is kept)
        self.stopping = threading.Event()

    def write_batch(self, df: Any, batch_id: int) -> int:
        missing = [c for c in self.key_columns if c not in df.columns]
        if missing:
            raise ValueError(f"upsert sink: key columns {missing} are not in the output {df.columns}")
        rows = collect_rows(df)
        if rows:
            key = f"{sink_root(self.job, self.path)}/upserts/batch-{batch_id:09d}-a{self.attempt:06d}.jsonl"
            self._put_until_stored(key, encode_rows(rows))
        return len(rows)

    def _put_until_stored(self, key: str, data: bytes) -> None:
        delay = 1.0
        while True:
            try:
                self.store.put_bytes(key, data)
                return
            except StoreUnreachableError as exc:
                if self.stopping.is_set():
                    raise
                log.warning("store unreachable; the upsert batch waits", extra={"error": str(exc),
                                                                               "retry_in_s": delay})
                time.sleep(delay)
                delay = min(MAX_RETRY_DELAY, delay * 2)

    def manifest_extra(self, up_to_batch: int) -> dict[str, Any]:
        return {}

    def upload_staged(self, extra: dict[str, Any]) -> None:
        pass

    def publish(self, checkpoint_id: str, extra: dict[str, Any]) -> bool:
        return False

    def resume(self, checkpoint_id: str | None, extra: dict[str, Any] | None, *, local: bool = False,
               batch: int | None = None) -> None:
        """Record where this attempt's history starts: later batches of older attempts are superseded."""
        check_fence(self.store, self.job, self.attempt)
        after = -1 if batch is None else batch
        doc: dict[str, Any] = {"attempt": self.attempt, "afterBatch": after}
        if self.incarnation:  # which job of this name wrote the attempt's files
            doc["incarnation"] = self.incarnation
        self.store.put_bytes(f"{sink_root(self.job, self.path)}/upserts/_restores/a{self.attempt:06d}.json",
                             json.dumps(doc).encode())


def row_key(row: dict[str, Any], key_columns: list[str]) -> str:
    return json.dumps([row.get(c) for c in key_columns], sort_keys=True, default=str)


def visible_files(files: list[tuple[int, int, str]], restores: list[tuple[int, int]]) -> list[str]:
    """Pure rule: (batch, attempt, key) files and (attempt, afterBatch) restores -> keys to fold, in order.
    A file is superseded by a later attempt's restore to a batch before it; per batch the newest
    attempt's visible file wins."""
    best: dict[int, tuple[int, str]] = {}
    for batch, attempt, key in files:
        if any(a > attempt and batch > after for a, after in restores):
            continue
        if batch not in best or attempt > best[batch][0]:
            best[batch] = (attempt, key)
    return [best[b][1] for b in sorted(best)]


def upsert_files(store: ObjectStore, listed: Iterable[ObjectInfo]) -> tuple[list[tuple[int, int, str]],
                                                                          list[tuple[int, int]]]:
    """(batch, attempt, key) files and (attempt, afterBatch) restores among listed upserts/ keys."""
    files, restores = [], []
    for o in listed:
        if m := _FILE.search(o.key):
            files.append((int(m.group(1)), int(m.group(2) or 0), o.key))
        elif m := _RESTORE.search(o.key):
            restores.append((int(m.group(1)), int(json.loads(store.get_bytes(o.key))["afterBatch"])))
    return files, restores


def read_upserted(store: ObjectStore, job: JobRef, path: str, key_columns: list[str]) -> dict[str, dict]:
    """The current table: key -> latest row."""
    files, restores = upsert_files(store, store.list(f"{sink_root(job, path)}/upserts/"))
    table: dict[str, dict] = {}
    for key in visible_files(files, restores):
        for row in decode_rows(store.get_bytes(key)):
            table[row_key(row, key_columns)] = row
    return table
