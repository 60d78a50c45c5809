"""Folded snapshots of an upsert sink's output, so its batches can be collected (docs/design.md §7).

Under `outputs/<path>/upserts/_snapshots/`:

  snap-<S>-a<A>-<id>/part-<i>.json   the fold of the visible batches <= S (last row per key), as JSON
                                     lines of the rows readers decode, in the order a full fold first
                                     meets their keys (so `read_upserted` gives the same dict, in order)
  snap-<S>-a<A>-<id>.json            its marker, put after every part: {"upToBatch": S, "restores":
                                     [[attempt, afterBatch], ...] (only those with afterBatch < S),
                                     "parts", "rows", "batches", "base", "attempt", "incarnation",
                                     "utcColumns": top-level Parquet timestamp columns, stored in UTC
                                     and shown by readers in their local time, as the batches' are}

Why a snapshot never changes the view. The fold of the batches <= S depends only on their files and
on the restores with afterBatch < S (a restore to R supersedes only batches > R). A snapshot is used
only while the restores with afterBatch < S are exactly those it recorded (`usable`); S is chosen
(`safe_batch`) at or below the batch of every restorable point (every checkpoint manifest, every
savepoint) and of what the newest attempt has already committed (its restore's afterBatch, or its
newest checkpoint), so every later restore (a checkpoint, a savepoint, local recovery) has
afterBatch >= S, and every later batch is > S. Only a fresh start (afterBatch -1) goes below S: it
supersedes every older attempt's batch, so a reader that then ignores the snapshot and folds the
files left sees what it would have seen without it. A snapshot is written by the runtime (the GC
credential may not write), on the schedule of `job.sink.compaction`; the GC sidecar deletes the
batches it holds (output_gc.py).
"""

from __future__ import annotations

import json
import re
import sqlite3
import tempfile
import uuid
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from sparkpoint.runtime.checkpoint.catalog import list_checkpoint_ids, load_manifest
from sparkpoint.runtime.checkpoint.savepoint import list_savepoints
from sparkpoint.runtime.store import JobRef, ObjectInfo, ObjectStore
from sparkpoint.runtime.store.base import ObjectNotFoundError

from .keys import sink_root
from .upsert_files import needed_keys, upsert_files, upsert_tree
from .upsert_history import UNBOUNDED, Restore, Tree, agreement, clip, reached, segments

_SNAP = re.compile(r"/upserts/_snapshots/snap-(\d+)-a(\d+)-([0-9a-f]+)(\.json$|/)")


@dataclass(frozen=True)
class Snapshot:
    key: str  # its marker
    up_to: int
    restores: tuple[tuple[int, int], ...]
    parts: tuple[str, ...]
    rows: int
    last_modified: float
    utc_columns: tuple[str, ...] = ()  # top-level timestamp columns, stored in UTC (readers show local time)
    attempt: int | None = None  # its writer: it holds that attempt's history up to up_to


def snapshots_prefix(job: JobRef, path: str) -> str:
    return f"{sink_root(job, path)}/upserts/_snapshots/"


def snapshot_of(key: str) -> tuple[str, bool] | None:
    """(the marker key of the snapshot `key` belongs to, whether `key` is that marker), None for others."""
    if (m := _SNAP.search(key)) is None:
        return None
    marker = key[:m.start()] + f"/upserts/_snapshots/snap-{m[1]}-a{m[2]}-{m[3]}.json"
    return marker, m[4] == ".json"


def snapshot_attempt(key: str) -> int | None:
    m = _SNAP.search(key)
    return int(m[2]) if m else None


_RESTORE_KEY = re.compile(r"/_restores/a(\d+)\.json$")


def low_restores(restores: Iterable[Restore], up_to: int) -> tuple[tuple[int, int], ...]:
    """Pure: the restores (attempt, afterBatch) the fold of batches <= up_to depends on."""
    return tuple(sorted((int(r[0]), int(r[1])) for r in restores if r[1] < up_to))


