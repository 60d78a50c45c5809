"""Output GC of a transactional sink bounded by what changed since the last pass (docs/design.md §7).

A transactional sink keeps one data file per batch for the job's life: they are the table. A pass
that lists `staging/` and walks every history to its first entry grows with the job's age, so after
one full pass (output_gc.py) the sidecar keeps a cursor per sink path, `outputs/<path>/_gc/cursor.json`:

  entry, batch   M and its upToBatch: a commit entry on the chain of every point the pass kept (the
                 head readers see, every checkpoint manifest, every attached savepoint)
  snapshot       S: every history snapshot numbered <= S is on M's chain
  attempt        the newest attempt (the fence) then: folders of later attempts are new
  folders        "attempt-<A>" -> {"after": key, "published": B} for the staging folders still open:
                 every key up to `after` is decided (deleted, or named by a commit entry), and B is
                 the highest batch an entry of attempt A covers. Folders of attempts <= `attempt`
                 not named here are settled: every key in them is decided.
  objects, bytes the committed data files the folders' cursors passed (the sidecar's metrics)

Why that is enough. A key named by an entry stays in the store until that entry (or the snapshot
holding it) is found unneeded, and then goes by name, with its entry, so it never needs listing
again. A key named by no entry is a crashed or fenced upload: of the newest attempt, past its last
publish (kept, the folder stays open), or of an older attempt, past the last batch it published
(collected after the grace). Every future point descends from a kept point, whose chain holds M, or
starts a new history: so a pass walks each point's chain back only to M (and M's own chain back to
the oldest entry still in `_commits/` and the newest snapshot S), lists `_commits/`, `_snapshots/`
and each open folder after its cursor. Anything it cannot decide that way (a point whose chain
misses M: a fresh start or another incarnation's history; an unneeded entry reaching below the
walked window; entries from before lineage; compaction records, upserts, a delta table) makes
the caller run the full pass, which writes a new cursor or removes it.
Limit: uploads a fenced attempt makes after a pass settled its folder are never listed (a zombie's
last seconds; a leak, never a loss).
"""

from __future__ import annotations

import json
import logging
import re
from collections.abc import Callable, Iterator
from dataclasses import asdict, dataclass, field
from typing import Any

from sparkpoint.runtime.store import JobRef, ObjectInfo, ObjectStore
from sparkpoint.runtime.store.base import ObjectNotFoundError, StoreAuthError
from sparkpoint.runtime.store.layout import CHECKPOINT_ID, id_from_json_key, outputs_prefix

from .history import SegmentReader, snapshots_prefix
from .keys import commit_key, commits_prefix, file_keys, staging_prefix
from .lineage import OutputLineageError, continuation_id, head_checkpoint, head_entry

log = logging.getLogger("sparkpoint.gc")

VERSION = 1
INCREMENTAL_AREAS = {"_commits", "_snapshots", "staging", "_gc"}  # a transactional sink's path
_BATCH = re.compile(r"/staging/attempt-(\d+)/batch-(\d+)[-.]")


def cursor_key(job: JobRef) -> str:
    """One object holds every path's cursor: a GC credential may write that key and no other."""
    return f"{outputs_prefix(job)}_gc-cursors.json"


def number(entry_id: str | None) -> int:
    m = CHECKPOINT_ID.match(entry_id or "")
    return int(m.group(1)) if m else -1


def folder_of(key: str) -> tuple[str, int, int] | None:
    """("attempt-<A>", A, batch) of a staged data file, or None for any other key."""
    m = _BATCH.search(key)
    return (f"attempt-{m.group(1)}", int(m.group(1)), int(m.group(2))) if m else None


@dataclass
class Cursor:
    entry: str
    batch: int
    snapshot: int
    attempt: int
    folders: dict[str, dict[str, Any]] = field(default_factory=dict)
    objects: int = 0
    bytes: int = 0
    snapshot_objects: int = 0  # the snapshots numbered <= `snapshot` (no pass lists them again)
    snapshot_bytes: int = 0

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


def read_cursors(store: ObjectStore, job: JobRef) -> dict[str, Any]:
    """path -> its cursor as stored ({} when there is none or it is unreadable: passes are full)."""
    try:
        doc = json.loads(store.get_bytes(cursor_key(job)))
    except (ObjectNotFoundError, ValueError):
        return {}
    if not isinstance(doc, dict) or doc.get("version") != VERSION or not isinstance(doc.get("paths"), dict):
        return {}
    return dict(doc["paths"])


