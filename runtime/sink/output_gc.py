"""Collecting the sinks' output garbage, run by the GC sidecar after its checkpoint pass (docs/design.md §7).

What grows without it: staged files of crashed or fenced attempts and of checkpoints that failed
after uploading, batches a restore re-ran (the abandoned history's entries and files), and upsert
files a newer attempt superseded. What must stay, under the rules checkpoint objects follow:

- every entry and file of the history readers see (from the head back, lineage.py);
- for every checkpoint manifest still in the store and every savepoint: the files its `extra.sink`
  names (a crash between manifest and entry publishes them at restore) and the chain its entry
  continues (a restore of it makes that chain the history readers see);
- everything staged by the newest attempt or a newer one (its checkpoints upload before their
  manifests exist, and it names only its own staging folder, keys.batch_dir_key), and everything
  younger than the grace period;
- everything at all while a savepoint is being copied (its source checkpoint may leave retention
  during the copy, while the savepoint manifest, which names the same files, is not written yet);
- for a delta sink, what its table still needs: its current version's files and the files a commit
  removed within the Delta retention (delta_vacuum.py); of `_delta_log/`, only the files older than
  the log retention and than its newest checkpoint older than that go (delta_log_gc.py).

Entries are deleted before files, so a crash in between leaves plain orphans for the next pass.
Deleting an entry that no needed chain contains never changes the head readers pick: the head is the
newest checkpoint entry or a newer attempt's continuation, and both are in the head's own chain.
A chain that cannot be followed (a missing or cyclic entry) stops the pass for that path: nothing
of it is deleted.
"""

from __future__ import annotations

import json
import logging
import re
import time
from collections.abc import Callable
from dataclasses import asdict, dataclass, field, replace
from typing import Any

from sparkpoint.runtime.checkpoint.fence import claim_incarnation, read_fence
from sparkpoint.runtime.store import JobRef, ObjectInfo, ObjectStore
from sparkpoint.runtime.store.base import ObjectNotFoundError
from sparkpoint.runtime.store.layout import id_from_json_key, outputs_prefix, pending_prefix

from .compaction import apply_records, history_items, record_attempt
from .delta_cursor import log_cursor_after_full
from .delta_log_gc import collect_expired_log
from .delta_vacuum import DEFAULT_RETENTION_SECONDS, TableUnreadableError, read_table
from .gc_cursor import (
    INCREMENTAL_AREAS,
    Diverged,
    PassContext,
    number,
    parse_cursor,
    read_cursors,
    write_cursor,
)
from .gc_cursor_full import FolderScan, cursor_after_full, unpublished_keys
from .gc_cursor_pass import incremental_pass
from .history import SEGMENT, SegmentReader
from .keys import commit_key, file_keys, sink_root, staged_attempt
from .lineage import OutputLineageError, continuation_id, follow_chain, head_checkpoint, head_entry
from .upsert_files import upsert_attempt
from .upsert_snapshot import restorable, snapshot_attempt, upsert_needs

log = logging.getLogger("sparkpoint.gc")
_AREA = re.compile(r"^(?P<path>.+?)/(?P<area>_commits|_compactions|_delta_log|_snapshots|staging|upserts)/")
_AREAS = {"_commits", "_compactions", "_delta_log", "_snapshots", "staging", "upserts", "_gc"}


@dataclass
class OutputGcResult:
    deleted_entries: list[str] = field(default_factory=list)  # "<path>:<entry id>"
    deleted_records: int = 0  # compaction records no needed history applies
    deleted_snapshots: int = 0  # history snapshots of entries no needed history holds (history.py)
    deleted_snapshotted_entries: int = 0  # needed entries a snapshot holds, that no walk reads any more
    deleted_files: int = 0
    deleted_bytes: int = 0
    live_files: int = 0
    live_bytes: int = 0
    kept_young_or_newest: int = 0  # unreferenced, but younger than the grace or the newest attempt's
    kept_for_table: int = 0  # needed by no checkpoint or reader, only by a delta table's retention
    skipped_paths: list[str] = field(default_factory=list)  # a broken chain: nothing deleted there
    dry_run: bool = False
    # Every object under outputs/ after the pass but GC's own cursors, for the sidecar's metrics:
    # committed (entries, files and logs that readers, a kept checkpoint or a delta table need, and
    # all of a skipped path), or
    # staged (needed by nothing yet: the newest attempt's uploads ahead of their publish, garbage
    # inside the grace). `counted` is False when the pass looked at nothing (a savepoint copy).
    committed_objects: int = 0
    committed_bytes: int = 0
    staged_objects: int = 0
    staged_bytes: int = 0
    deleted_entry_bytes: int = 0
    deleted_folded_files: int = 0  # upsert files a snapshot holds, and superseded snapshots (of deleted_files)
    deleted_log_files: int = 0  # a Delta log's files older than its retention and its checkpoint (delta_log_gc.py)
    deleted_log_bytes: int = 0
    counted: bool = True

    def keep(self, info: ObjectInfo, *, committed: bool) -> None:
        if committed:
            self.committed_objects += 1
            self.committed_bytes += info.size
        else:
            self.staged_objects += 1
            self.staged_bytes += info.size

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


