"""Which commit entries a reader of the transactional sink follows: exactly one history (docs/design.md §6).

Entries live in `outputs/<path>/_commits/`:

  <checkpoint-id>.json      {"checkpoint", "attempt", "previous", "afterBatch", "upToBatch", "files",
                             "incarnation"}
  continue-a<attempt>.json  {"kind": "continuation", "attempt", "previous", "upToBatch", "incarnation"}

`incarnation` (the StreamingJob's uid; absent in entries written before it existed) tells the
entries of jobs re-created under the same name apart; readers need not look at it.

Every checkpoint entry names its predecessor: the last entry published by the history it continues
(`afterBatch` of an entry is `upToBatch` of its predecessor). A runtime that starts from a point that
is not the head a reader would pick (a restore to an older checkpoint or a savepoint, a fallback)
first writes a continuation entry naming the entry it continues from, so from then on readers see
the history the running job continues, without the rows of the superseded entries.

The head: the newest checkpoint entry by number (ids sort numerically, `chk-1000000` after
`chk-999999`), unless a continuation of a later attempt exists (attempts only grow; a continuation
is written before the attempt publishes anything). From the head, readers follow `previous` back.
Entries written before lineage existed have no `previous`: their predecessor is the next older
checkpoint entry (the history was linear then).
"""

from __future__ import annotations

import bisect
import re
from collections.abc import Callable, Iterator
from typing import Any

from sparkpoint.runtime.store.layout import CHECKPOINT_ID

CONTINUATION_ID = re.compile(r"^continue-a(\d+)$")


class OutputLineageError(Exception):
    """The committed output's chain of entries is broken: never read around it silently."""


def continuation_id(attempt: int) -> str:
    return f"continue-a{attempt:06d}"


def split_ids(entry_ids: list[str]) -> tuple[list[tuple[int, str]], list[tuple[int, str]]]:
    """(checkpoint entries, continuations), each as (number, id) sorted numerically; others ignored."""
    checkpoints, continuations = [], []
    for i in entry_ids:
        if m := CHECKPOINT_ID.match(i):
            checkpoints.append((int(m.group(1)), i))
        elif m := CONTINUATION_ID.match(i):
            continuations.append((int(m.group(1)), i))
    return sorted(checkpoints), sorted(continuations)


def head_entry(entry_ids: list[str], load: Callable[[str], dict[str, Any] | None]) -> dict[str, Any] | None:
    """The entry a reader starts from (a checkpoint entry or a continuation), or None if there is none."""
    checkpoints, continuations = split_ids(entry_ids)
    return head_of(checkpoints[-1][1] if checkpoints else None, continuations[-1][1] if continuations else None, load)


def head_of(checkpoint: str | None, continuation: str | None,
            load: Callable[[str], dict[str, Any] | None]) -> dict[str, Any] | None:
    """head_entry, given the newest checkpoint entry's id and the newest continuation's (by attempt)."""
    newest = load(checkpoint) if checkpoint is not None else None
    if (continuation is not None and (m := CONTINUATION_ID.match(continuation))
            and (newest is None or int(m.group(1)) > int(newest.get("attempt") or 0))):
        return load(continuation)
    return newest


# A piece of a history as walk_back meets it, re-readable by its id: ("entry", id) one entry of
# `_commits/`, ("snapshot", id) the whole snapshot of entry id, ("held", id) the entries up to id of
# the snapshot that holds it (an entry GC deleted because a snapshot holds it: SegmentReader.holding).
Piece = tuple[str, str]