def parse_cursor(doc: Any) -> Cursor | None:
    try:
        return Cursor(entry=str(doc["entry"]), batch=int(doc["batch"]), snapshot=int(doc["snapshot"]),
                      attempt=int(doc["attempt"]), folders={str(k): {"after": str(v["after"]),
                                                                     "published": int(v["published"])}
                                                            for k, v in doc["folders"].items()},
                      objects=int(doc["objects"]), bytes=int(doc["bytes"]),
                      snapshot_objects=int(doc.get("snapshot_objects", 0)), snapshot_bytes=int(doc.get("snapshot_bytes", 0)))
    except (ValueError, KeyError, TypeError, AttributeError):
        return None


def read_cursor(store: ObjectStore, job: JobRef, path: str) -> Cursor | None:
    """The path's cursor, or None (none yet, another version, or unreadable: the pass is full)."""
    return parse_cursor(read_cursors(store, job).get(path))


class Diverged(Exception):
    """The pass cannot be decided from the cursor: the caller runs the full pass."""


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


@dataclass
class PassContext:
    """What every path of one output pass shares (output_gc.output_gc_pass reads it once)."""

    store: ObjectStore
    job: JobRef
    now: float
    grace_seconds: float
    dry_run: bool
    newest_attempt: int
    manifests: list[tuple[str, dict[str, Any]]]  # (entry id, extra.sink) of every kept point
    cursors: dict[str, Any] = field(default_factory=dict)  # path -> cursor, as read at the pass's start
    refused: bool = False  # the store refused the cursor's put (a GC policy from before cursors)

    def young(self, info: ObjectInfo) -> bool:
        return info.last_modified >= self.now - self.grace_seconds