def output_gc_pass(store: ObjectStore, job: JobRef, *, grace_seconds: float, dry_run: bool = False,
                   clock: Callable[[], float] = time.time,
                   delta_retention_seconds: float = DEFAULT_RETENTION_SECONDS,
                   incremental: bool = True) -> OutputGcResult:
    """One output pass; `incremental=False` ignores the paths' cursors (the full pass: it decides every
    key it lists, and leaves a new cursor unless dry_run)."""
    result = OutputGcResult(dry_run=dry_run)
    now = clock()
    if any(id_from_json_key(o.key).startswith("sp-") for o in store.list(pending_prefix(job))):
        log.info("output gc skipped: a savepoint is being copied", extra={"job": str(job)})
        result.counted = False
        return result
    newest_attempt = read_fence(store, job)
    # Read once, after the fence: a newer attempt's files are spared by it. The upsert points come from
    # the same read: a checkpoint made after it has a higher batch and one deleted after it only keeps more.
    restorable_manifests, savepoints = restorable(store, job)
    manifests = sections_of(restorable_manifests,
                            attached(store, job, savepoints, claim_incarnation(store, job, newest_attempt)))
    points = [(p.attempt, p.batch_id) for p in [*restorable_manifests, *savepoints]]
    ctx = PassContext(store, job, now, grace_seconds, dry_run, newest_attempt, manifests, read_cursors(store, job))
    root = outputs_prefix(job)
    for path, names in sorted(sink_paths(store, job).items()):
        # A transactional or delta sink's path with a cursor: only what changed since the last pass
        # (gc_cursor.py; a Delta log's commits since the last pass, delta_cursor.py)
        transactional = names <= INCREMENTAL_AREAS
        retention = delta_retention_seconds if "_delta_log" in names else None
        if retention is not None:  # the expired Delta log first: the pass below lists what is left
            collect_expired_log(ctx, path, result, retention)
        if transactional and incremental and (cursor := parse_cursor(ctx.cursors.get(path))) is not None:
            try:
                write_cursor(ctx, path, incremental_pass(ctx, path, cursor, result, retention))
                continue
            except (Diverged, OutputLineageError) as exc:  # raised before anything was deleted
                log.info("output gc pass of a path is full", extra={"job": str(job), "path": path,
                                                                    "reason": str(exc)})
        areas: dict[str, list[ObjectInfo]] = {}
        for info in store.list(f"{sink_root(job, path)}/"):
            if (m := _AREA.match(info.key[len(root):])) and m["path"] == path:
                areas.setdefault(m["area"], []).append(info)
        try:
            records = _records(store, areas.get("_compactions", []))
            snapshots = SegmentReader(store, job, path, {id_from_json_key(o.key) for o in areas.get("_snapshots", [])})
            needed_entries, needed_files, used_records, floor = _needed(store, job, path, areas.get("_commits", []),
                                                                        manifests, records, snapshots)
            table = (read_table(store, job, path, retention_seconds=delta_retention_seconds, now=now)
                     if "_delta_log" in areas else None)
            table_files = table.keys if table is not None else set()
        except (OutputLineageError, TableUnreadableError, ValueError) as exc:
            log.error("output gc skipped a path: its history or its delta table cannot be read",
                      extra={"job": str(job), "path": path, "error": str(exc)})
            result.skipped_paths.append(path)
            for info in (o for infos in areas.values() for o in infos):
                result.keep(info, committed=True)
            continue
        released: set[str] = set()
        unreached: set[str] = set()  # upsert restore records no view reads (upsert_snapshot.py)
        if upserts := areas.get("upserts"):
            needs = upsert_needs(store, upserts, points=points, newest_attempt=newest_attempt, now=now,
                                 grace_seconds=grace_seconds)
            needed_files |= needs.needed
            released, unreached = needs.released, needs.unreached
        # a compaction's small files and an upsert snapshot's batches go also from the newest attempt:
        # they were committed before they were replaced, so no upload in flight needs them
        replaced = {k for r in records for run in r["replaces"] for k in run} | released

        # what the pass does with each staged file, for the cursor it leaves (gc_cursor.py)
        scan = FolderScan(unpublished_keys(ctx, path, set(id_from_json_key(o.key) for o in areas.get("_commits", [])),
                                           snapshots)) if transactional else None

        def collectable(info: ObjectInfo, replaced: set[str] = replaced) -> bool:
            if "/staging/" in info.key:
                attempt = staged_attempt(info.key)
            elif "/_compactions/" in info.key:
                attempt = record_attempt(id_from_json_key(info.key))
            else:
                attempt = upsert_attempt(info.key)
                attempt = snapshot_attempt(info.key) if attempt is None else attempt
            young = info.last_modified >= now - grace_seconds
            # The newest attempt's staging folder holds uploads no manifest names yet, so it stays,
            # except the files a compaction replaced: those were published before they were compacted.
            newest = attempt is not None and attempt >= newest_attempt and info.key not in replaced
            if young or newest:
                result.kept_young_or_newest += 1
                result.keep(info, committed=False)
                return False
            return True

        for info in areas.get("_delta_log", []):
            result.keep(info, committed=True)
        for info in areas.get("_compactions", []):  # with the entries, before the files they name
            if id_from_json_key(info.key) in used_records or not info.key.endswith(".json"):
                result.keep(info, committed=True)
            elif collectable(info):
                if not dry_run:
                    store.delete(info.key)
                result.deleted_records += 1
        for info in areas.get("_snapshots", []):  # a snapshot holds its entry's history: kept with the entry
            if id_from_json_key(info.key) in needed_entries or not info.key.endswith(".json"):
                result.keep(info, committed=True)
            elif collectable(info):
                if not dry_run:
                    store.delete(info.key)
                result.deleted_snapshots += 1
        for info in areas.get("_commits", []):
            entry_id = id_from_json_key(info.key)
            # an entry a snapshot holds, older than every point a walk starts from: no walk reads it
            snapshotted = entry_id in snapshots.covered and number(entry_id) < floor
            if not info.key.endswith(".json") or (entry_id in needed_entries and not snapshotted):
                result.keep(info, committed=True)
            elif collectable(info):
                if not dry_run:
                    store.delete(info.key)
                if snapshotted:
                    result.deleted_snapshotted_entries += 1
                else:
                    result.deleted_entries.append(f"{path}:{entry_id}")
                result.deleted_entry_bytes += info.size
        for info in [*areas.get("staging", []), *areas.get("upserts", [])]:
            if info.key in needed_files or ("/_restores/" in info.key and info.key not in unreached) \
                    or info.key in table_files:
                if info.key not in needed_files and info.key in table_files:
                    result.kept_for_table += 1
                result.live_files += 1
                result.live_bytes += info.size
                result.keep(info, committed=True)
                if scan:
                    scan.see(info, "live", info.key in needed_files)
            elif collectable(info):
                if not dry_run:
                    store.delete(info.key)
                result.deleted_files += 1
                result.deleted_bytes += info.size
                result.deleted_folded_files += info.key in released
                if scan:
                    scan.see(info, "deleted")
            elif scan:
                scan.see(info, "kept")
        if scan:
            after = cursor_after_full(ctx, path, needed_entries, scan)
            if after is not None and table is not None:  # and where the table's log was read to
                log_state = log_cursor_after_full(store, sink_root(job, path), table.listed, table.read,
                                                  delta_retention_seconds, int((now - delta_retention_seconds) * 1000),
                                                  ctx.log_cleaned.get(path, (0.0, 0)))
                after = None if log_state is None else replace(after, delta=log_state.to_dict())
            write_cursor(ctx, path, after)
    log.info("output gc pass", extra={"job": str(job), "deleted_entries": len(result.deleted_entries),
                                      "deleted_files": result.deleted_files, "deleted_bytes": result.deleted_bytes,
                                      "dry_run": dry_run})
    return result


