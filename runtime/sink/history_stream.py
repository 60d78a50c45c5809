"""A sink path's history read oldest first in bounded memory: what `sparkpoint output read` and
`iter_committed` stream (docs/design.md §6).

`committed_history` holds every commit entry of the history, one per checkpoint since the job began,
so reading even the first rows of a year-old job held a year of entries (a month of 10 s checkpoints:
about 450 MiB). Here the chain is walked back once keeping only its pieces (lineage.walk_back: an id
per history snapshot of 1,000 entries, an id per entry after the newest snapshot) and per piece its
batch count, rows and span; then the pieces are read again oldest first, one at a time. The oldest
piece, the walk's last read, is kept, so the first rows cost no GET more than the walk. Memory: one
piece, the list of pieces, and the compaction records (as before).

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
        self._segments = SegmentReader(store, job, path, track=False)
        head = head_entry(ids, self._load)
        self.summary = Summary(head_checkpoint(head))
        self.pieces: list[Piece] = []  # newest first, as walked
        self._oldest: tuple[Piece, list[dict[str, Any]]] | None = None
        low = math.inf  # the oldest batch of the pieces walked so far
        overlap = False
        for piece, entries in walk_back(head, ids, self._load, self._segments):
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

    def _count(self, item: dict[str, Any]) -> None:
        s = self.summary
        s.batches, s.rows = s.batches + 1, s.rows + int(item.get("rows") or 0)
        s.first = int(item["batch"]) if s.first is None else s.first
        s.last = int(item["batch"])

    def _read(self, piece: Piece) -> list[dict[str, Any]] | None:
        if self._oldest is not None and self._oldest[0] == piece:
            return self._oldest[1]
        kind, cid = piece
        if kind == "snapshot":
            return self._segments(cid)
        if kind == "held":
            return self._segments.holding(cid)
        if (doc := self._load(cid)) is not None:
            return [doc]
        held = self._segments.holding(cid)  # GC deleted it since the walk: a snapshot holds it
        return held[-1:] if held else None

    def _items(self) -> Iterator[dict[str, Any]]:
        """The history's batch items without records, oldest first (a batch's first item only, where
        entries from before lineage overlap)."""
        seen: set[int] | None = set() if self.overlap else None
        for piece in reversed(self.pieces):
            entries = self._read(piece)
            if not entries:
                raise OutputLineageError(f"the history changed while it was read ({piece[0]} {piece[1]} "
                                         "is gone): read it again")
            for entry in entries:
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
