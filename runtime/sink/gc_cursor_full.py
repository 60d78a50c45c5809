"""The cursor a full output pass leaves for a path (gc_cursor.py, docs/design.md §7): the staging
folders' states fed key by key, and the entry every kept point shares."""


import json
from collections.abc import Container
from typing import Any

from sparkpoint.runtime.store import ObjectInfo
from sparkpoint.runtime.store.base import ObjectNotFoundError
from sparkpoint.runtime.store.layout import id_from_json_key

from .gc_cursor import Cursor, Diverged, PassContext, folder_of, number
from .gc_walk import common_entry, start_of
from .history import SegmentReader, snapshots_prefix
from .keys import commit_key, commits_prefix, file_keys
from .lineage import OutputLineageError, head_checkpoint, head_entry


def unpublished_keys(ctx: PassContext, path: str, commit_ids: Container[str], segments: SegmentReader) -> set[str]:
    """The files of the path's kept points whose entry is not published (a crash between manifest and
    entry): if the entry never comes no entry names them, so a folder's cursor stops before them."""
    return {k for eid, sink in ctx.manifests if str(sink.get("path", "default")).strip("/") == path
            and eid not in commit_ids and not segments.holding(eid)
            for f in sink.get("files", []) for k in file_keys(f)}


class FolderScan:
    """The staging folders' cursors a full pass leaves: fed each staged key's fate in key order,
    it holds one state per folder, never the keys."""

    def __init__(self, unpublished: set[str]):
        self.unpublished = unpublished
        self.folders: dict[str, dict[str, Any]] = {}
        self.blocked: set[str] = set()
        self.objects = self.bytes = 0

    def see(self, info: ObjectInfo, done: str, named: bool = False) -> None:
        """`done`: "live" (`named`: by an entry or a kept point), "deleted" or "kept" (undecided)."""
        f = folder_of(info.key)
        if f is None:
            return
        state = self.folders.setdefault(f[0], {"after": "", "published": -1})
        by_entry = done == "live" and named and info.key not in self.unpublished
        if by_entry:
            state["published"] = max(state["published"], f[2])
        if f[0] in self.blocked:
            return
        if by_entry or done == "deleted":
            state["after"] = info.key
            if by_entry:
                self.objects, self.bytes = self.objects + 1, self.bytes + info.size
        else:
            self.blocked.add(f[0])


def cursor_after_full(ctx: PassContext, path: str, needed_entries: Container[str], scan: FolderScan) -> Cursor | None:
    """The cursor a full pass of a transactional sink's path leaves (None: the kept points share no
    entry, so the next pass is full too)."""
    store, job = ctx.store, ctx.job
    commit_ids = [id_from_json_key(o.key) for o in store.list(commits_prefix(job, path)) if o.key.endswith(".json")]
    snapshot_infos = [o for o in store.list(snapshots_prefix(job, path)) if o.key.endswith(".json")]
    snapshot_ids = {id_from_json_key(o.key) for o in snapshot_infos}

    def load(entry_id: str) -> dict[str, Any] | None:
        try:
            return json.loads(store.get_bytes(commit_key(job, path, entry_id)))
        except ObjectNotFoundError:
            return None

    mine_points = [(eid, sink) for eid, sink in ctx.manifests if str(sink.get("path", "default")).strip("/") == path]
    segments = SegmentReader(store, job, path, snapshot_ids)
    try:
        ids = set(commit_ids)
        m = common_entry([head_checkpoint(head_entry(commit_ids, load)),
                          *[start_of(eid, p, ids) for eid, p in mine_points]], load, segments)
    except (Diverged, OutputLineageError):
        return None
    if m is None:
        return None
    mine = [number(i) for i in snapshot_ids if i in needed_entries and number(i) <= number(m["checkpoint"])]
    others = [number(i) for i in snapshot_ids if i not in needed_entries]
    snapshot = max(mine, default=0)
    if others:
        snapshot = max(0, min(snapshot, min(others) - 1))
    folders = {name: state for name, state in scan.folders.items()
               if name in scan.blocked or int(name.split("-", 1)[1]) >= ctx.newest_attempt}
    folders.setdefault(f"attempt-{ctx.newest_attempt}", {"after": "", "published": -1})
    settled = [o for o in snapshot_infos if number(id_from_json_key(o.key)) <= snapshot]
    return Cursor(entry=m["checkpoint"], batch=int(m["upToBatch"]), snapshot=snapshot,
                  attempt=ctx.newest_attempt, folders=folders, objects=scan.objects, bytes=scan.bytes,
                  snapshot_objects=len(settled), snapshot_bytes=sum(o.size for o in settled))