def sink_paths(store: ObjectStore, job: JobRef) -> dict[str, set[str]]:
    """Every sink path under the job's outputs/ -> the areas it holds, from delimiter listings (a
    path is a folder holding an area; a path may be nested, e.g. `a/b`)."""
    out: dict[str, set[str]] = {}

    def visit(prefix: str, rel: str) -> None:
        names = store.list_children(prefix)
        if (areas := {n for n in names if n in _AREAS}) and rel:
            out[rel] = areas
        for name in names:
            if name not in _AREAS:
                visit(f"{prefix}{name}/", f"{rel}/{name}" if rel else name)

    visit(outputs_prefix(job), "")
    return out


def sink_sections(store: ObjectStore, job: JobRef, incarnation: str | None) -> list[tuple[str, dict[str, Any]]]:
    """(entry id, extra.sink) of every checkpoint manifest in the store and every attached savepoint."""
    manifests, savepoints = restorable(store, job)
    return sections_of(manifests, attached(store, job, savepoints, incarnation))


def attached(store: ObjectStore, job: JobRef, savepoints: list[Any], incarnation: str | None) -> list[Any]:
    """The savepoints whose restore would continue an output history. A savepoint of another job of
    this name (`incarnation`: the current one's uid) whose entries or files are gone (gc.onDelete:
    delete) is detached: its restore starts a new history (transactional.py, `_not_republished`), so
    it needs nothing of the output and bounds nothing. The current job's points keep the strict rule:
    a missing entry there is an error, not a reason to collect."""
    out = []
    for sp in savepoints:
        sink = (sp.extra or {}).get("sink")
        own = (sink or {}).get("incarnation") or sp.job_uid
        if sink and incarnation is not None and own and own != incarnation:
            path = str(sink.get("path", "default")).strip("/")
            previous = sink.get("previous")
            if (previous is not None and not store.exists(commit_key(job, path, previous))) or not all(
                    store.exists(k) for f in sink.get("files", []) for k in file_keys(f)):
                continue
        out.append(sp)
    return out


