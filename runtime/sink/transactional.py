"""Exactly-once output on the object store, committed together with checkpoints (DESIGN.md §6).

Layout under `<job>/outputs/<path>/`:

  staging/attempt-<A>/batch-<B>.jsonl   rows of batch B as written by attempt A (JSON lines)
  _commits/<checkpoint-id>.json         {"checkpoint", "afterBatch", "upToBatch",
                                         "files": [{"batch", "key", "rows"}]}

Protocol: each micro-batch stages its rows and notes the object in the local journal; a checkpoint
covering batches up to C records the staged files of batches (P, C] (P: the last published batch)
in its manifest's `extra.sink`; once the manifest exists, the commit entry is written with a
conditional put. On start, the runtime re-publishes the latest checkpoint's entry if a crash came
between the manifest and the commit entry. Readers list `_commits/` in id order and read each
listed file once per batch id; staged files no commit names are invisible (they belong to batches
a restore re-ran). A fenced-off attempt never writes a commit entry.
"""

from __future__ import annotations

import json
import logging
from typing import Any

from sparkpoint.runtime.checkpoint.fence import check_fence
from sparkpoint.runtime.store import JobRef, ObjectStore
from sparkpoint.runtime.store.layout import CHECKPOINT_ID, id_from_json_key, outputs_prefix

from .journal import SinkJournal
from .rows import collect_rows, decode_rows, encode_rows

log = logging.getLogger("sparkpoint.sink")


def sink_root(job: JobRef, path: str) -> str:
    return f"{outputs_prefix(job)}{path.strip('/')}"


def commit_key(job: JobRef, path: str, checkpoint_id: str) -> str:
    return f"{sink_root(job, path)}/_commits/{checkpoint_id}.json"


class TransactionalSink:
    kind = "transactional"

    def __init__(self, store: ObjectStore, job: JobRef, *, attempt: int, path: str, journal: SinkJournal):
        self.store, self.job, self.attempt, self.path, self.journal = store, job, attempt, path, journal
        self.published_through = -1  # highest batch a published commit entry covers

    def staging_key(self, batch_id: int) -> str:
        return f"{sink_root(self.job, self.path)}/staging/attempt-{self.attempt}/batch-{batch_id:09d}.jsonl"

    def write_batch(self, df: Any, batch_id: int) -> int:
        """foreachBatch body: stage the rows (not visible to readers yet); returns the row count."""
        rows = collect_rows(df)
        if rows:
            key = self.staging_key(batch_id)
            self.store.put_bytes(key, encode_rows(rows))
            self.journal.record(batch_id, key, len(rows))
        return len(rows)

    def manifest_extra(self, up_to_batch: int) -> dict[str, Any]:
        """What a checkpoint at committed batch `up_to_batch` must publish."""
        files = self.journal.entries(self.published_through, up_to_batch)
        return {"sink": {"kind": self.kind, "path": self.path, "afterBatch": self.published_through,
                         "upToBatch": up_to_batch, "files": files}}

    def publish(self, checkpoint_id: str, extra: dict[str, Any]) -> bool:
        """Write the commit entry of a completed checkpoint; idempotent. False if it already existed."""
        entry = extra.get("sink")
        if not entry:
            return False
        check_fence(self.store, self.job, self.attempt)  # a zombie never publishes
        doc = {"checkpoint": checkpoint_id, "afterBatch": entry["afterBatch"],
               "upToBatch": entry["upToBatch"], "files": entry["files"]}
        created = self.store.put_if_absent(commit_key(self.job, entry["path"], checkpoint_id),
                                           json.dumps(doc, sort_keys=True).encode())
        self.published_through = max(self.published_through, int(entry["upToBatch"]))
        self.journal.forget_through(self.published_through)
        log.info("output published", extra={"checkpoint": checkpoint_id, "up_to_batch": entry["upToBatch"],
                                            "files": len(entry["files"]), "new_entry": created})
        return created


def committed_entries(store: ObjectStore, job: JobRef, path: str) -> list[dict[str, Any]]:
    """The commit entries, in checkpoint order."""
    prefix = f"{sink_root(job, path)}/_commits/"
    ids = sorted(i for i in (id_from_json_key(o.key) for o in store.list(prefix)) if CHECKPOINT_ID.match(i))
    return [json.loads(store.get_bytes(f"{prefix}{i}.json")) for i in ids]


def read_committed(store: ObjectStore, job: JobRef, path: str = "default") -> list[dict[str, Any]]:
    """Every committed output row, in batch order: what a reader of the sink sees."""
    rows: list[dict[str, Any]] = []
    seen_batches: set[int] = set()
    for entry in committed_entries(store, job, path):
        for f in entry["files"]:
            if f["batch"] in seen_batches:
                continue  # overlapping entries (maxConcurrent > 1) name the same staged file
            seen_batches.add(f["batch"])
            rows.extend(decode_rows(store.get_bytes(f["key"])))
    return rows