def incremental_pass(ctx: PassContext, path: str, cursor: Cursor, result: Any) -> Cursor:
    """One path's output pass from its cursor; returns the next cursor. Raises Diverged (before
    deleting anything) when the full pass must decide instead."""
    store, job = ctx.store, ctx.job
    commits = [o for o in store.list(commits_prefix(job, path)) if o.key.endswith(".json")]
    commit_ids = [id_from_json_key(o.key) for o in commits]
    snapshots = [o for o in _snapshot_listing(ctx, path, cursor.snapshot, [*commit_ids, *(e for e, _ in ctx.manifests)])
                 if o.key.endswith(".json")]
    loaded: dict[str, dict[str, Any] | None] = {}

    def load(entry_id: str) -> dict[str, Any] | None:
        if entry_id not in loaded:
            try:
                loaded[entry_id] = json.loads(store.get_bytes(commit_key(job, path, entry_id)))
            except ObjectNotFoundError:
                loaded[entry_id] = None
        return loaded[entry_id]

    head = head_entry(commit_ids, load)
    points = [(eid, sink) for eid, sink in ctx.manifests if str(sink.get("path", "default")).strip("/") == path]
    published_ids = set(commit_ids)
    starts = [head_checkpoint(head), *[start_of(eid, sink, published_ids) for eid, sink in points]]
    window, segments, newest, first = walk_window(store, job, path, cursor, commit_ids,
                                                  {id_from_json_key(o.key) for o in snapshots}, starts, load)
    needed = set(window.ids) | {eid for eid, _ in points}
    if head is not None and head.get("kind") == "continuation":
        needed.add(continuation_id(int(head["attempt"])))
    manifest_keys = {k for _, sink in points for f in sink.get("files", []) for k in file_keys(f)}
    published = {int(name.split("-", 1)[1]): int(f["published"]) for name, f in cursor.folders.items()}
    for attempt, pub in window.published.items():
        published[attempt] = max(published.get(attempt, -1), pub)

    # What no kept point reaches: its entries and snapshots, decided here before anything is deleted
    abandoned_entries = [o for o in commits if id_from_json_key(o.key) not in needed]
    abandoned_snapshots = [o for o in snapshots if number(id_from_json_key(o.key)) > cursor.snapshot
                           and id_from_json_key(o.key) not in needed and id_from_json_key(o.key) not in window.met]
    docs: list[tuple[ObjectInfo, list[dict[str, Any]]]] = []
    for info in abandoned_entries:
        doc = load(id_from_json_key(info.key))
        docs.append((info, [doc] if doc is not None and doc.get("kind") != "continuation" else []))
    for info in abandoned_snapshots:
        try:
            held = json.loads(store.get_bytes(info.key)).get("entries") or []
        except ObjectNotFoundError:
            continue
        docs.append((info, [d for d in held if d["checkpoint"] not in needed]))
    floor = cursor.batch if window.floor is None else min(window.floor, cursor.batch)
    for _, held in docs:
        for doc in held:
            if int(doc["afterBatch"]) < floor:
                raise Diverged(f"entry {doc['checkpoint']} of no kept history reaches below the walked window")
            see(published, doc)

    settled = {"objects": cursor.objects, "bytes": cursor.bytes}

    def passed(key: str) -> bool:  # counted in the cursor's totals already
        f = folder_of(key)
        if f is None:
            return False
        if f[0] in cursor.folders:
            return key <= str(cursor.folders[f[0]]["after"])
        return f[1] <= cursor.attempt

    # Abandoned entries and snapshots: their files first (by name), then themselves
    kept: set[str] = set()
    for info, held in docs:
        for key in sorted({k for doc in held for item in doc.get("files", []) for k in file_keys(item)}):
            if key in window.keys or key in manifest_keys:
                continue
            stat = store.stat(key)
            if stat is None:
                continue
            f = folder_of(key)
            if ctx.young(stat) or (f is not None and f[1] >= ctx.newest_attempt):
                kept.add(info.key)  # the entry stays too: it is how a later pass finds this file
                result.kept_young_or_newest += 1
                result.keep(stat, committed=False)
                continue
            if not ctx.dry_run:
                store.delete(key)
            result.deleted_files += 1
            result.deleted_bytes += stat.size
            if passed(key):
                settled["objects"] -= 1
                settled["bytes"] -= stat.size
        if info.key in kept or ctx.young(info):
            kept.add(info.key)
            result.kept_young_or_newest += 1
            result.keep(info, committed=False)
            continue
        if not ctx.dry_run:
            store.delete(info.key)
        if "/_snapshots/" in info.key:
            result.deleted_snapshots += 1
        else:
            result.deleted_entries.append(f"{path}:{id_from_json_key(info.key)}")
            result.deleted_entry_bytes += info.size

    # Needed entries a snapshot holds, older than the first snapshot every walk meets: no walk reads them
    decided = {o.key for o, _ in docs}
    for info in commits:
        if info.key in decided:
            continue
        entry_id = id_from_json_key(info.key)
        if entry_id in segments.covered and number(entry_id) < first and not ctx.young(info):
            if not ctx.dry_run:
                store.delete(info.key)
            result.deleted_snapshotted_entries += 1
            result.deleted_entry_bytes += info.size
        else:
            result.keep(info, committed=True)
    for info in snapshots:  # (S itself is listed, and counted in the cursor's snapshot totals)
        if info.key not in decided and number(id_from_json_key(info.key)) > cursor.snapshot:
            result.keep(info, committed=True)

    # what no listing of this pass shows: the data files the folders' cursors passed, the settled snapshots
    result.committed_objects += settled["objects"] + cursor.snapshot_objects
    result.committed_bytes += settled["bytes"] + cursor.snapshot_bytes
    result.live_files += settled["objects"]
    result.live_bytes += settled["bytes"]
    folders = _list_folders(ctx, path, cursor, window.keys, manifest_keys, published, settled, result)
    snapshot = max((number(i) for i in window.met if number(i) <= number(newest)), default=cursor.snapshot)
    if undecided := [number(id_from_json_key(k)) for k in kept if "/_snapshots/" in k]:
        snapshot = min(snapshot, min(undecided) - 1)
    snapshot = max(cursor.snapshot, snapshot)
    passed_snapshots = [o for o in snapshots if o.key not in decided and cursor.snapshot < number(id_from_json_key(o.key))
                        <= snapshot]
    return Cursor(entry=newest, batch=window.batches[newest], snapshot=snapshot,
                  attempt=max(ctx.newest_attempt, cursor.attempt), folders=folders,
                  objects=settled["objects"], bytes=settled["bytes"],
                  snapshot_objects=cursor.snapshot_objects + len(passed_snapshots),
                  snapshot_bytes=cursor.snapshot_bytes + sum(o.size for o in passed_snapshots))