def sections_of(manifests: list[Any], savepoints: list[Any]) -> list[tuple[str, dict[str, Any]]]:
    out = []
    for manifest in manifests:
        if sink := (manifest.extra or {}).get("sink"):
            out.append((manifest.id, sink))
    for savepoint in savepoints:
        if sink := (savepoint.extra or {}).get("sink"):
            out.append((savepoint.source_checkpoint or savepoint.id, sink))
    return out


def _records(store: ObjectStore, infos: list[ObjectInfo]) -> list[dict[str, Any]]:
    out = []
    for info in infos:
        if info.key.endswith(".json"):
            try:
                out.append(json.loads(store.get_bytes(info.key)))
            except ObjectNotFoundError:
                continue
    return sorted(out, key=lambda r: str(r["id"]))


def _needed(store: ObjectStore, job: JobRef, path: str, commits: list[ObjectInfo],
            manifests: list[tuple[str, dict[str, Any]]],
            records: list[dict[str, Any]],
            segments: SegmentReader) -> tuple[set[str], set[str], set[str], int]:
    """The entry ids, file keys and compaction records of `path` that readers or a restore of a kept
    point need. A history's files are those of its items with the compaction records applied: the
    small files a record replaced are needed only by a history that holds part of its run. Kept
    points share their past: without records, a point whose predecessor an earlier walk already
    took in adds only its own files (every id in `entries` has its whole history added). The last
    item: the floor, below which no walk from the head or a kept point reads an entry from `_commits/`."""
    ids = [id_from_json_key(o.key) for o in commits if o.key.endswith(".json")]
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

    entries: set[str] = set()
    files: set[str] = set()
    used: set[str] = set()

    def keep_history(head: dict[str, Any] | None, own: dict[str, Any] | None = None) -> None:
        if head is not None and head.get("kind") == "continuation":
            entries.add(continuation_id(int(head["attempt"])))
        if head is not None and not records and head.get("kind") != "continuation" and head["checkpoint"] in entries:
            files.update(k for item in (own or {}).get("files", []) for k in file_keys(item))
            return
        chain = follow_chain(head, ids, load, segments)
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

    head = head_entry(ids, load)
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
