"""Which upsert batches a view reads: attempts form a tree, not a line (docs/design.md §6; issue 39).

Each attempt's `_restores/a<A>.json` says after which batch R it continues and, since issue 39, whose
history: `parent`, the attempt that took the restored point (a checkpoint's or savepoint's manifest
`attempt`; local recovery: the previous attempt; none for a fresh start). The history of attempt A
up to batch L is A's own batches <= L, over the history of its parent up to min(L, R). A record
without `parent` (written before) continues the previous attempt present (files or record), which
is the line the old rule assumed; a legacy attempt without a record overlays its predecessor's
batches (it superseded nothing).

A view is (attempt, limit): the current table is the newest attempt's history, unbounded; a
retained checkpoint or savepoint taken by attempt X at batch B is X's history up to B, which is
what a restore of it continues. Two views read the same files up to batch S exactly when their
`segments` clipped to S are equal (`clip`): snapshots record that, and may only fold what every
restorable view agrees on (`agreement`).
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass

PREVIOUS = -1  # a record without `parent`: it continues the previous attempt present
UNBOUNDED = 1 << 62  # a view without a limit (the current table; a point whose batch is unknown)
NO_RECORD = -2  # in a clipped segment: an attempt without a restore record (it overlays)

Restore = tuple[int, ...]  # (attempt, afterBatch) or (attempt, afterBatch, parent); parent None: none
Segment = tuple[int, int | None, int]  # (attempt, afterBatch or None without a record, limit)


@dataclass(frozen=True)
class Tree:
    after: dict[int, int | None]  # attempt -> afterBatch of its record (None: no record)
    parent: dict[int, int | None]  # attempt -> whose history it continues (None: nobody's)

    @property
    def newest(self) -> int | None:
        return max(self.after, default=None)


def tree_of(file_attempts: Iterable[int], restores: Iterable[Restore]) -> Tree:
    """Pure: the attempts present (with files or a record) and whose history each continues."""
    records = {int(r[0]): r for r in restores}
    after: dict[int, int | None] = {}
    parent: dict[int, int | None] = {}
    previous = None
    for attempt in sorted(set(file_attempts) | set(records)):
        record = records.get(attempt)
        after[attempt] = None if record is None else int(record[1])
        named = PREVIOUS if record is None or len(record) < 3 else record[2]
        # a parent is always an older attempt (it took the restored point); anything else is ignored
        parent[attempt] = previous if named == PREVIOUS or (named is not None and named >= attempt) else named
        previous = attempt
    return Tree(after, parent)


def segments(tree: Tree, attempt: int | None, limit: int = UNBOUNDED) -> list[Segment]:
    """Pure: the view (attempt, limit) as its chain of attempts, newest first: each reads its own
    batches up to its limit, below what the attempts before it took."""
    out: list[Segment] = []
    seen: set[int] = set()
    while attempt is not None and limit >= 0 and attempt not in seen:
        seen.add(attempt)
        after = tree.after.get(attempt)
        out.append((attempt, after, limit))
        if after is not None:
            limit = min(limit, after)
        attempt = tree.parent.get(attempt)
    return out


def view_entries(files: Iterable[tuple[int, int, str]], chain: Sequence[Segment]) -> list[tuple[int, str]]:
    """Pure: (batch, attempt, key) files -> the (batch, key) a view folds, in batch order: per batch
    the file of the first attempt of the chain that has one within its limit."""
    by_attempt: dict[int, dict[int, str]] = {}
    for batch, attempt, key in files:
        by_attempt.setdefault(attempt, {}).setdefault(batch, key)  # a legacy and a new file: the first listed
    best: dict[int, str] = {}
    for attempt, _, limit in chain:
        for batch, key in by_attempt.get(attempt, {}).items():
            if batch <= limit and batch not in best:
                best[batch] = key
    return sorted(best.items())


def clip(chain: Sequence[Segment], up_to: int) -> tuple[tuple[int, int, int], ...]:
    """Pure: what decides the view's batches <= up_to; equal clips read the same files there."""
    out = []
    for attempt, after, limit in chain:
        top = min(limit, up_to)
        if top < 0:
            break
        if after is None or after < top:  # an attempt restored at or past `top` has no batch below it
            out.append((attempt, NO_RECORD if after is None else after, top))
    return tuple(out)


def agreement(a: Sequence[Segment], b: Sequence[Segment]) -> int:
    """Pure: the highest batch up to which two views read the same (-1: none; UNBOUNDED: all)."""
    candidates = {UNBOUNDED, -1, *(s[2] for s in (*a, *b)), *(s[1] for s in (*a, *b) if s[1] is not None)}
    for up_to in sorted((c for c in candidates if c >= -1), reverse=True):
        if up_to < 0 or clip(a, up_to) == clip(b, up_to):
            return up_to
    return -1


def reached(tree: Tree, views: Iterable[tuple[int | None, int]]) -> set[int]:
    """Pure: the attempts whose restore record some view's chain reads (GC keeps those records)."""
    return {attempt for view in views for attempt, _, _ in segments(tree, *view)}