def usable(snapshot: Snapshot, restores: Iterable[Restore], tree: Tree | None = None,
           view: tuple[int | None, int] | None = None) -> bool:
    """The snapshot stands for `view`'s batches <= S (attempt, limit; None: the tree's newest attempt,
    unbounded): with the tree, when the view's chain of attempts up to S is its writer's
    (upsert_history.clip: a restore elsewhere in the tree changes nothing for this view); without it
    (or for a snapshot that names no writer), when the restores below S are those it recorded."""
    if tree is None or snapshot.attempt is None:
        return low_restores(restores, snapshot.up_to) == snapshot.restores
    attempt, limit = (tree.newest, UNBOUNDED) if view is None else view
    return clip(segments(tree, attempt, limit), snapshot.up_to) == clip(segments(tree, snapshot.attempt),
                                                                        snapshot.up_to)


def safe_batch(points: Iterable[tuple[int, int | None]], newest_attempt: int,
               restores: Iterable[Restore], tree: Tree | None = None) -> int | None:
    """Pure: the highest batch a snapshot may fold up to, None if none is safe. `points`: (attempt,
    batch) of every checkpoint manifest and savepoint; `newest_attempt`: the fence. The newest attempt
    must have recorded its restore (until then its start point is unknown), and S may not pass what it
    has committed: the restore's afterBatch, or a batch one of its checkpoints holds. With the tree,
    S is also at most where each point's history and the newest attempt's still agree (a point on a
    branch the newest attempt left: upsert_history.py)."""
    points = list(points)
    own = {int(r[0]): int(r[1]) for r in restores}.get(newest_attempt)
    if own is None or any(b is None or a > newest_attempt for a, b in points):
        return None
    committed = max([own, *(int(b) for a, b in points if a == newest_attempt and b is not None)])
    bound = min([committed, *(int(b) for _, b in points if b is not None)])
    if tree is not None:  # a point whose attempt left nothing here (a deleted job's savepoint) reads nothing
        head = segments(tree, newest_attempt)
        bound = min([bound, *(agreement(head, segments(tree, a, int(b))) for a, b in points
                              if b is not None and a in tree.after)])
    return bound if bound >= 0 else None


def restorable(store: ObjectStore, job: JobRef) -> tuple[list[Any], list[Any]]:
    """Every checkpoint manifest in the store and every savepoint: what a restore can go back to."""
    manifests = []
    for cid in list_checkpoint_ids(store, job):
        try:
            manifests.append(load_manifest(store, job, cid))
        except ObjectNotFoundError:
            continue  # deleted meanwhile (the checkpoint pass): no longer restorable
    return manifests, list_savepoints(store, job)


def restorable_points(store: ObjectStore, job: JobRef) -> list[tuple[int, int | None]]:
    """(attempt, batch) of every checkpoint manifest in the store and every savepoint."""
    manifests, savepoints = restorable(store, job)
    return [(p.attempt, p.batch_id) for p in [*manifests, *savepoints]]


_LOADED: dict[tuple[str, str], Snapshot | None] = {}  # markers never change: read each once


def load_snapshots(store: ObjectStore, listed: Iterable[ObjectInfo]) -> list[Snapshot]:
    """Every complete snapshot among the listed upserts/ keys, newest (highest S) first."""
    out = []
    for info in listed:
        if (s := snapshot_of(info.key)) is None or not s[1]:
            continue
        cache = (store.url, info.key)
        if cache not in _LOADED:
            try:
                doc = json.loads(store.get_bytes(info.key))
            except ObjectNotFoundError:
                continue  # collected meanwhile
            if len(_LOADED) > 10_000:
                _LOADED.clear()
            _LOADED[cache] = Snapshot(info.key, int(doc["upToBatch"]), tuple((int(a), int(r)) for a, r in
                                      doc["restores"]), tuple(doc["parts"]), int(doc["rows"]), info.last_modified,
                                      tuple(doc.get("utcColumns", ())),
                                      None if doc.get("attempt") is None else int(doc["attempt"]))
        if (snap := _LOADED[cache]) is not None:
            out.append(replace(snap, last_modified=info.last_modified))
    return sorted(out, key=lambda s: (s.up_to, s.key), reverse=True)


