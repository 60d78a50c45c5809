"""The Delta Lake sink (`job.sink.kind: delta`): the transactional sink's output, also a Delta table (docs/design.md §6).

Everything the transactional sink does stays: executors write each batch as Parquet on local disk,
the checkpoint uploads the files and publishes its commit entry, readers of the entries see one
history. On top, the publish step commits the checkpoint's files to the Delta table whose root is
the sink's folder (delta_table.py), in ONE Delta commit carrying
`Transaction(<incarnation>, <checkpoint number>)`:

- Idempotent: a re-publish (after a crash between the entry and the Delta commit, or a retry)
  first asks `transaction_version(<incarnation>)`; a version at or past the checkpoint's number
  means the commit happened (delta-rs does not refuse a repeated one by itself).
- Invariant: a Delta commit that names checkpoint X (commitInfo `sparkpoint.checkpoint`) leaves the
  table holding exactly the files of the history that ends at X's entry. So a publish whose
  predecessor entry is the table's last published checkpoint only adds its files; otherwise the
  table is synced to the whole history (adds and removes in the one commit).
- One history: when an attempt starts from a point that is not the table's last published
  checkpoint (a restore to an older checkpoint or savepoint, a fresh start over an old table), the
  table first returns to that point's files (one commit removing the later files, named after the
  point), before the continuation entry and before any batch of the new attempt is published.

Staged files are the table's data files in place (paths under `staging/`), so the output GC that
deletes the files of superseded histories is the table's vacuum, keeping what the table's current
version and the Delta retention still need (delta_vacuum.py, docs/design.md §7).
"""

from __future__ import annotations

import io
import json
import os
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

from sparkpoint.runtime.checkpoint.fence import check_fence
from sparkpoint.runtime.store import JobRef, ObjectStore
from sparkpoint.runtime.store.base import ObjectNotFoundError

from .batch_files import write_batch_files
from .delta_table import DeltaLocation, TableFile, delta_location, last_published, open_table, sync_table
from .journal import SinkJournal
from .keys import commit_key, file_keys, sink_root
from .lineage import follow_chain
from .reader import _entry_ids
from .transactional import DEFAULT_STAGED_BUDGET_BYTES, TransactionalSink, _number


