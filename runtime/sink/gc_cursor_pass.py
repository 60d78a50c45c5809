"""One path's output pass from its cursor (gc_cursor.py, docs/design.md §7): only what changed since
the last pass is listed and walked; anything it cannot decide raises Diverged before a delete."""


import json
from collections.abc import Iterator
from typing import Any

from sparkpoint.runtime.store import ObjectInfo
from sparkpoint.runtime.store.base import ObjectNotFoundError
from sparkpoint.runtime.store.layout import id_from_json_key

from .delta_cursor import TableLog, parse_log_cursor
from .gc_cursor import Cursor, Diverged, PassContext, folder_of, number
from .gc_walk import see, start_of, walk_window
from .history import snapshots_from, snapshots_prefix
from .keys import commit_key, commits_prefix, file_keys, sink_root, staging_prefix
from .lineage import continuation_id, head_checkpoint, head_entry


def incremental_pass(ctx: PassContext, path: str, cursor: Cursor, result: Any,
                     delta_retention: float | None = None) -> Cursor:
    """One path's output pass from its cursor; returns the next cursor. Raises Diverged (before
    deleting anything) when the full pass must decide instead. `delta_retention`: the path holds a
    Delta table (its log is read from the cursor's version on, delta_cursor.py)."""
    store, job = ctx.store, ctx.job
    table = None
    if delta_retention is not None:
        if (state := parse_log_cursor(cursor.delta)) is None:
            raise Diverged("the cursor holds no state of the path's Delta log")
        table = TableLog(store, sink_root(job, path), state, retention=delta_retention, now=ctx.now)
    commits = [o for o in store.list(commits_prefix(job, path)) if o.key.endswith(".json")]
    commit_ids = [id_from_json_key(o.key) for o in commits]
    snapshots = [o for o in _snapshot_listing(ctx, path, cursor.snapshot, [*commit_ids, *(e for e, _ in ctx.manifests)])
                 if o.key.endswith(".json")]
    loaded: dict[str, dict[str, Any] | None] = {}

    def load(entry_id: str) -> dict[str, Any] | None:
        if entry_id not in loaded:
            try:
                loaded[entry_id] = json.loads(store.get_bytes(commit_key(job, path, entry_id)))
            except ObjectNotFoundError:
                loaded[entry_id] = None
        return loaded[entry_id]

    head = head_entry(commit_ids, load)
    points = [(eid, sink) for eid, sink in ctx.manifests if str(sink.get("path", "default")).strip("/") == path]
    published_ids = set(commit_ids)
    starts = [head_checkpoint(head), *[start_of(eid, sink, published_ids) for eid, sink in points]]
    window, segments, newest, first = walk_window(store, job, path, cursor, commit_ids,
                                                  {id_from_json_key(o.key) for o in snapshots}, starts, load)
    if table is not None and table.advance().checkpoint not in window.ids:  # after `_commits/` was listed
        raise Diverged("the table's newest commit names no checkpoint on a walked chain")
    needed = set(window.ids) | {eid for eid, _ in points}
    if head is not None and head.get("kind") == "continuation":
        needed.add(continuation_id(int(head["attempt"])))
    manifest_keys = {k for _, sink in points for f in sink.get("files", []) for k in file_keys(f)}
    published = {int(name.split("-", 1)[1]): int(f["published"]) for name, f in cursor.folders.items()}
    for attempt, pub in window.published.items():
        published[attempt] = max(published.get(attempt, -1), pub)

    # What no kept point reaches: its entries and snapshots, decided here before anything is deleted
    abandoned_entries = [o for o in commits if id_from_json_key(o.key) not in needed]
    abandoned_snapshots = [o for o in snapshots if number(id_from_json_key(o.key)) > cursor.snapshot
                           and id_from_json_key(o.key) not in needed and id_from_json_key(o.key) not in window.met]
    docs: list[tuple[ObjectInfo, list[dict[str, Any]]]] = []
    for info in abandoned_entries:
        doc = load(id_from_json_key(info.key))
        docs.append((info, [doc] if doc is not None and doc.get("kind") != "continuation" else []))
    for info in abandoned_snapshots:
        try:
            held = json.loads(store.get_bytes(info.key)).get("entries") or []
        except ObjectNotFoundError:
            continue
        docs.append((info, [d for d in held if d["checkpoint"] not in needed]))
    floor = cursor.batch if window.floor is None else min(window.floor, cursor.batch)
    for _, held in docs:
        for doc in held:
            if int(doc["afterBatch"]) < floor:
                raise Diverged(f"entry {doc['checkpoint']} of no kept history reaches below the walked window")
            see(published, doc)

    settled = {"objects": cursor.objects, "bytes": cursor.bytes}

    def passed(key: str) -> bool:  # counted in the cursor's totals already
        f = folder_of(key)
        if f is None:
            return False
        if f[0] in cursor.folders:
            return key <= str(cursor.folders[f[0]]["after"])
        return f[1] <= cursor.attempt

    # Abandoned entries and snapshots: their files first (by name), then themselves
    kept: set[str] = set()
    for_table: set[str] = set()
    for info, held in docs:
        for key in sorted({k for doc in held for item in doc.get("files", []) for k in file_keys(item)}):
            if key in window.keys or key in manifest_keys:
                continue
            if table is not None and table.needs(key):  # the entry stays: a later pass finds the file by it
                for_table.add(info.key)
                result.kept_for_table += 1
                continue
            stat = store.stat(key)
            if stat is None:
                continue
            f = folder_of(key)
            if ctx.young(stat) or (f is not None and f[1] >= ctx.newest_attempt):
                kept.add(info.key)  # the entry stays too: it is how a later pass finds this file
                result.kept_young_or_newest += 1
                result.keep(stat, committed=False)
                continue
            if not ctx.dry_run:
                store.delete(key)
            result.deleted_files += 1
            result.deleted_bytes += stat.size
            if passed(key):
                settled["objects"] -= 1
                settled["bytes"] -= stat.size
        if info.key in for_table and info.key not in kept and not ctx.young(info):
            kept.add(info.key)
            result.keep(info, committed=True)
            continue
        if info.key in kept or ctx.young(info):
            kept.add(info.key)
            result.kept_young_or_newest += 1
            result.keep(info, committed=False)
            continue
        if not ctx.dry_run:
            store.delete(info.key)
        if "/_snapshots/" in info.key:
            result.deleted_snapshots += 1
        else:
            result.deleted_entries.append(f"{path}:{id_from_json_key(info.key)}")
            result.deleted_entry_bytes += info.size

    # Needed entries a snapshot holds, older than the first snapshot every walk meets: no walk reads them
    decided = {o.key for o, _ in docs}
    for info in commits:
        if info.key in decided:
            continue
        entry_id = id_from_json_key(info.key)
        if entry_id in segments.covered and number(entry_id) < first and not ctx.young(info):
            if not ctx.dry_run:
                store.delete(info.key)
            result.deleted_snapshotted_entries += 1
            result.deleted_entry_bytes += info.size
        else:
            result.keep(info, committed=True)
    for info in snapshots:  # (S itself is listed, and counted in the cursor's snapshot totals)
        if info.key not in decided and number(id_from_json_key(info.key)) > cursor.snapshot:
            result.keep(info, committed=True)

    # what no listing of this pass shows: the data files the folders' cursors passed, the settled snapshots
    result.committed_objects += settled["objects"] + cursor.snapshot_objects
    result.committed_bytes += settled["bytes"] + cursor.snapshot_bytes
    result.live_files += settled["objects"]
    result.live_bytes += settled["bytes"]
    folders = _list_folders(ctx, path, cursor, window.keys, manifest_keys, published, settled, result, table)
    if table is not None:  # the log: what the cursor counted and what this pass listed after it
        log_objects, log_bytes = table.log_objects
        result.committed_objects += log_objects
        result.committed_bytes += log_bytes
    snapshot = max((number(i) for i in window.met if number(i) <= number(newest)), default=cursor.snapshot)
    if undecided := [number(id_from_json_key(k)) for k in kept if "/_snapshots/" in k]:
        snapshot = min(snapshot, min(undecided) - 1)
    snapshot = max(cursor.snapshot, snapshot)
    passed_snapshots = [o for o in snapshots if o.key not in decided and cursor.snapshot < number(id_from_json_key(o.key))
                        <= snapshot]
    return Cursor(entry=newest, batch=window.batches[newest], snapshot=snapshot,
                  attempt=max(ctx.newest_attempt, cursor.attempt), folders=folders,
                  objects=settled["objects"], bytes=settled["bytes"],
                  snapshot_objects=cursor.snapshot_objects + len(passed_snapshots),
                  snapshot_bytes=cursor.snapshot_bytes + sum(o.size for o in passed_snapshots),
                  delta=None if table is None or table.next is None else table.next.to_dict())


