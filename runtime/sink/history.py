"""History snapshots: a sink's chain of commit entries in segments, so that no reader, start or GC
pass walks it one entry at a time back to the job's first checkpoint (docs/design.md §6).

Under `outputs/<path>/`:

  _snapshots/<checkpoint-id>.json   {"checkpoint", "attempt", "base", "entries"}

`entries` are the commit entries of the history that ends at entry `checkpoint`, oldest first,
exactly as stored in `_commits/`, from the one after the entry `base` (the previous snapshot of the
same history, or null: back to the history's first entry, or to an entry from before lineage). A
snapshot is immutable and determined by its checkpoint's chain (entries never change and name their
predecessor), so writing one twice writes the same document, and it stands for its entries wherever
a walk meets its checkpoint id: the walk takes the whole segment in one GET and continues from the
segment's first entry's `previous`. Entries from before lineage (no `previous`) are never put in one.

The runtime (the history's single fenced writer) snapshots its history every SEGMENT entries, after a
publish, and at a start (a store written before snapshots existed is walked once and compacted forward).
The GC sidecar only reads them, and collects those no needed history walks through.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Callable
from typing import Any

from sparkpoint.runtime.store import JobRef, ObjectStore
from sparkpoint.runtime.store.base import ObjectNotFoundError
from sparkpoint.runtime.store.layout import CHECKPOINT_ID, id_from_json_key

from .keys import commit_key, commits_prefix, sink_root
from .lineage import OutputLineageError

log = logging.getLogger("sparkpoint.sink")

SEGMENT = 1000  # entries per snapshot: a walk of N entries costs at most SEGMENT + N / SEGMENT GETs

_HOLDING_TRIES = 3  # snapshots of other histories may end between an entry and its own snapshot


def _number(entry_id: str) -> int:
    m = CHECKPOINT_ID.match(entry_id)
    return int(m.group(1)) if m else -1


def entry_ids(store: ObjectStore, job: JobRef, path: str) -> list[str]:
    """The ids of the entries in `_commits/` (one listing)."""
    return [id_from_json_key(o.key) for o in store.list(commits_prefix(job, path)) if o.key.endswith(".json")]


def entry_loader(store: ObjectStore, job: JobRef, path: str) -> Callable[[str], dict[str, Any] | None]:
    """Reads one entry of `_commits/` by id; None when it is not there."""
    def load(entry_id: str) -> dict[str, Any] | None:
        try:
            return json.loads(store.get_bytes(commit_key(job, path, entry_id)))
        except ObjectNotFoundError:
            return None
    return load


def snapshots_prefix(job: JobRef, path: str) -> str:
    return f"{sink_root(job, path)}/_snapshots/"


def snapshot_key(job: JobRef, path: str, checkpoint_id: str) -> str:
    return f"{snapshots_prefix(job, path)}{checkpoint_id}.json"


def snapshot_ids(store: ObjectStore, job: JobRef, path: str) -> set[str]:
    return {id_from_json_key(o.key) for o in store.list(snapshots_prefix(job, path)) if o.key.endswith(".json")}


class SegmentReader:
    """`segments` for lineage.follow_chain: the snapshot of an entry id, or None when it has none.
    `covered` collects the ids of the entries the walks took from snapshots, not from `_commits/`."""

    def __init__(self, store: ObjectStore, job: JobRef, path: str, ids: set[str] | None = None,
                 track: bool = True):
        self.store, self.job, self.path = store, job, path
        self.ids = snapshot_ids(store, job, path) if ids is None else ids
        self.covered: set[str] = set()
        self._track = track  # False: a reader that needs no `covered` (it would hold every entry's id)

    def __call__(self, checkpoint_id: str) -> list[dict[str, Any]] | None:
        if checkpoint_id not in self.ids:
            return None
        try:
            doc = json.loads(self.store.get_bytes(snapshot_key(self.job, self.path, checkpoint_id)))
        except ObjectNotFoundError:
            return None  # collected meanwhile: its entries are read one by one
        entries = doc.get("entries") or []
        if not entries or entries[-1].get("checkpoint") != checkpoint_id:
            raise OutputLineageError(f"history snapshot {checkpoint_id} does not end at its own entry")
        if self._track:
            self.covered.update(str(e["checkpoint"]) for e in entries)
        return list(entries)

    def holding(self, checkpoint_id: str) -> list[dict[str, Any]] | None:
        """The entries of a snapshot that holds `checkpoint_id` inside it, oldest first, up to that
        entry: for an entry GC deleted because snapshots hold it (a restore of a point that left
        retention during the pass). The nearest snapshots after it are tried; None if none holds it."""
        number = _number(checkpoint_id)
        later = sorted((n, i) for i in self.ids if (n := _number(i)) >= number >= 0)
        for _, end in later[:_HOLDING_TRIES]:
            entries = self(end) or []
            for i, entry in enumerate(entries):
                if entry.get("checkpoint") == checkpoint_id:
                    return entries[: i + 1]
        return None


def compact_forward(store: ObjectStore, job: JobRef, path: str, head: str | None, attempt: int,
                    load: Callable[[str], dict[str, Any] | None], segment: int = SEGMENT) -> int:
    """Snapshot the history that ends at entry `head` in segments of `segment` entries, from its
    newest snapshot (or its start) on; the entries after the last full segment stay unsnapshotted.
    Returns how many snapshots were written. Reads at most the entries after the newest snapshot."""
    if head is None:
        return 0
    have = snapshot_ids(store, job, path)
    tail: list[dict[str, Any]] = []
    base: str | None = None
    cid: str | None = head
    seen: set[str] = set()
    while cid is not None:
        if cid in have:
            base = cid
            break
        if cid in seen:
            raise OutputLineageError(f"commit entries form a cycle at {cid}")
        seen.add(cid)
        doc = load(cid)
        if doc is None or "previous" not in doc:
            break  # a missing entry (readers will say so) or one from before lineage: no further
        tail.append(doc)
        cid = doc["previous"]
    tail.reverse()
    written = 0
    while len(tail) >= segment:
        part, tail = tail[:segment], tail[segment:]
        end = part[-1]["checkpoint"]
        doc = {"checkpoint": end, "attempt": attempt, "base": base, "entries": part}
        store.put_if_absent(snapshot_key(job, path, end), json.dumps(doc, sort_keys=True).encode())
        base, written = end, written + 1
    if written:
        log.info("history snapshots written", extra={"path": path, "snapshots": written, "newest": base})
    return written