def _snapshot_listing(ctx: PassContext, path: str, settled: int, ids: list[str]) -> Iterator[ObjectInfo]:
    """`_snapshots/` from the settled snapshot S on (those before it are on M's chain and no walk
    goes below S). Ids sort by number only at one width: when a checkpoint id is wider than S's,
    snapshots of that width may sort before S, and the listing is whole."""
    prefix = snapshots_prefix(ctx.job, path)
    first = f"chk-{settled:06d}"
    if settled <= 0 or max((len(i) for i in ids if number(i) >= 0), default=0) > len(first):
        return ctx.store.list(prefix)
    return ctx.store.list_after(prefix, prefix + first)  # S itself sorts after its bare id


def _list_folders(ctx: PassContext, path: str, cursor: Cursor, named: set[str], manifest_keys: set[str],
                  published: dict[int, int], settled: dict[str, int], result: Any) -> dict[str, dict[str, Any]]:
    """List the open staging folders after their cursors and the new attempts' folders whole;
    collect uploads no entry names. Returns the folders still open."""
    store, job = ctx.store, ctx.job
    prefix = staging_prefix(job, path)
    todo = dict(cursor.folders)
    for attempt in range(cursor.attempt + 1, ctx.newest_attempt + 1):
        todo.setdefault(f"attempt-{attempt}", {"after": "", "published": -1})
    out: dict[str, dict[str, Any]] = {}
    for name, state in sorted(todo.items()):
        attempt = int(name.split("-", 1)[1])
        top = max(published.get(attempt, -1), published.get(-1, -1), int(state.get("published", -1)))
        after, blocked = str(state.get("after", "")), False
        listing = store.list_after(f"{prefix}{name}/", after) if after else store.list(f"{prefix}{name}/")
        for info in listing:
            f = folder_of(info.key)
            by_entry = info.key in named or (f is not None and f[2] <= top)  # named by an entry
            if by_entry or info.key in manifest_keys:
                result.live_files += 1
                result.live_bytes += info.size
                result.keep(info, committed=True)
                if by_entry and not blocked:
                    after = info.key
                    settled["objects"] += 1
                    settled["bytes"] += info.size
                else:  # named only by a manifest: its entry may never come, and then no entry names it
                    blocked = True
            elif f is not None and not ctx.young(info) and attempt < ctx.newest_attempt:
                if not ctx.dry_run:
                    store.delete(info.key)
                result.deleted_files += 1
                result.deleted_bytes += info.size
                if not blocked:
                    after = info.key
            else:
                blocked = True
                result.kept_young_or_newest += 1
                result.keep(info, committed=False)
        if blocked or attempt >= ctx.newest_attempt:
            out[name] = {"after": after, "published": top}
    return out


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


def unpublished_keys(ctx: PassContext, path: str, commit_ids: set[str], segments: SegmentReader) -> set[str]:
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


def cursor_after_full(ctx: PassContext, path: str, needed_entries: set[str], scan: FolderScan) -> Cursor | None:
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


def write_cursor(ctx: PassContext, path: str, cursor: Cursor | None) -> None:
    """Put the paths' cursors with this path's next one (None: removed, the next pass is full). A plain
    put: the sidecar is the only writer, and two passes racing each write cursors true when computed.
    A store that refuses it (a GC credential's policy from before cursors) leaves passes full."""
    if ctx.dry_run or ctx.refused:
        return
    before = ctx.cursors.get(path)
    if cursor is None:
        ctx.cursors.pop(path, None)
    else:
        ctx.cursors[path] = cursor.to_dict()
    if ctx.cursors.get(path) == before:
        return
    try:
        ctx.store.put_bytes(cursor_key(ctx.job), json.dumps({"version": VERSION, "paths": ctx.cursors},
                                                             sort_keys=True).encode())
    except StoreAuthError as exc:
        ctx.refused = True
        log.warning("output gc cannot write its cursor, so every pass lists all of outputs/: allow the GC "
                    "credential to write it (docs/security.md)", extra={"key": cursor_key(ctx.job), "error": str(exc)})