def walk_back(head: dict[str, Any] | None, entry_ids: list[str],
              load: Callable[[str], dict[str, Any] | None],
              segments: Callable[[str], list[dict[str, Any]] | None] | None = None,
              before: Callable[[int], str | None] | None = None,
              ) -> Iterator[tuple[Piece, list[dict[str, Any]]]]:
    """The checkpoint entries of the history that ends at `head`, newest piece first, each piece's
    entries oldest first: a caller that keeps only the pieces holds the history in O(pieces), not
    O(entries). `segments` (history.py) gives the entries of a snapshotted history up to an id in one
    read, oldest first, ending at that id. `before(n)`: the checkpoint entry numbered next below n
    (an entry from before lineage names no predecessor), by default from `entry_ids`. Raises
    OutputLineageError where the chain breaks."""
    if before is None:
        checkpoints = split_ids(entry_ids)[0]
        numbers = [n for n, _ in checkpoints]
        by_number = dict(checkpoints)

        def before(number: int) -> str | None:
            i = bisect.bisect_left(numbers, number)
            return by_number[numbers[i - 1]] if i > 0 else None
    # The walk is a function of each `prev` it looks up, so a cycle repeats one: `seen` holds those
    # only (one per piece), not every entry a snapshot gave, so memory stays O(pieces).
    seen: set[str] = set()
    newer: dict[str, Any] | None = None  # the oldest entry yielded so far: its predecessor comes next

    def checked(piece: Piece, entries: list[dict[str, Any]]) -> tuple[Piece, list[dict[str, Any]]]:
        nonlocal newer
        for before, after in zip(entries, [*entries[1:], newer], strict=False):
            if after is not None and "previous" in after and int(after["afterBatch"]) != int(before["upToBatch"]):
                raise OutputLineageError(
                    f"commit entry {after['checkpoint']} starts after batch {after['afterBatch']} but its "
                    f"predecessor {before['checkpoint']} ends at batch {before['upToBatch']}")
        newer = entries[0]
        return piece, entries

    doc = head
    if (doc is not None and doc.get("kind") != "continuation" and segments is not None
            and (segment := segments(doc["checkpoint"]))):  # the head itself snapshotted: start from it
        yield checked(("snapshot", doc["checkpoint"]), segment)
        doc, skip_first = segment[0], True
    else:
        skip_first = False
    while doc is not None:
        if doc.get("kind") != "continuation" and not skip_first:
            yield checked(("entry", doc["checkpoint"]), [doc])
        skip_first = False
        if "previous" in doc:
            prev = doc["previous"]
        else:  # an entry from before lineage: the next older checkpoint entry
            if (m := CHECKPOINT_ID.match(doc["checkpoint"])) is None:
                raise ValueError(f"sink entry with a bad checkpoint id: {doc['checkpoint']!r}")
            prev = before(int(m.group(1)))
        if prev is None:
            break
        if prev in seen:
            raise OutputLineageError(f"commit entries form a cycle at {prev}")
        seen.add(prev)
        if segments is not None and (segment := segments(prev)):
            yield checked(("snapshot", prev), segment)
            doc, skip_first = segment[0], True
            continue
        doc = load(prev)
        held = getattr(segments, "holding", None) if doc is None else None
        if held is not None and (segment := held(prev)):  # deleted because a snapshot holds it
            yield checked(("held", prev), segment)
            doc, skip_first = segment[0], True
            continue
        if doc is None:
            raise OutputLineageError(f"commit entry {prev} named as a predecessor is missing")


def follow_chain(head: dict[str, Any] | None, entry_ids: list[str],
                 load: Callable[[str], dict[str, Any] | None],
                 segments: Callable[[str], list[dict[str, Any]] | None] | None = None,
                 before: Callable[[int], str | None] | None = None) -> list[dict[str, Any]]:
    """The checkpoint entries of the history that ends at `head`, oldest first (walk_back, all held)."""
    chain: list[dict[str, Any]] = []
    for _, entries in walk_back(head, entry_ids, load, segments, before):
        chain.extend(reversed(entries))
    chain.reverse()
    return chain


def head_checkpoint(head: dict[str, Any] | None) -> str | None:
    """The checkpoint entry a head stands for (a continuation stands for its predecessor)."""
    if head is None:
        return None
    return head.get("previous") if head.get("kind") == "continuation" else head["checkpoint"]
