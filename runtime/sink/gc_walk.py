"""The walks a cursor's pass makes (gc_cursor.py, docs/design.md §7): each kept point's chain back to
the cursor's entry M, lazily and through history snapshots, and the newest entry every point shares."""


from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import Any

from sparkpoint.runtime.store import JobRef, ObjectStore

from .gc_cursor import Cursor, Diverged, number
from .history import SegmentReader
from .keys import file_keys
from .lineage import OutputLineageError


def walk_back(cid: str | None, load: Callable[[str], dict[str, Any] | None], segments: SegmentReader,
              stop: Callable[[str], bool] | None = None) -> Iterator[dict[str, Any]]:
    """The checkpoint entries of the history that ends at entry `cid`, newest first, a snapshotted
    segment in one read (lineage.follow_chain's walk, lazily: callers stop where they need; `stop`
    ends the walk before an entry is read)."""
    seen: set[str] = set()
    while cid is not None and not (stop and stop(cid)):
        if cid in seen:
            raise OutputLineageError(f"commit entries form a cycle at {cid}")
        segment = segments(cid)
        if not segment:
            doc = load(cid)
            segment = [doc] if doc is not None else segments.holding(cid)
        if not segment:
            raise OutputLineageError(f"commit entry {cid} named as a predecessor is missing")
        for doc in reversed(segment):
            seen.add(doc["checkpoint"])
            yield doc
        if "previous" not in segment[0]:
            raise Diverged("an entry from before lineage")
        cid = segment[0]["previous"]


@dataclass
class Window:
    """What one incremental pass knows: the entries it walked (all needed) and the files they name."""

    ids: set[str] = field(default_factory=set)
    keys: set[str] = field(default_factory=set)
    floor: int | None = None  # the lowest afterBatch of a walked entry: below it nothing is known
    published: dict[int, int] = field(default_factory=dict)  # attempt -> highest upToBatch seen
    batches: dict[str, int] = field(default_factory=dict)  # entry id -> upToBatch
    met: list[str] = field(default_factory=list)  # snapshot ids the walks went through, in walk order

    def take(self, doc: dict[str, Any]) -> None:
        self.ids.add(doc["checkpoint"])
        self.batches[doc["checkpoint"]] = int(doc["upToBatch"])
        self.keys.update(k for item in doc.get("files", []) for k in file_keys(item))
        after = int(doc["afterBatch"])
        self.floor = after if self.floor is None else min(self.floor, after)
        see(self.published, doc)


def see(published: dict[int, int], doc: dict[str, Any]) -> None:
    """Record that attempt `doc["attempt"]` published up to its upToBatch (-1: an entry naming none)."""
    attempt = -1 if doc.get("attempt") is None else int(doc["attempt"])
    published[attempt] = max(published.get(attempt, -1), int(doc["upToBatch"]))


class MeetingSegments(SegmentReader):
    """A SegmentReader that remembers which snapshots a walk went through."""

    def __init__(self, store: ObjectStore, job: JobRef, path: str, ids: set[str], met: list[str]):
        super().__init__(store, job, path, ids)
        self.met = met

    def __call__(self, checkpoint_id: str) -> list[dict[str, Any]] | None:
        found = super().__call__(checkpoint_id)
        if found:
            self.met.append(checkpoint_id)
        return found


def walk_window(store: ObjectStore, job: JobRef, path: str, cursor: Cursor, commit_ids: list[str],
                snapshot_ids: set[str], starts: list[str | None],
                load: Callable[[str], dict[str, Any] | None]) -> tuple[Window, MeetingSegments, str, int]:
    """Walk every start back to the cursor's M, then M's chain back past the oldest entry in
    `_commits/` and the settled snapshot. Returns the window, the segments read, M' (the newest
    entry on every start's chain) and the number of the first snapshot each walk meets (the floor
    below which snapshot-held entries are no longer read from `_commits/`). Diverged if a start's
    chain misses M."""
    window = Window()
    segments = MeetingSegments(store, job, path, snapshot_ids, window.met)
    walks: list[list[str]] = []
    firsts: list[int] = []
    below_first = 0
    for start in starts:
        if start is None:
            raise Diverged("a point with an empty history")
        ids: list[str] = []
        met_before = len(window.met)
        for doc in walk_back(start, load, segments):
            if int(doc["upToBatch"]) < cursor.batch:
                raise Diverged(f"the history of {start} does not hold {cursor.entry}")
            window.take(doc)
            ids.append(doc["checkpoint"])
            if doc["checkpoint"] == cursor.entry:
                break
        else:
            raise Diverged(f"the history of {start} does not hold {cursor.entry}")
        walks.append(ids)
        firsts.append(number(window.met[met_before]) if len(window.met) > met_before else 0)
    others = [set(w) for w in walks[1:]]
    newest = next(i for i in walks[0] if all(i in o for o in others))
    # M's chain below M: every entry of it still in `_commits/` and every snapshot above S
    oldest = min((n for n in (number(i) for i in commit_ids) if n >= 0), default=0)
    met_before = len(window.met)
    m = load(cursor.entry)
    if m is None and (held := segments.holding(cursor.entry)):
        m = held[-1]
    if m is None:
        raise Diverged(f"the cursor's entry {cursor.entry} is gone")
    done = lambda cid: number(cid) < oldest and number(cid) <= cursor.snapshot  # noqa: E731
    for doc in walk_back(m.get("previous"), load, segments, done) if "previous" in m else ():
        window.take(doc)
    if len(window.met) > met_before:
        below_first = number(window.met[met_before])
    first = min((f or below_first) for f in firsts) if firsts else below_first
    return window, segments, newest, first


def start_of(entry_id: str, sink: dict[str, Any], published: set[str]) -> str | None:
    """Where a kept point's history is walked from: its own entry once published, else its predecessor."""
    return entry_id if entry_id in published else sink.get("previous")


def common_entry(starts: list[str | None], load: Callable[[str], dict[str, Any] | None],
                 segments: SegmentReader) -> dict[str, Any] | None:
    """The newest entry on the chain of every start, walking them together newest first (so only as
    far back as they take to meet), or None if one is empty or reaches its start alone."""
    if not starts or any(s is None for s in starts):
        return None
    walks = [walk_back(s, load, segments) for s in starts]
    current = [next(w, None) for w in walks]
    seen: list[set[str]] = [set() for _ in walks]
    while all(c is not None for c in current):
        for i, c in enumerate(current):
            assert c is not None
            seen[i].add(c["checkpoint"])
        for c in current:
            assert c is not None
            if all(c["checkpoint"] in s for s in seen):
                return c
        # advance the walk that is furthest ahead
        i = max(range(len(current)), key=lambda j: (int(current[j]["upToBatch"]), number(current[j]["checkpoint"])))  # type: ignore[index]
        current[i] = next(walks[i], None)
    return None