class DeltaSink(TransactionalSink):
    kind = "delta"

    def __init__(self, store: ObjectStore, job: JobRef, *, attempt: int, path: str, journal: SinkJournal,
                 staged_budget_bytes: int = DEFAULT_STAGED_BUDGET_BYTES, incarnation: str | None = None,
                 write_files: Callable[[Any, Path, str], int] = write_batch_files,
                 env: Mapping[str, str] = os.environ):
        super().__init__(store, job, attempt=attempt, path=path, journal=journal,
                         staged_budget_bytes=staged_budget_bytes, incarnation=incarnation, fmt="parquet",
                         write_files=write_files)
        self.root = sink_root(job, path) + "/"
        self.location: DeltaLocation = delta_location(store, sink_root(job, path), env)

    # --- checkpoint phases ------------------------------------------------------------------------
    def manifest_extra(self, up_to_batch: int) -> dict[str, Any]:
        """As the transactional sink's, plus each part's size and rows (the Delta add actions need
        them; read here from the local files' footers, so a re-publish needs no download)."""
        extra = super().manifest_extra(up_to_batch)
        for f in extra["sink"]["files"]:
            f["parts"] = [self._part_stats(f["batch"], key) for key in f["keys"]]
        return extra

    def publish(self, checkpoint_id: str, extra: dict[str, Any]) -> bool:
        created = super().publish(checkpoint_id, extra)  # the commit entry first: the table follows it
        entry = extra.get("sink")
        if entry:
            self._commit_checkpoint(checkpoint_id, entry)
        return created

    def _commit_checkpoint(self, checkpoint_id: str, entry: dict[str, Any]) -> None:
        app, number = self._app_id(entry), _number(checkpoint_id)
        table = open_table(self.location)
        if table is not None and (table.transaction_version(app) or -1) >= number:
            return  # committed before a crash (or by an overlapping, newer checkpoint of this job)
        previous = entry.get("previous")
        if table is not None and previous is not None and last_published(table) == previous:
            want, only_add = self._entry_files(entry), True  # the common case: one checkpoint after another
        else:
            want, only_add = self._history_files(checkpoint_id), False
        check_fence(self.store, self.job, self.attempt)
        sync_table(self.location, want, schema_of=lambda: self._schema(want), app=(app, number),
                   checkpoint=checkpoint_id, only_add=only_add)

    def _history_resumed(self) -> None:
        """Before the continuation entry: the table returns to the history this attempt continues."""
        table = open_table(self.location)
        if table is None and self.head is None:
            return
        if table is not None and self.head is not None and last_published(table) == self.head:
            return  # the table's newest commit published this very point: it holds its history
        want = self._history_files(self.head) if self.head else []
        check_fence(self.store, self.job, self.attempt)
        sync_table(self.location, want, schema_of=lambda: self._schema(want), checkpoint=self.head)

    # --- the files of entries -----------------------------------------------------------------------
    def _app_id(self, entry: dict[str, Any]) -> str:
        return str(entry.get("incarnation") or self.incarnation or f"sparkpoint/{self.job.root}")

    def _load(self, entry_id: str) -> dict[str, Any] | None:
        try:
            return json.loads(self.store.get_bytes(commit_key(self.job, self.path, entry_id)))
        except ObjectNotFoundError:
            return None

    def _history_files(self, head_id: str) -> list[TableFile]:
        """The files of the history that ends at entry `head_id`, oldest first."""
        chain = follow_chain(self._load(head_id), _entry_ids(self.store, self.job, self.path), self._load)
        out: list[TableFile] = []
        seen: set[int] = set()
        for doc in chain:
            for f in doc["files"]:
                if f["batch"] not in seen:  # entries from before lineage could overlap
                    seen.add(f["batch"])
                    out.extend(self._item_files(f))
        return out

    def _entry_files(self, entry: dict[str, Any]) -> list[TableFile]:
        return [t for f in entry["files"] for t in self._item_files(f)]

    def _item_files(self, item: dict[str, Any]) -> list[TableFile]:
        keys = file_keys(item)
        if item.get("format", "parquet") != "parquet" or "keys" not in item:
            raise ValueError(f"batch {item['batch']} of the committed output is {item.get('format', 'JSON lines')},"
                             " not Parquet: a delta sink cannot continue output written with another format "
                             "(use another job.sink.path)")
        parts = item.get("parts") or [self._stored_stats(k) for k in keys]  # entries written by kind transactional
        return [TableFile(k[len(self.root):], int(p["size"]), int(p["rows"])) for k, p in zip(keys, parts, strict=True)]

    def _local(self, batch: int, key: str) -> Path | None:
        folder, name = key.rstrip("/").rsplit("/", 2)[-2:]
        return self.journal.part_path(batch, folder.rsplit("-", 1)[-1], name)

    def _part_stats(self, batch: int, key: str) -> dict[str, int]:
        import pyarrow.parquet as pq

        local = self._local(batch, key)
        if local is None:  # published and forgotten meanwhile by an overlapping checkpoint: it is stored
            return self._stored_stats(key)
        return {"size": local.stat().st_size, "rows": pq.read_metadata(local).num_rows}

    def _stored_stats(self, key: str) -> dict[str, int]:
        import pyarrow.parquet as pq

        data = self.store.get_bytes(key)
        return {"size": len(data), "rows": pq.read_metadata(io.BytesIO(data)).num_rows}

    def _schema(self, files: list[TableFile]) -> Any:
        """The Arrow schema of the table being created: its first file's."""
        import pyarrow.parquet as pq

        key = self.root + files[0].path
        return pq.read_schema(io.BytesIO(self.store.get_bytes(key)))