def current_snapshot(store: ObjectStore, listed: Iterable[ObjectInfo], restores: list[Restore],
                     tree: Tree | None = None, view: tuple[int | None, int] | None = None) -> Snapshot | None:
    """The snapshot `view` (None: the current table) starts from: the newest usable one."""
    return next((s for s in load_snapshots(store, listed) if usable(s, restores, tree, view)), None)


def snapshot_rows(store: ObjectStore, snapshot: Snapshot, *, as_stored: bool = False) -> Iterator[dict[str, Any]]:
    """The snapshot's rows as a reader decodes the batches' (timestamps in local time), or `as_stored`
    (in UTC, for the next snapshot): a snapshot's content does not depend on the writer's zone."""
    from .reader import utc_to_local

    for key in snapshot.parts:  # one part in memory at a time
        for line in store.get_bytes(key).decode().splitlines():
            if line:
                row = json.loads(line)
                if not as_stored:
                    for column in snapshot.utc_columns:
                        if isinstance(row.get(column), str):
                            row[column] = utc_to_local(row[column])
                yield row


class Fold:
    """Last row per key, in first-seen key order, in an SQLite file on local disk: memory stays at
    SQLite's page cache and the row being added, however many keys the table holds."""

    def __init__(self, directory: Path):
        directory.mkdir(parents=True, exist_ok=True)
        self._dir = tempfile.TemporaryDirectory(prefix="upsert-fold-", dir=directory)
        self.db = sqlite3.connect(Path(self._dir.name) / "fold.db")
        self.db.execute("PRAGMA journal_mode=OFF")
        self.db.execute("PRAGMA synchronous=OFF")
        self.db.execute("CREATE TABLE t (k TEXT PRIMARY KEY, row TEXT NOT NULL)")

    def add(self, key: str, row_json: str) -> None:
        # an update keeps the row's rowid: the key's first-seen position, as a dict's insertion order
        self.db.execute("INSERT INTO t (k, row) VALUES (?, ?) ON CONFLICT (k) DO UPDATE SET row = excluded.row",
                        (key, row_json))

    def rows(self) -> Iterator[str]:
        for (row,) in self.db.execute("SELECT row FROM t ORDER BY rowid"):
            yield row

    def close(self) -> None:
        self.db.close()
        self._dir.cleanup()


def write_snapshot(store: ObjectStore, job: JobRef, path: str, *, rows: Iterable[tuple[str, str]], up_to: int,
                   restores: tuple[tuple[int, int], ...], batches: int, base: str | None, attempt: int,
                   incarnation: str | None, work_dir: Path, part_bytes: int,
                   utc_columns: set[str] | None = None) -> dict[str, Any]:
    """Fold `rows` ((key, row as JSON) in fold order) and store the snapshot: parts first, marker last."""
    name = f"{snapshots_prefix(job, path)}snap-{up_to:09d}-a{attempt:06d}-{uuid.uuid4().hex[:12]}"
    fold = Fold(work_dir)
    try:
        for key, row in rows:
            fold.add(key, row)
        fold.db.commit()
        parts: list[str] = []
        count = 0
        buf: list[str] = []
        size = 0

        def flush() -> None:
            key = f"{name}/part-{len(parts):05d}.json"
            store.put_bytes(key, "".join(buf).encode())
            parts.append(key)
            buf.clear()

        for row in fold.rows():  # one part (at most part_bytes) in memory at a time
            buf.append(row + "\n")
            size += len(row) + 1
            count += 1
            if size >= part_bytes:
                flush()
                size = 0
        if buf:
            flush()
    finally:
        fold.close()
    doc = {"upToBatch": up_to, "restores": [list(r) for r in restores], "parts": parts, "rows": count,
           "batches": batches, "base": base, "attempt": attempt, "incarnation": incarnation,
           "utcColumns": sorted(utc_columns or ())}  # filled while `rows` was consumed
    store.put_bytes(f"{name}.json", json.dumps(doc).encode())
    return doc


_BATCH = re.compile(r"/upserts/batch-(\d+)[-.]")


