"""History snapshots: a sink's chain of commit entries in segments, so that no reader, start or GC
pass walks it one entry at a time back to the job's first checkpoint (docs/design.md §6).

Under `outputs/<path>/`:

  _snapshots/<checkpoint-id>.json   {"checkpoint", "attempt", "base", "entries", "index", "totals"}

`entries` are the commit entries of the history that ends at entry `checkpoint`, oldest first,
exactly as stored in `_commits/`, from the one after the entry `base` (the previous snapshot of the
same history, or null: back to the history's first entry, or to an entry from before lineage). A
snapshot is immutable and determined by its checkpoint's chain (entries never change and name their
predecessor), so writing one twice writes the same document, and it stands for its entries wherever
a walk meets its checkpoint id: the walk takes the whole segment in one GET and continues from the
segment's first entry's `previous`. Entries from before lineage (no `previous`) are never put in one.

So that a reader need not walk every snapshot back to reach a history's first rows, a snapshot also
names the snapshots before it (`index`: {"pages", "since"}: `since` the ids after the newest page,
oldest first, fewer than PAGE; `pages` the ids of every PAGE-th snapshot, each of which names the
PAGE - 1 before it in its own `since`) and the history's `totals` up to it ({"batches", "rows",
"first", "last"}); both null where the history reaches entries from before lineage, both absent in
snapshots written before them (the next snapshot computes them once, walking the old ones). Each
commit entry names in `snapshot` a snapshot on its own chain (the newest its writer knew), so a walk
from it lists `_snapshots/` only from there on (`chain_snapshot_ids`), not the job's whole life.

The runtime (the history's single fenced writer) snapshots its history every SEGMENT entries, after a
publish, and at a start (a store written before snapshots existed is walked once and compacted forward).
The GC sidecar only reads them, and collects those no needed history walks through.
"""

from __future__ import annotations

import json
import logging
import os
from collections.abc import Callable, Iterable, Iterator
from typing import Any, Protocol

from sparkpoint.runtime.store import JobRef, ObjectInfo, ObjectStore
from sparkpoint.runtime.store.base import ObjectNotFoundError
from sparkpoint.runtime.store.layout import CHECKPOINT_ID, id_from_json_key

from .keys import commit_key, commits_prefix, sink_root
from .lineage import OutputLineageError, head_checkpoint

log = logging.getLogger("sparkpoint.sink")

SEGMENT = 1000  # entries per snapshot: a walk of N entries costs at most SEGMENT + N / SEGMENT GETs
PAGE = 1000  # snapshots per index page: a history's first rows cost 3 GETs past its newest snapshot

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


def snapshots_from(store: ObjectStore, job: JobRef, path: str, low: str, high: str) -> Iterator[ObjectInfo]:
    """`_snapshots/` from id `low` on, as far as id `high`. Ids sort by number only at one width, so
    the listing is of the digits both share (every id of that width between them has them), from
    `low` on (past chk-999999 a listing from `low` alone also took every older 6-digit snapshot with
    larger leading digits); while `high` is wider than `low` (the crossing of 999,999), all of it.
    Narrower ids under the shared digits may come too: callers filter what they need."""
    prefix = snapshots_prefix(job, path)
    if len(high) > len(low):
        return store.list(prefix)
    return store.list_after(prefix + os.path.commonprefix([low, high]), prefix + low)  # `low` sorts after its bare id


def chain_snapshot_ids(store: ObjectStore, job: JobRef, path: str, head: str | None, hint: str | None) -> set[str]:
    """The snapshot ids a walk back from entry `head` can meet until it reaches `hint` (a snapshot on
    head's chain, what the head entry names): those numbered from `hint` to `head`, so a start or a
    reader lists what the job wrote lately, not over its life (`snapshots_from`)."""
    if hint is None or head is None or _number(hint) < 0 or _number(head) < 0 or len(head) != len(hint):
        return snapshot_ids(store, job, path)
    return {id_from_json_key(o.key) for o in snapshots_from(store, job, path, hint, head)
            if o.key.endswith(".json") and _between(id_from_json_key(o.key), hint, head)}


def _between(cid: str, low: str, high: str) -> bool:
    """On a chain from `low` to `high` (ids of one width): the narrower ids a prefix listing meets are not."""
    return len(cid) == len(high) and _number(low) <= _number(cid) <= _number(high)


class Covered(Protocol):
    def update(self, entry_ids: Iterable[str]) -> None: ...
    def __contains__(self, entry_id: object) -> bool: ...
    def __len__(self) -> int: ...


