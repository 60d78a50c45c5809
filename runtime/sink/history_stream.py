"""A sink path's history read oldest first in bounded memory: what `sparkpoint output read` and
`iter_committed` stream (docs/design.md §6).

`committed_history` holds every commit entry of the history, one per checkpoint since the job began,
so reading even the first rows of a year-old job held a year of entries (a month of 10 s checkpoints:
about 450 MiB). Here the chain is walked back once keeping only its pieces (lineage.walk_back: an id
per history snapshot of 1,000 entries, an id per entry after the newest snapshot) and per piece its
batch count, rows and span; then the pieces are read again oldest first, one at a time. The oldest
piece, the walk's last read, is kept, so the first rows cost no GET more than the walk. Memory: one
piece, the list of pieces, and the compaction records (as before).

The walk stops at the first snapshot that names the ones before it (history.py: `index`, `totals`):
the summary is its totals plus the entries after it, and the older pieces are its index (a page, one
snapshot naming PAGE - 1 before it, is expanded when it is reached). So the first rows cost the
entries after the newest snapshot and three GETs, at any age, not a GET per 1,000 checkpoints.

The summary (batches, rows, span) is added up per piece without holding items, exactly when the
pieces' batches do not overlap (every history written since lineage: an entry starts after its
predecessor's last batch); entries from before lineage may overlap, and then the summary is counted
from a second, item by item pass (what `history_items` would keep: a batch's first item).

Compaction records apply to a window of items instead of the whole list (`apply_in_windows`): a record
replaces consecutive batches [batch, lastBatch], so a window that holds every item of that span, and
holds back the items from the start of any record still open at its end, applies each record exactly
where the whole list would.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from typing import Any

from sparkpoint.runtime.store import JobRef, ObjectStore

from .compaction import apply_records, last_batch, load_records
from .history import SegmentReader, entry_ids, entry_loader
from .lineage import OutputLineageError, Piece, head_checkpoint, head_entry, walk_back

WINDOW = 1000  # items per window of apply_in_windows (a record open across it holds back more)


@dataclass
class Summary:
    head: str | None  # the checkpoint entry the history ends at
    batches: int = 0
    rows: int = 0
    first: int | None = None  # the oldest batch
    last: int | None = None  # the newest batch


class HistoryStream:
    """The history readers see at `path`: `summary` after one walk back, `items()` its batch items
    (records applied) oldest first, read again piece by piece."""

    def __init__(self, store: ObjectStore, job: JobRef, path: str):
        self.store, self.job, self.path = store, job, path
        ids = entry_ids(store, job, path)
        self._load = entry_loader(store, job, path)
        head = head_entry(ids, self._load)
        self._segments = SegmentReader(store, job, path, track=False, ids=set() if head is None else None, head=head)
        self.summary = Summary(head_checkpoint(head))
        self.pieces: list[Piece] = []  # newest first, as walked
        self._oldest: tuple[Piece, list[dict[str, Any]]] | None = None
        low = math.inf  # the oldest batch of the pieces walked so far
        overlap = False
        for piece, entries in walk_back(head, ids, self._load, self._segments):
            if piece[0] == "snapshot" and self._indexed(piece, entries):
                break
            batches = [int(item["batch"]) for e in entries for item in e.get("files", [])]
            if batches and (batches[-1] >= low or any(a >= b for a, b in zip(batches, batches[1:], strict=False))):
                overlap = True
            if batches:
                low = min(low, batches[0])
                self.summary.batches += len(batches)
                self.summary.rows += sum(int(item.get("rows") or 0) for e in entries for item in e.get("files", []))
                self.summary.first = batches[0]
                self.summary.last = batches[-1] if self.summary.last is None else self.summary.last
            self.pieces.append(piece)
            self._oldest = (piece, entries)
        self.overlap = overlap
        if overlap:  # entries from before lineage: count a batch's first item only, as history_items does
            self.summary = Summary(self.summary.head)
            for item in self._items():
                self._count(item)

    def _indexed(self, piece: Piece, entries: list[dict[str, Any]]) -> bool:
        """At a snapshot naming those before it: its totals end the summary and its index the pieces."""
        doc = self._segments.last or {}
        index, totals = doc.get("index"), doc.get("totals")
        if index is None or totals is None or doc.get("checkpoint") != piece[1]:
            return False
        s = self.summary
        s.batches, s.rows = s.batches + int(totals["batches"]), s.rows + int(totals["rows"])
        s.first = totals["first"] if totals["first"] is not None else s.first
        s.last = totals["last"] if s.last is None else s.last
        self.pieces.append(piece)
        self.pieces.extend(("snapshot", sid) for sid in reversed(index["since"]))
        self.pieces.extend(("page", sid) for sid in reversed(index["pages"]))
        self._oldest = (piece, entries)
        return True

    def _count(self, item: dict[str, Any]) -> None:
        s = self.summary
        s.batches, s.rows = s.batches + 1, s.rows + int(item.get("rows") or 0)
        s.first = int(item["batch"]) if s.first is None else s.first
        s.last = int(item["batch"])

    def _read(self, piece: Piece) -> list[dict[str, Any]] | None:
        if self._oldest is not None and self._oldest[0] == piece:
            return self._oldest[1]
        kind, cid = piece
        if kind == "snapshot":  # named by the walk or by an index (older than what was listed)
            doc = self._segments.document(cid)
            return doc["entries"] if doc else None
        if kind == "held":
            return self._segments.holding(cid)
        if (doc := self._load(cid)) is not None:
            return [doc]
        held = self._segments.holding(cid)  # GC deleted it since the walk: a snapshot holds it
        return held[-1:] if held else None

    def _expanded(self) -> Iterator[tuple[Piece, list[dict[str, Any]] | None]]:
        """The pieces oldest first with their entries; a page is its snapshots, read one at a time."""
        previous_page: str | None = None
        for piece in reversed(self.pieces):
            if piece[0] != "page":
                yield piece, self._read(piece)
                continue
            doc = self._segments.document(piece[1])
            if doc is None:
                yield piece, None
                return
            since = doc["index"]["since"] if doc.get("index") else self._bases(doc, previous_page)
            for sid in since:
                yield ("snapshot", sid), self._read(("snapshot", sid))
            yield piece, doc["entries"]
            previous_page = piece[1]

    def _bases(self, doc: dict[str, Any], until: str | None) -> list[str]:
        """The snapshots between page `until` and a page written before indexes: its bases, walked."""
        found: list[str] = []
        while (base := doc.get("base")) is not None and base != until:
            found.append(base)
            if (older := self._segments.document(base)) is None:
                raise OutputLineageError(f"history snapshot {base} is gone: read it again")
            doc = older
        return found[::-1]

    def _items(self) -> Iterator[dict[str, Any]]:
        """The history's batch items without records, oldest first (a batch's first item only, where
        entries from before lineage overlap); the chain checked where the walk did not read it."""
        seen: set[int] | None = set() if self.overlap else None
        up_to: int | None = None
        for piece, entries in self._expanded():
            if not entries:
                raise OutputLineageError(f"the history changed while it was read ({piece[0]} {piece[1]} "
                                         "is gone): read it again")
            for entry in entries:
                if "previous" in entry and up_to is not None and int(entry["afterBatch"]) != up_to:
                    raise OutputLineageError(f"commit entry {entry['checkpoint']} starts after batch "
                                             f"{entry['afterBatch']} but its predecessor ends at batch {up_to}")
                up_to = int(entry["upToBatch"]) if "upToBatch" in entry else up_to
                for item in entry.get("files", []):
                    if seen is not None:
                        if item["batch"] in seen:
                            continue
                        seen.add(item["batch"])
                    yield item

    def items(self) -> Iterator[dict[str, Any]]:
        """The history's batch items, oldest first, with the compaction records applied."""
        return apply_in_windows(self._items(), load_records(self.store, self.job, self.path))


def apply_in_windows(items: Iterable[dict[str, Any]], records: list[dict[str, Any]],
                     window: int = WINDOW) -> Iterator[dict[str, Any]]:
    """apply_records(list(items), records), a window of items at a time (see the module's text)."""
    if not records:
        yield from items
        return
    spans = [(int(r["batch"]), int(r["lastBatch"]), r) for r in records]  # in id order, as applied
    buffer: list[dict[str, Any]] = []
    threshold = window

    def applied(final: bool) -> Iterator[dict[str, Any]]:
        nonlocal buffer
        lo, hi = int(buffer[0]["batch"]), last_batch(buffer[-1])
        out = apply_records(buffer, [r for first, last, r in spans if first <= hi and last >= lo])
        cut = math.inf if final else min((first for first, last, _ in spans if first <= hi < last), default=math.inf)
        keep = next((i for i, item in enumerate(out) if int(item["batch"]) >= cut), len(out))
        buffer = out[keep:]
        yield from out[:keep]

    for item in items:
        buffer.append(item)
        if len(buffer) >= threshold:
            yield from applied(final=False)
            threshold = len(buffer) + window  # what a record still open held back, and a window more
    if buffer:
        yield from applied(final=True)
