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

Compaction (`maintain`, after a checkpoint's publish, at most once per `job.sink.compaction.interval`):
runs of small files of batches every retained point shares become one file, recorded in
`_compactions/` before the Delta commit that swaps them (compaction.py). Every history this sink
syncs the table to has the records applied, so "the files of the history that ends at X" means the
compacted files where X's history holds a record's whole run. The compaction commit names the
checkpoint the table is at, like the publish before it: the table still holds exactly that point's
history, and the next publish only adds its files.
"""

from __future__ import annotations

import io
import json
import logging
import shutil
import tempfile
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from sparkpoint.runtime.checkpoint.fence import check_fence
from sparkpoint.runtime.store import JobRef, ObjectStore
from sparkpoint.runtime.store.base import ObjectNotFoundError

from .batch_files import write_batch_files
from .compaction import (
    CompactionSettings,
    SchemaChanged,
    apply_records,
    common_prefix,
    compacted_key,
    compactions_prefix,
    history_items,
    item_keys,
    last_batch,
    load_records,
    plan_runs,
    record_id,
    write_compacted,
)
from .delta_table import (
    DeltaLocation,
    TableFile,
    delta_location,
    last_published,
    open_table,
    sync_table,
    table_paths,
)
from .history import SEGMENT, SegmentReader
from .journal import SinkJournal
from .keys import commit_key, file_keys, sink_root
from .lineage import follow_chain
from .output_gc import sink_sections
from .reader import _entry_ids
from .transactional import DEFAULT_STAGED_BUDGET_BYTES, TransactionalSink, _number

log = logging.getLogger("sparkpoint.sink")


class DeltaSink(TransactionalSink):
    kind = "delta"

    def __init__(self, store: ObjectStore, job: JobRef, *, attempt: int, path: str, journal: SinkJournal,
                 staged_budget_bytes: int = DEFAULT_STAGED_BUDGET_BYTES, incarnation: str | None = None,
                 write_files: Callable[[Any, Path, str], int] = write_batch_files,
                 compaction: CompactionSettings | None = None):
        super().__init__(store, job, attempt=attempt, path=path, journal=journal,
                         staged_budget_bytes=staged_budget_bytes, incarnation=incarnation, fmt="parquet",
                         write_files=write_files)
        self.root = sink_root(job, path) + "/"
        self.location: DeltaLocation = delta_location(store, sink_root(job, path))
        self.compaction = compaction  # None: never compacts
        self._table_lock = threading.Lock()  # one Delta commit at a time (overlapping checkpoints, compaction)
        # commit entries never change: read each once; walks read at most a segment of them (history.py)
        self._entries: dict[str, dict[str, Any]] = {}
        self._records: dict[str, dict[str, Any]] = {}  # nor do compaction records
        self._compacted_at = time.monotonic()
        self._seq = 0
        # afterBatch of every checkpoint frozen and not yet ended: its manifest is not in the store yet,
        # and its history is the head's up to that batch, so compaction stays at or before it
        self._frozen: list[int] = []

    # --- checkpoint phases ------------------------------------------------------------------------
    def manifest_extra(self, up_to_batch: int) -> dict[str, Any]:
        """As the transactional sink's, plus each part's size and rows (the Delta add actions need
        them; read here from the local files' footers, so a re-publish needs no download)."""
        extra = super().manifest_extra(up_to_batch)
        for f in extra["sink"]["files"]:
            f["parts"] = [self._part_stats(f["batch"], key) for key in f["keys"]]
        with self._cond:  # until it ends, compaction keeps to the batches its history already holds
            self._frozen.append(int(extra["sink"]["afterBatch"]))
        return extra

    def release_checkpoint(self, extra: dict[str, Any]) -> None:
        """The checkpoint frozen with `extra` ended (completed or failed): its manifest, if any, is
        in the store now, where compaction sees it."""
        after = (extra.get("sink") or {}).get("afterBatch")
        with self._cond:
            if after is not None and int(after) in self._frozen:
                self._frozen.remove(int(after))

    def publish(self, checkpoint_id: str, extra: dict[str, Any]) -> bool:
        created = super().publish(checkpoint_id, extra)  # the commit entry first: the table follows it
        entry = extra.get("sink")
        if entry:
            with self._table_lock:
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
        with self._table_lock:
            self._return_table()

    def _return_table(self) -> None:
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
        if entry_id not in self._entries:
            if len(self._entries) >= 2 * SEGMENT:  # bounded: older ones are in history snapshots
                self._entries.clear()
            try:
                self._entries[entry_id] = json.loads(self.store.get_bytes(commit_key(self.job, self.path, entry_id)))
            except ObjectNotFoundError:
                return None
        return self._entries[entry_id]

    def _chain(self, head_id: str | None, ids: list[str]) -> list[dict[str, Any]]:
        if not head_id:
            return []
        head = self._load(head_id)
        return follow_chain(head, ids, self._load, SegmentReader(self.store, self.job, self.path, head=head))

    def _effective_items(self, head_id: str) -> list[dict[str, Any]]:
        """The batch items of the history that ends at entry `head_id`, oldest first, records applied."""
        items = history_items(self._chain(head_id, _entry_ids(self.store, self.job, self.path)))
        return apply_records(items, load_records(self.store, self.job, self.path, self._records))

    def _history_files(self, head_id: str) -> list[TableFile]:
        """The files of the history that ends at entry `head_id`, oldest first."""
        return self._files(self._effective_items(head_id))

    def _files(self, items: list[dict[str, Any]]) -> list[TableFile]:
        return [t for f in items for t in self._item_files(f)]

    # --- compaction (docs/design.md §7) -----------------------------------------------------------
    def maintain(self) -> dict[str, Any] | None:
        """After a checkpoint's publish: compact if the interval has passed. The result, or None."""
        if self.compaction is None or time.monotonic() - self._compacted_at < self.compaction.interval_seconds:
            return None
        self._compacted_at = time.monotonic()
        return self.compact()

    def compact(self) -> dict[str, Any] | None:
        """Replace runs of small files that every retained point's history shares by one file each:
        files and records first, then one Delta commit naming the checkpoint the table is at. The
        files are written outside the table lock, so publishes go on meanwhile."""
        settings = self.compaction or CompactionSettings()
        with self._table_lock:
            table = open_table(self.location)
            if self.head is None or table is None or last_published(table) != self.head:
                return None  # the table is not at this attempt's head (yet): nothing to compact against
            effective = self._effective_items(self.head)
            self._sync_to(table, effective)  # finishes a compaction that died between record and commit
        with self._cond:
            in_flight = list(self._frozen)
        runs = plan_runs(effective, up_to_batch=min([self._shared_up_to(), *in_flight]),
                         target_bytes=settings.target_bytes, min_files=settings.min_files)
        new: list[dict[str, Any]] = []
        tmp = Path(tempfile.mkdtemp(prefix="compaction-", dir=self.journal.dir.parent))
        try:
            for run in runs:
                if (record := self._compact_run(run, tmp)) is not None:
                    new.append(record)
        finally:
            shutil.rmtree(tmp, ignore_errors=True)
        if not new:
            return None
        with self._table_lock:  # a publish may have moved the head on: its history still holds every run
            table = open_table(self.location)
            if table is not None and self.head is not None and last_published(table) == self.head:
                self._sync_to(table, self._effective_items(self.head), [r["id"] for r in new])
        result = {"records": [r["id"] for r in new], "files": sum(len(k) for r in new for k in r["replaces"]),
                  "bytes": sum(int(r["size"]) for r in new)}
        log.info("delta table compacted", extra=result)
        return result

    def _compact_run(self, run: list[dict[str, Any]], tmp: Path) -> dict[str, Any] | None:
        self._seq += 1
        rid = record_id(self.attempt, self._seq)
        try:
            done = write_compacted(self.store, run, tmp / f"{rid}.parquet")
        except SchemaChanged as exc:
            log.warning("compaction skipped a run", extra={"batch": run[0]["batch"], "reason": str(exc)})
            return None
        expected = sum(int(i["rows"]) for i in run)
        if done.rows != expected:
            raise ValueError(f"compaction of batches {run[0]['batch']}..{last_batch(run[-1])} read {done.rows} rows, "
                             f"the entries name {expected}")
        key = compacted_key(self.job, self.path, self.attempt, rid)
        check_fence(self.store, self.job, self.attempt)
        self.store.put_file(key, str(done.path))
        record = {"id": rid, "attempt": self.attempt, "replaces": [item_keys(i) for i in run], "key": key,
                  "batch": run[0]["batch"], "lastBatch": last_batch(run[-1]),
                  "batches": sum(int(i.get("batches", 1)) for i in run), "rows": done.rows, "size": done.size}
        if self.incarnation:
            record["incarnation"] = self.incarnation
        record_key = f"{compactions_prefix(self.job, self.path)}{rid}.json"
        if not self.store.put_if_absent(record_key, json.dumps(record, sort_keys=True).encode()):
            raise ValueError(f"{record_key} exists already: another writer holds attempt {self.attempt}")
        self._records[record_key] = record
        return record

    def _sync_to(self, table: Any, items: list[dict[str, Any]], records: list[str] | None = None) -> None:
        """Commit the table to exactly `items`' files if it holds others (a compaction commit: no data
        changes), still naming the checkpoint it is at."""
        want = self._files(items)
        if table_paths(table) != {f.path for f in want}:
            check_fence(self.store, self.job, self.attempt)
            sync_table(self.location, want, checkpoint=self.head,
                       compaction=records or sorted({i["compaction"] for i in items if "compaction" in i}))

    def _shared_up_to(self) -> int:
        """The last batch of the history every retained checkpoint and savepoint and this attempt's
        head share (-1: none); what a point's manifest alone names counts as its own last entry."""
        ids = _entry_ids(self.store, self.job, self.path)
        chains = [[e["checkpoint"] for e in self._chain(self.head, ids)]]
        for entry_id, sink in sink_sections(self.store, self.job, self.incarnation):
            if sink.get("path", "default").strip("/") != self.path.strip("/"):
                continue
            if "previous" not in sink:
                return -1  # a manifest from before lineage: its history is not known well enough
            chains.append([e["checkpoint"] for e in self._chain(sink["previous"], ids)] + [entry_id])
        for entry_id in reversed(common_prefix(chains)):
            if (entry := self._load(entry_id)) is not None:
                return int(entry["upToBatch"])
        return -1

    def _entry_files(self, entry: dict[str, Any]) -> list[TableFile]:
        return self._files(entry["files"])

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