class SegmentReader:
    """`segments` for lineage.follow_chain: the snapshot of an entry id, or None when it has none.
    `covered` collects the ids of the entries the walks took from snapshots, not from `_commits/`;
    `last` is the newest snapshot document read (its `index` and `totals` for a reader). With `head`
    (the entry a walk starts from) and no `ids`, `_snapshots/` is listed from the head's hint on."""

    def __init__(self, store: ObjectStore, job: JobRef, path: str, ids: set[str] | None = None,
                 track: bool = True, head: dict[str, Any] | None = None):
        self.store, self.job, self.path = store, job, path
        # Listed from the head's hint on: the older snapshots of its chain are learnt from each read
        # one's `base`, so a whole walk still goes snapshot by snapshot.
        self._bounded = ids is None and head is not None
        if ids is None:
            ids = (snapshot_ids(store, job, path) if head is None else
                   chain_snapshot_ids(store, job, path, head_checkpoint(head), head.get("snapshot")))
        self.ids = ids
        self.covered: Covered = set()  # (a full GC pass gives a set on disk: gc_spill.IdSet)
        self.last: dict[str, Any] | None = None
        self._track = track  # False: a reader that needs no `covered` (it would hold every entry's id)

    def document(self, checkpoint_id: str) -> dict[str, Any] | None:
        """The snapshot ending at `checkpoint_id`, checked; None when there is none (or it was collected)."""
        try:
            doc = json.loads(self.store.get_bytes(snapshot_key(self.job, self.path, checkpoint_id)))
        except ObjectNotFoundError:
            return None  # collected meanwhile: its entries are read one by one
        entries = doc.get("entries") or []
        if not entries or entries[-1].get("checkpoint") != checkpoint_id:
            raise OutputLineageError(f"history snapshot {checkpoint_id} does not end at its own entry")
        return doc

    def __call__(self, checkpoint_id: str) -> list[dict[str, Any]] | None:
        if checkpoint_id not in self.ids:
            return None
        doc = self.document(checkpoint_id)
        if doc is None:
            return None
        entries = doc["entries"]
        self.last = {k: v for k, v in doc.items() if k != "entries"}
        if self._bounded and doc.get("base"):
            self.ids.add(doc["base"])
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


def _fresh_totals() -> dict[str, Any]:
    return {"batches": 0, "rows": 0, "first": None, "last": None}


def next_description(base: str | None, described: tuple[Any, Any] | None, entries: list[dict[str, Any]],
                     page: int = PAGE) -> tuple[Any, Any]:
    """(index, totals) of the snapshot of `entries` after snapshot `base` described by `described`
    (its own index and totals); (None, None) where the history reaches entries from before lineage."""
    if base is None:
        if entries and entries[0].get("previous", "") is not None:
            return None, None  # its first entry follows one no snapshot holds: the totals are unknown
        index: dict[str, list[str]] = {"pages": [], "since": []}
        totals = _fresh_totals()
    else:
        prior_index, prior_totals = described or (None, None)
        if prior_index is None or prior_totals is None:
            return None, None
        if len(prior_index["since"]) + 1 >= page:  # `base` ends a page: it names the ones before it
            index = {"pages": [*prior_index["pages"], base], "since": []}
        else:
            index = {"pages": list(prior_index["pages"]), "since": [*prior_index["since"], base]}
        totals = dict(prior_totals)
    batches = [item for e in entries for item in e.get("files", [])]
    if batches:
        totals["batches"] += len(batches)
        totals["rows"] += sum(int(item.get("rows") or 0) for item in batches)
        totals["first"] = int(batches[0]["batch"]) if totals["first"] is None else totals["first"]
        totals["last"] = int(batches[-1]["batch"])
    return index, totals


def describe(segments: SegmentReader, snapshot: str, doc: dict[str, Any], page: int = PAGE) -> tuple[Any, Any]:
    """(index, totals) of a stored snapshot; for one written before they existed, computed once by
    walking its bases back (a GET per snapshot: what every later one then carries forward)."""
    if "index" in doc:
        return doc.get("index"), doc.get("totals")
    older: list[tuple[str, dict[str, Any]]] = [(snapshot, doc)]
    found: dict[str, Any] | None = None
    while (base := older[-1][1].get("base")) is not None:
        if (found := segments.document(base)) is None:
            return None, None  # collected under a walk: computed again from the next one
        if "index" in found:
            break
        older.append((base, found))
    described = describe(segments, base, found, page) if base is not None and found is not None else None
    for _, d in reversed(older):
        described = next_description(d.get("base"), described, d.get("entries") or [], page)
    return described if described is not None else (None, None)


def compact_forward(store: ObjectStore, job: JobRef, path: str, head: str | None, attempt: int,
                    load: Callable[[str], dict[str, Any] | None], segment: int = SEGMENT, page: int | None = None,
                    hint: str | None = None) -> tuple[int, str | None]:
    """Snapshot the history that ends at entry `head` in segments of `segment` entries, from its
    newest snapshot (or its start) on; the entries after the last full segment stay unsnapshotted.
    `hint`: a snapshot on head's chain (`_snapshots/` is listed from it on). Returns how many
    snapshots were written and the newest snapshot of the chain. Reads at most the entries after the
    newest snapshot (and, once, the snapshots written before `index` existed)."""
    if head is None:
        return 0, None
    page = PAGE if page is None else page
    have = chain_snapshot_ids(store, job, path, head, hint)
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
    described: tuple[Any, Any] | None = None
    if len(tail) >= segment and base is not None:
        segments = SegmentReader(store, job, path, ids=have)
        found = segments.document(base)
        described = describe(segments, base, found, page) if found is not None else None
    while len(tail) >= segment:
        part, tail = tail[:segment], tail[segment:]
        end = part[-1]["checkpoint"]
        index, totals = next_description(base, described, part, page)
        doc = {"checkpoint": end, "attempt": attempt, "base": base, "entries": part, "index": index,
               "totals": totals}
        store.put_if_absent(snapshot_key(job, path, end), json.dumps(doc, sort_keys=True).encode())
        base, described, written = end, (index, totals), written + 1
    if written:
        log.info("history snapshots written", extra={"path": path, "snapshots": written, "newest": base})
    return written, base
