"""Which of an upsert sink's files a view reads (docs/design.md §6): its batch markers and restore
records as listed, the attempts' tree they form (upsert_history.py), and per view the batches to fold
and the files they are read from. Read-only over the store.

The sink (upsert.py), its snapshots (upsert_snapshot.py) and output GC (output_gc.py) all read the
output through these, so none of them imports another for it.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterable
from typing import Any

from sparkpoint.runtime.store import ObjectInfo, ObjectStore

from .upsert_history import PREVIOUS, UNBOUNDED, Restore, Tree, segments, tree_of, view_entries

# markers, and files from before executor-written output (before attempts: attempt 0)
_FILE = re.compile(r"/batch-(\d+)(?:-a(\d+))?\.(jsonl|json)$")
_RESTORE = re.compile(r"/_restores/a(\d+)\.json$")
_ATTEMPT = re.compile(r"/upserts/batch-\d+-a(\d+)(?:\.jsonl?$|-[0-9a-f]+/)")

View = tuple[int, int | None]  # (attempt, batch): a restorable point's history (batch None: unknown)


def visible_entries(files: list[tuple[int, int, str]], restores: list[Restore],
                    view: View | None = None) -> list[tuple[int, str]]:
    """Pure rule: (batch, attempt, key) files and (attempt, afterBatch[, parent]) restores -> (batch,
    key) to fold, in order, for `view` (None: the current table, the newest attempt's history). The
    attempts form a tree (upsert_history.py): a view reads its attempt's batches over the history
    that attempt continued, up to the batch it continued from."""
    tree = upsert_tree(files, restores)
    attempt, limit = (tree.newest, UNBOUNDED) if view is None else (view[0], UNBOUNDED if view[1] is None
                                                                    else view[1])
    return view_entries(files, segments(tree, attempt, limit))


def upsert_tree(files: list[tuple[int, int, str]], restores: list[Restore]) -> Tree:
    return tree_of((a for _, a, _ in files), restores)


def visible_files(files: list[tuple[int, int, str]], restores: list[Restore]) -> list[str]:
    return [key for _, key in visible_entries(files, restores)]


def upsert_files(store: ObjectStore, listed: Iterable[ObjectInfo]) -> tuple[list[tuple[int, int, str]],
                                                                          list[Restore]]:
    """(batch, attempt, key) markers and legacy files, and (attempt, afterBatch, parent) restores
    (parent PREVIOUS for a record without one), among listed upserts/ keys."""
    files: list[tuple[int, int, str]] = []
    restores: list[Restore] = []
    for o in listed:
        if m := _RESTORE.search(o.key):
            doc = _restore_doc(store, o)
            restores.append((int(m.group(1)), int(doc["afterBatch"]), doc.get("parent", PREVIOUS)))
        elif m := _FILE.search(o.key):
            files.append((int(m.group(1)), int(m.group(2) or 0), o.key))
    return files, restores


_RESTORES: dict[tuple[str, str, int, float], dict[str, Any]] = {}  # records never change: read each once


def _restore_doc(store: ObjectStore, info: ObjectInfo) -> dict[str, Any]:
    key = (store.url, info.key, info.size, info.last_modified)
    if key not in _RESTORES:
        if len(_RESTORES) > 100_000:
            _RESTORES.clear()
        _RESTORES[key] = json.loads(store.get_bytes(info.key))
    return _RESTORES[key]


def upsert_attempt(key: str) -> int | None:
    """The attempt that wrote an upserts/ key (a marker, a legacy file or a part), None for others."""
    m = _ATTEMPT.search(key)
    return int(m.group(1)) if m else None


def visible_batches(store: ObjectStore, listed: Iterable[ObjectInfo], cached: bool = False, after: int = -1,
                    up_to: int | None = None, view: View | None = None) -> list[tuple[str, list[tuple[str, str]]]]:
    """Per batch in (after, up_to] of `view` (None: the current table) in fold order: its marker (or
    legacy file) and the (key, format) of the files its rows are read from. `cached`: markers read in
    earlier calls (the GC sidecar's passes)."""
    listed = list(listed)
    files, restores = upsert_files(store, listed)
    infos = {o.key: o for o in listed}
    out: list[tuple[str, list[tuple[str, str]]]] = []
    for batch, key in visible_entries(files, restores, view):
        if batch <= after or (up_to is not None and batch > up_to):
            continue
        if key.endswith(".jsonl"):
            out.append((key, [(key, "legacy")]))
        else:
            marker = _marker(store, infos[key]) if cached else json.loads(store.get_bytes(key))
            out.append((key, [(k, str(marker["format"])) for k in marker["keys"]]))
    return out


# A marker is replaced only by a re-run of its batch in the same attempt (its size and time change):
# the GC sidecar, which resolves every visible batch each pass, reads each version once.
_MARKERS: dict[tuple[str, str, int, float], dict[str, Any]] = {}


def _marker(store: ObjectStore, info: ObjectInfo) -> dict[str, Any]:
    key = (store.url, info.key, info.size, info.last_modified)
    if key not in _MARKERS:
        if len(_MARKERS) > 200_000:  # bounded: a sidecar's jobs have far fewer visible batches
            _MARKERS.clear()
        _MARKERS[key] = json.loads(store.get_bytes(info.key))
    return _MARKERS[key]


def needed_keys(store: ObjectStore, listed: Iterable[ObjectInfo], after: int = -1,
                view: View | None = None) -> set[str]:
    """What `view` (None: the current table) is read from after batch `after`: its batches' markers
    and their files (output GC)."""
    return {k for marker, files in visible_batches(store, listed, cached=True, after=after, view=view)
            for k in (marker, *(f for f, _ in files))}