def _snapshot_listing(ctx: PassContext, path: str, settled: int, ids: list[str]) -> Iterator[ObjectInfo]:
    """`_snapshots/` from the settled snapshot S on (those before it are on M's chain and no walk
    goes below S) up to the newest id named (a snapshot ends at an entry): history.snapshots_from."""
    if settled <= 0:
        return ctx.store.list(snapshots_prefix(ctx.job, path))
    return snapshots_from(ctx.store, ctx.job, path, f"chk-{settled:06d}", f"chk-{max(settled, *(number(i) for i in ids)):06d}")


def _list_folders(ctx: PassContext, path: str, cursor: Cursor, named: set[str], manifest_keys: set[str],
                  published: dict[int, int], settled: dict[str, int], result: Any,
                  table: TableLog | None = None) -> dict[str, dict[str, Any]]:
    """List the open staging folders after their cursors and the new attempts' folders whole;
    collect uploads no entry names (but what a Delta commit removed inside the retention: a
    superseded history's file whose entry a full pass deleted). Returns the folders still open."""
    store, job = ctx.store, ctx.job
    prefix = staging_prefix(job, path)
    todo = dict(cursor.folders)
    for attempt in range(cursor.attempt + 1, ctx.newest_attempt + 1):
        todo.setdefault(f"attempt-{attempt}", {"after": "", "published": -1})
    out: dict[str, dict[str, Any]] = {}
    for name, state in sorted(todo.items()):
        attempt = int(name.split("-", 1)[1])
        top = max(published.get(attempt, -1), published.get(-1, -1), int(state.get("published", -1)))
        after, blocked = str(state.get("after", "")), False
        listing = store.list_after(f"{prefix}{name}/", after) if after else store.list(f"{prefix}{name}/")
        for info in listing:
            f = folder_of(info.key)
            by_entry = info.key in named or (f is not None and f[2] <= top)  # named by an entry
            if by_entry or info.key in manifest_keys:
                result.live_files += 1
                result.live_bytes += info.size
                result.keep(info, committed=True)
                if by_entry and not blocked:
                    after = info.key
                    settled["objects"] += 1
                    settled["bytes"] += info.size
                else:  # named only by a manifest: its entry may never come, and then no entry names it
                    blocked = True
            elif table is not None and table.needs(info.key):
                blocked = True
                result.kept_for_table += 1
                result.live_files += 1
                result.live_bytes += info.size
                result.keep(info, committed=True)
            elif f is not None and not ctx.young(info) and attempt < ctx.newest_attempt:
                if not ctx.dry_run:
                    store.delete(info.key)
                result.deleted_files += 1
                result.deleted_bytes += info.size
                if not blocked:
                    after = info.key
            else:
                blocked = True
                result.kept_young_or_newest += 1
                result.keep(info, committed=False)
        if blocked or attempt >= ctx.newest_attempt:
            out[name] = {"after": after, "published": top}
    return out
