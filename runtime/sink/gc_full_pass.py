"""The full output GC pass of one sink path (docs/design.md §7): every key of the path decided against
what its needed histories hold, for a path with no cursor, one whose kept points diverged from it, or
`gc --full`. The rules are output_gc.py's; this module holds the pass in bounded memory: each area is
listed as a stream, in the order the pass deletes (records and snapshots with the entries, entries
before files), and the needed entries and files are sets on disk (gc_spill.py), so its memory is that
of a few pages and one history segment, not of the job's age.

Only what the first listings saw is deleted from `_compactions/`, `_snapshots/` and `_commits/` (an
entry published after them was not weighed); files staged after them are the newest attempt's, which
a pass never deletes.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Callable, Container, Iterator
from dataclasses import replace
from typing import Any

from sparkpoint.runtime.store import JobRef, ObjectInfo, ObjectStore
from sparkpoint.runtime.store.base import ObjectNotFoundError
from sparkpoint.runtime.store.layout import id_from_json_key

from .compaction import apply_records, history_items, record_attempt
from .delta_cursor import log_cursor_after_full
from .delta_vacuum import TableUnreadableError, read_table
from .gc_cursor import PassContext, number, write_cursor
from .gc_cursor_full import FolderScan, cursor_after_full, unpublished_keys
from .gc_result import OutputGcResult
from .gc_spill import CommitIds, IdSet, KeySet, Spill
from .history import SEGMENT, SegmentReader
from .keys import commit_key, file_keys, sink_root, staged_attempt
from .lineage import OutputLineageError, continuation_id, follow_chain, head_checkpoint, head_of, walk_back
from .upsert_files import upsert_attempt
from .upsert_snapshot import snapshot_attempt, upsert_needs

log = logging.getLogger("sparkpoint.gc")

# The areas a pass weighs, in the order it deletes (GC's own `_gc/` cursors are not counted).
_ORDER = ("_delta_log", "_compactions", "_snapshots", "_commits", "staging", "upserts")


def full_pass(ctx: PassContext, path: str, names: set[str], result: OutputGcResult, *, transactional: bool,
              delta_retention_seconds: float, points: list[tuple[int, int | None]], spill_folder: str | None = None) -> None:
    store, job, now = ctx.store, ctx.job, ctx.now
    root = sink_root(job, path)

    def listing(area: str) -> Iterator[ObjectInfo]:
        return store.list(f"{root}/{area}/") if area in names else iter(())

    with Spill(spill_folder) as spill:
        compaction_infos = list(listing("_compactions"))  # (records are few: one per compacted run)
        upserts = list(listing("upserts"))  # (bounded by an upsert sink's snapshots: upsert_snapshot.py)
        try:
            records = _records(store, compaction_infos)
            snapshot_ids = {id_from_json_key(o.key) for o in listing("_snapshots") if o.key.endswith(".json")}
            commits = spill.commit_ids(id_from_json_key(o.key) for o in listing("_commits") if o.key.endswith(".json"))
            snapshots = SegmentReader(store, job, path, set(snapshot_ids))
            snapshots.covered = spill.ids()
            needed_entries, needed_files, used_records, floor = _needed(
                store, job, path, commits, ctx.manifests, records, snapshots, spill)
            table = (read_table(store, job, path, retention_seconds=delta_retention_seconds, now=now, spill=spill)
                     if "_delta_log" in names else None)
            table_files: Container[str] = table if table is not None else set()
        except (OutputLineageError, TableUnreadableError, ValueError) as exc:
            log.error("output gc skipped a path: its history or its delta table cannot be read",
                      extra={"job": str(job), "path": path, "error": str(exc)})
            result.skipped_paths.append(path)
            for area in _ORDER:
                for info in listing(area):
                    result.keep(info, committed=True)
            return
        released: set[str] = set()
        unreached: set[str] = set()  # upsert restore records no view reads (upsert_snapshot.py)
        if upserts:
            needs = upsert_needs(store, upserts, points=points, newest_attempt=ctx.newest_attempt, now=now,
                                 grace_seconds=ctx.grace_seconds)
            needed_files.update(needs.needed)
            released, unreached = needs.released, needs.unreached
        # a compaction's small files and an upsert snapshot's batches go also from the newest attempt:
        # they were committed before they were replaced, so no upload in flight needs them
        replaced = {k for r in records for run in r["replaces"] for k in run} | released
        # what the pass does with each staged file, for the cursor it leaves (gc_cursor.py)
        scan = FolderScan(unpublished_keys(ctx, path, commits, snapshots)) if transactional else None
        collectable = _collectable(ctx, result, replaced)

        def delete(info: ObjectInfo) -> None:
            if not ctx.dry_run:
                store.delete(info.key)

        for info in listing("_delta_log"):
            result.keep(info, committed=True)
        for info in compaction_infos:  # with the entries, before the files they name (one listing: what was weighed)
            if id_from_json_key(info.key) in used_records or not info.key.endswith(".json"):
                result.keep(info, committed=True)
            elif collectable(info):
                delete(info)
                result.deleted_records += 1
        for info in listing("_snapshots"):  # a snapshot holds its entry's history: kept with the entry
            sid = id_from_json_key(info.key)
            if sid in needed_entries or not info.key.endswith(".json") or sid not in snapshot_ids:
                result.keep(info, committed=True)
            elif collectable(info):
                delete(info)
                result.deleted_snapshots += 1
        for info in listing("_commits"):
            entry_id = id_from_json_key(info.key)
            # an entry a snapshot holds, older than every point a walk starts from: no walk reads it
            snapshotted = entry_id in snapshots.covered and number(entry_id) < floor
            if not info.key.endswith(".json") or entry_id not in commits or (
                    entry_id in needed_entries and not snapshotted):
                result.keep(info, committed=True)
            elif collectable(info):
                delete(info)
                if snapshotted:
                    result.deleted_snapshotted_entries += 1
                else:
                    result.deleted_entries.append(f"{path}:{entry_id}")
                result.deleted_entry_bytes += info.size
        for area in ("staging", "upserts"):
            for info in (listing(area) if area == "staging" else iter(upserts)):
                _decide_file(info, needed_files, unreached, table_files, released, collectable, delete, result, scan)
        if scan:
            after = cursor_after_full(ctx, path, needed_entries, scan)
            if after is not None and table is not None:  # and where the table's log was read to
                log_state = log_cursor_after_full(store, table.log, delta_retention_seconds,
                                                  ctx.log_cleaned.get(path, (0.0, 0)))
                after = None if log_state is None else replace(after, delta=log_state.to_dict())
            write_cursor(ctx, path, after)


def _decide_file(info: ObjectInfo, needed_files: KeySet, unreached: set[str], table_files: Container[str],
                 released: set[str], collectable: Callable[[ObjectInfo], bool], delete: Callable[[ObjectInfo], None],
                 result: OutputGcResult, scan: FolderScan | None) -> None:
    needed = info.key in needed_files
    if needed or ("/_restores/" in info.key and info.key not in unreached) or info.key in table_files:
        if not needed and info.key in table_files:
            result.kept_for_table += 1
        result.live_files += 1
        result.live_bytes += info.size
        result.keep(info, committed=True)
        if scan:
            scan.see(info, "live", needed)
    elif collectable(info):
        delete(info)
        result.deleted_files += 1
        result.deleted_bytes += info.size
        result.deleted_folded_files += info.key in released
        if scan:
            scan.see(info, "deleted")
    elif scan:
        scan.see(info, "kept")


def _collectable(ctx: PassContext, result: OutputGcResult, replaced: set[str]) -> Callable[[ObjectInfo], bool]:
    def collectable(info: ObjectInfo) -> bool:
        if "/staging/" in info.key:
            attempt = staged_attempt(info.key)
        elif "/_compactions/" in info.key:
            attempt = record_attempt(id_from_json_key(info.key))
        else:
            attempt = upsert_attempt(info.key)
            attempt = snapshot_attempt(info.key) if attempt is None else attempt
        young = info.last_modified >= ctx.now - ctx.grace_seconds
        # The newest attempt's staging folder holds uploads no manifest names yet, so it stays,
        # except the files a compaction replaced: those were published before they were compacted.
        newest = attempt is not None and attempt >= ctx.newest_attempt and info.key not in replaced
        if young or newest:
            result.kept_young_or_newest += 1
            result.keep(info, committed=False)
            return False
        return True
    return collectable


def _records(store: ObjectStore, infos: list[ObjectInfo]) -> list[dict[str, Any]]:
    out = []
    for info in infos:
        if info.key.endswith(".json"):
            try:
                out.append(json.loads(store.get_bytes(info.key)))
            except ObjectNotFoundError:
                continue
    return sorted(out, key=lambda r: str(r["id"]))


def _needed(store: ObjectStore, job: JobRef, path: str, commits: CommitIds,
            manifests: list[tuple[str, dict[str, Any]]], records: list[dict[str, Any]],
            segments: SegmentReader, spill: Spill) -> tuple[IdSet, KeySet, set[str], int]:
    """The entry ids, file keys and compaction records of `path` that readers or a restore of a kept
    point need. A history's files are those of its items with the compaction records applied: the
    small files a record replaced are needed only by a history that holds part of its run. Kept
    points share their past: without records, a point whose predecessor an earlier walk already
    took in adds only its own files (every id in `entries` has its whole history added). Without
    records a history is streamed piece by piece into the sets; with them (a compacted delta path)
    each history is held while its records are applied. The last item: the floor, below which no
    walk from the head or a kept point reads an entry from `_commits/`."""
    loaded: dict[str, dict[str, Any] | None] = {}  # the entries near the head, which every walk reads

    def load(entry_id: str) -> dict[str, Any] | None:
        if entry_id in loaded:
            return loaded[entry_id]
        try:
            doc = json.loads(store.get_bytes(commit_key(job, path, entry_id)))
        except ObjectNotFoundError:
            doc = None
        if len(loaded) < 2 * SEGMENT:
            loaded[entry_id] = doc
        return doc

    def first_snapshot(entry_id: str) -> int:
        """The number of the first snapshot a walk from `entry_id` meets (0: none within a segment)."""
        cid: str | None = entry_id
        for _ in range(SEGMENT + 1):
            if cid is None:
                return 0
            if cid in segments.ids:
                return number(cid)
            doc = load(cid)
            if doc is None or "previous" not in doc:
                return 0
            cid = doc["previous"]
        return 0

    entries = spill.ids()
    files = spill.keys()
    used: set[str] = set()

    def keep_history(head: dict[str, Any] | None, own: dict[str, Any] | None = None) -> None:
        if head is not None and head.get("kind") == "continuation":
            entries.add(continuation_id(int(head["attempt"])))
        own_keys = [k for item in (own or {}).get("files", []) for k in file_keys(item)]
        if head is not None and not records and head.get("kind") != "continuation" and head["checkpoint"] in entries:
            files.update(own_keys)
            return
        if not records:
            for _, docs in walk_back(head, [], load, segments, commits.checkpoint_before):
                for doc in docs:
                    entries.add(doc["checkpoint"])
                    files.update(k for item in doc.get("files", []) for k in file_keys(item))
            files.update(own_keys)
            return
        chain = follow_chain(head, [], load, segments, commits.checkpoint_before)
        entries.update(doc["checkpoint"] for doc in chain)
        docs = [*chain, *([own] if own else [])]
        applied: set[str] = set()
        items = apply_records(history_items(docs), records, applied)
        replaced = {k for r in records if r["id"] in applied for run in r["replaces"] for k in run}
        files.update(k for item in items for k in file_keys(item))
        # and every file the docs name that no applied record replaced (entries from before lineage
        # may name a batch twice: both stay, as before compaction existed)
        files.update(k for doc in docs for item in doc.get("files", []) for k in file_keys(item) if k not in replaced)
        used.update(applied)

    head = head_of(commits.newest_checkpoint(), commits.newest_continuation(), load)
    starts = [head_checkpoint(head)]
    keep_history(head)
    for entry_id, sink in manifests:
        if sink.get("path", "default").strip("/") != path:
            continue
        previous = sink.get("previous")
        starts.append(previous)
        if previous is not None and not records and previous in entries:
            point: dict[str, Any] | None = {"checkpoint": previous}  # walked: its history is in already
        else:
            point = None if previous is None else (load(previous) or _held(segments, previous))
        keep_history(point, sink)
        entries.add(entry_id)
    # Entries a snapshot holds below the first snapshot every walk meets are never read one by one
    floor = min((first_snapshot(s) for s in starts if s is not None), default=0) if segments.covered else 0
    return entries, files, used, floor


def _held(segments: SegmentReader, entry_id: str) -> dict[str, Any]:
    """A kept point's predecessor that a pass deleted because a snapshot holds it (the point was
    out of retention then, and restored or kept since), or a loud error."""
    if held := segments.holding(entry_id):
        return held[-1]
    raise OutputLineageError(f"commit entry {entry_id} named by a kept checkpoint is missing")
