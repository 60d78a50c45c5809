"""Low-latency sink: every batch is visible at once; rows are upserts by key (DESIGN.md §6).

`outputs/<path>/upserts/batch-<B>.jsonl` holds batch B's changed rows. A re-run batch overwrites
its own file, and a reader folds files in batch order keeping the last row per key, so replays
after a restore converge to the same state (at-least-once delivery, effectively-once state).
"""

from __future__ import annotations

import re
from typing import Any

from sparkpoint.runtime.store import JobRef, ObjectStore

from .rows import collect_rows, decode_rows, encode_rows
from .transactional import sink_root

_BATCH = re.compile(r"batch-(\d+)\.jsonl$")


class UpsertSink:
    kind = "upsert"

    def __init__(self, store: ObjectStore, job: JobRef, *, path: str, key_columns: list[str]):
        self.store, self.job, self.path, self.key_columns = store, job, path, key_columns

    def write_batch(self, df: Any, batch_id: int) -> int:
        missing = [c for c in self.key_columns if c not in df.columns]
        if missing:
            raise ValueError(f"upsert sink: key columns {missing} are not in the output {df.columns}")
        rows = collect_rows(df)
        if rows:
            key = f"{sink_root(self.job, self.path)}/upserts/batch-{batch_id:09d}.jsonl"
            self.store.put_bytes(key, encode_rows(rows))
        return len(rows)

    def manifest_extra(self, up_to_batch: int) -> dict[str, Any]:
        return {}

    def publish(self, checkpoint_id: str, extra: dict[str, Any]) -> bool:
        return False


def row_key(row: dict[str, Any], key_columns: list[str]) -> str:
    import json

    return json.dumps([row.get(c) for c in key_columns], sort_keys=True, default=str)


def read_upserted(store: ObjectStore, job: JobRef, path: str, key_columns: list[str]) -> dict[str, dict]:
    """The current table: key -> latest row."""
    prefix = f"{sink_root(job, path)}/upserts/"
    files = sorted((int(m.group(1)), o.key) for o in store.list(prefix) if (m := _BATCH.search(o.key)))
    table: dict[str, dict] = {}
    for _, key in files:
        for row in decode_rows(store.get_bytes(key)):
            table[row_key(row, key_columns)] = row
    return table
