"""The output GC cursor's model: what a pass leaves so the next one costs what changed since, not the
job's age (docs/design.md §7). The pass from it is gc_cursor_pass.py, its walks gc_walk.py, the
cursor a full pass leaves gc_cursor_full.py; a delta path's Delta log state is delta_cursor.py.

A transactional sink keeps one data file per batch for the job's life: they are the table. A pass
that lists `staging/` and walks every history to its first entry grows with the job's age, so after
one full pass (output_gc.py) the sidecar keeps a cursor per sink path, in `outputs/_gc-cursors.json`:

  entry, batch   M and its upToBatch: a commit entry on the chain of every point the pass kept (the
                 head readers see, every checkpoint manifest, every attached savepoint)
  snapshot       S: every history snapshot numbered <= S is on M's chain
  attempt        the newest attempt (the fence) then: folders of later attempts are new
  folders        "attempt-<A>" -> {"after": key, "published": B} for the staging folders still open:
                 every key up to `after` is decided (deleted, or named by a commit entry), and B is
                 the highest batch an entry of attempt A covers. Folders of attempts <= `attempt`
                 not named here are settled: every key in them is decided.
  objects, bytes the committed data files the folders' cursors passed (the sidecar's metrics)
  delta          a delta sink's path (the same, and a Delta table): how far its log was read

Why that is enough. A key named by an entry stays in the store until that entry (or the snapshot
holding it) is found unneeded, and then goes by name, with its entry, so it never needs listing
again. A key named by no entry is a crashed or fenced upload: of the newest attempt, past its last
publish (kept, the folder stays open), or of an older attempt, past the last batch it published
(collected after the grace). Every future point descends from a kept point, whose chain holds M, or
starts a new history: so a pass walks each point's chain back only to M (and M's own chain back to
the oldest entry still in `_commits/` and the newest snapshot S), lists `_commits/`, `_snapshots/`
and each open folder after its cursor. Anything it cannot decide that way (a point whose chain
misses M: a fresh start or another incarnation's history; an unneeded entry reaching below the
walked window; entries from before lineage; compaction records, upserts; a Delta log the cursor
cannot follow, or a table at a checkpoint no walk reached, delta_cursor.py) makes
the caller run the full pass, which writes a new cursor or removes it.
Limit: uploads a fenced attempt makes after a pass settled its folder are never listed (a zombie's
last seconds; a leak, never a loss).
"""



import json
import logging
import re
from dataclasses import asdict, dataclass, field
from typing import Any

from sparkpoint.runtime.store import JobRef, ObjectInfo, ObjectStore
from sparkpoint.runtime.store.base import ObjectNotFoundError, StoreAuthError
from sparkpoint.runtime.store.layout import CHECKPOINT_ID, outputs_prefix

log = logging.getLogger("sparkpoint.gc")

VERSION = 1
INCREMENTAL_AREAS = {"_commits", "_snapshots", "staging", "_gc", "_delta_log"}  # a transactional or delta sink's path
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
    delta: dict[str, Any] | None = None  # a delta sink's path: its Delta log's state (delta_cursor.py)

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
                      snapshot_objects=int(doc.get("snapshot_objects", 0)), snapshot_bytes=int(doc.get("snapshot_bytes", 0)),
                      delta=dict(doc["delta"]) if doc.get("delta") is not None else None)
    except (ValueError, KeyError, TypeError, AttributeError):
        return None


def read_cursor(store: ObjectStore, job: JobRef, path: str) -> Cursor | None:
    """The path's cursor, or None (none yet, another version, or unreadable: the pass is full)."""
    return parse_cursor(read_cursors(store, job).get(path))


class Diverged(Exception):
    """The pass cannot be decided from the cursor: the caller runs the full pass."""



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
    log_cleaned: dict[str, tuple[float, int]] = field(default_factory=dict)  # path -> (when, log start): delta_log_gc

    def young(self, info: ObjectInfo) -> bool:
        return info.last_modified >= self.now - self.grace_seconds



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