@dataclass
class UpsertNeeds:
    """What output GC keeps of an upsert sink's files, and what it may take although the newest
    attempt wrote it (`released`: folded into a snapshot, or a superseded snapshot)."""

    needed: set[str]
    released: set[str]
    folded_up_to: int  # batches at or below it are in the snapshot readers use (-1: none collected)
    unreached: set[str] = field(default_factory=set)  # `_restores/` records no view's chain reads


def upsert_needs(store: ObjectStore, listed: list[ObjectInfo], *, points: list[tuple[int, int | None]],
                 newest_attempt: int, now: float, grace_seconds: float) -> UpsertNeeds:
    """The snapshot readers use (the newest usable) and its parts are needed, and every visible batch
    after it. Its batches go once it is older than the grace (readers that started before it read
    them) and while S is still within what every restorable point holds; other snapshots go then too."""
    files, restores = upsert_files(store, listed)
    tree = upsert_tree(files, restores)
    snapshots = load_snapshots(store, listed)
    current = next((s for s in snapshots if usable(s, restores, tree)), None)
    bound = safe_batch(points, newest_attempt, restores, tree)
    settled = current is not None and current.last_modified < now - grace_seconds
    folded = current.up_to if settled and bound is not None and current.up_to <= bound else -1  # type: ignore[union-attr]
    needed = needed_keys(store, listed, after=folded)
    # Every restorable point keeps its own history (attempts branch: upsert_history.py): the snapshot
    # it starts from (the newest usable for it, kept whatever the table's is) and its batches after it.
    kept = {current.key} if current is not None else set()
    for attempt, batch in points:
        view = (attempt, UNBOUNDED if batch is None else int(batch))
        own = next((s for s in snapshots if usable(s, restores, tree, view)), None)
        if own is not None:
            kept.add(own.key)
        after = own.up_to if own is not None and own.last_modified < now - grace_seconds and bound is not None else -1
        needed |= needed_keys(store, listed, after=after, view=(attempt, batch))
    released: set[str] = set()
    for snap in snapshots:
        own_keys = {snap.key, *snap.parts}
        if snap.key in kept or not settled:
            needed |= own_keys
            continue
        released |= own_keys
    if folded >= 0:
        released |= {o.key for o in listed if (m := _BATCH.search(o.key)) and int(m[1]) <= folded}
    if settled:  # parts without a marker, of the attempt that wrote the snapshot in use, older than it:
        # a run that failed (an attempt runs one at a time, so one begun before the current one ended);
        # other attempts' are collected by the pass's rules (age, and not the newest attempt's)
        complete = {s.key for s in snapshots}
        writer = snapshot_attempt(current.key)  # type: ignore[union-attr]
        released |= {o.key for o in listed if (s := snapshot_of(o.key)) and s[0] not in complete
                     and snapshot_attempt(o.key) == writer and o.last_modified < current.last_modified}  # type: ignore[union-attr]
    return UpsertNeeds(needed, released - needed, folded, unreached_restores(listed, tree, snapshots, points,
                                                                            newest_attempt))


def unreached_restores(listed: list[ObjectInfo], tree: Tree,
                       snapshots: list[Snapshot], points: list[tuple[int, int | None]],
                       newest_attempt: int) -> set[str]:
    """The restore records of attempts older than the newest that no view's chain passes (the
    table's, every point's, and every snapshot writer's, whose chain `usable` compares). Without
    such a record a view reads what it read: its chain names only reached attempts, and an attempt
    whose record (or, with its files, its presence) goes cannot be the `previous attempt present`
    of a reached record without `parent`, since that attempt would then be its parent and reached.
    None while a snapshot names no writer: such a snapshot is usable only while the restores below
    it are those it recorded."""
    if any(s.attempt is None for s in snapshots):
        return set()
    views = [(tree.newest, UNBOUNDED), *((a, UNBOUNDED if b is None else int(b)) for a, b in points),
             *((s.attempt, UNBOUNDED) for s in snapshots)]
    keep = reached(tree, views)
    return {o.key for o in listed if (m := _RESTORE_KEY.search(o.key)) and int(m[1]) < newest_attempt
            and int(m[1]) not in keep}
