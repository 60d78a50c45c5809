"""The Delta log's part of a delta sink path's GC cursor (docs/design.md §7): what the table still needs,
from the log commits written since the last pass instead of the whole table and every commit of the
retention window (delta_vacuum.py, the full pass).

A cursor's `delta` is {version, size, modified, checkpoint, retention, removing, objects, bytes}:

  version, size, modified  V, the newest log commit the pass read, and its file's size and time: every
                           commit <= V has been read. A log written anew (the table deleted and made
                           again) shows another file or none at V, and the pass is full.
  checkpoint               the checkpoint V's commit names (commitInfo `sparkpoint.checkpoint`)
  retention                the Delta retention (s) of that pass: a removal older than it was let go,
                           so a pass with a longer one is full
  removing                 "<version>" -> the newest deletionTimestamp (ms) of that commit's removes,
                           for the commits <= V that removed a file inside the retention (a remove
                           without a timestamp counts as recent forever)
  objects, bytes           the log's objects sorting before V's (no later listing shows them; metrics)
  cleaned_at, log_start    when the pass last collected the expired log and the oldest version it
                           kept (delta_log_gc.py; absent in cursors written before: due now, from 0)

What the table needs then, without loading it. Its current version: the newest commit names checkpoint
X and holds exactly X's history (delta.py's invariant); when X is on a chain the pass walked, no file of
that history is a candidate for deletion (the pass deletes only files of entries no kept chain holds,
and uploads no entry names), else the pass is full (it reads the table from the log, delta_log_read.py). Files removed
inside the retention: those of the `removing` commits still inside it and of the commits after V.
The log is listed after the commit entries, as the full pass reads the table after listing them: a
restore returns the table (a commit) before its continuation entry, so a history seen abandoned has
its removal in the listed log.
"""

from __future__ import annotations

import json
import re
from dataclasses import asdict, dataclass, field
from typing import Any

from sparkpoint.runtime.store import ObjectInfo, ObjectStore
from sparkpoint.runtime.store.base import ObjectNotFoundError

from .delta_log_read import LogRead, newest_stamp, removals
from .gc_cursor import Diverged

COMMIT_FILE = re.compile(r"/_delta_log/\d{20}\.json$")


@dataclass
class LogCursor:
    version: int
    size: int
    modified: float
    checkpoint: str | None
    retention: float
    removing: dict[str, int] = field(default_factory=dict)
    objects: int = 0
    bytes: int = 0
    cleaned_at: float = 0.0  # when the expired log was last collected (delta_log_gc.py; 0: never)
    log_start: int = 0  # the oldest version that collection kept (its listing starts there)

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


def parse_log_cursor(doc: Any) -> LogCursor | None:
    try:
        checkpoint = doc["checkpoint"]
        return LogCursor(version=int(doc["version"]), size=int(doc["size"]), modified=float(doc["modified"]),
                         checkpoint=None if checkpoint is None else str(checkpoint),
                         retention=float(doc["retention"]),
                         removing={str(int(k)): int(v) for k, v in doc["removing"].items()},
                         objects=int(doc["objects"]), bytes=int(doc["bytes"]),
                         cleaned_at=float(doc.get("cleaned_at", 0.0)), log_start=int(doc.get("log_start", 0)))
    except (ValueError, KeyError, TypeError, AttributeError):
        return None


def version_of(key: str) -> int | None:
    m = COMMIT_FILE.search(key)
    return int(key.rsplit("/", 1)[1][:20]) if m else None


def log_prefix(root: str) -> str:
    return f"{root}/_delta_log/"


def _before(prefix: str, version: int) -> str:
    """The key every object of versions >= `version` sorts after (its checkpoint and commit files)."""
    return f"{prefix}{version:020d}"


def named_checkpoint(commit: bytes) -> str | None:
    """The checkpoint a commit published (its commitInfo's `sparkpoint.checkpoint`), or None."""
    for line in commit.splitlines():
        if line.strip() and (info := json.loads(line).get("commitInfo")) is not None:
            value = info.get("sparkpoint.checkpoint")
            return None if value is None else str(value)
    return None


def log_cursor_after_full(store: ObjectStore, log: LogRead, retention: float,
                          cleaned: tuple[float, int] = (0.0, 0)) -> LogCursor | None:
    """The log's state a full pass leaves, from what it read of the log (delta_log_read.py: the newest
    commit, the objects before it, the commits removing a file inside the retention)."""
    if log.newest is None:
        return None
    try:
        checkpoint = named_checkpoint(store.get_bytes(log.newest.key))
    except ObjectNotFoundError:
        return None
    return LogCursor(version=log.version, size=log.newest.size, modified=log.newest.last_modified,
                     checkpoint=checkpoint, retention=retention,
                     removing={str(v): ms for v, ms in log.removing.items()},
                     objects=log.objects, bytes=log.bytes, cleaned_at=cleaned[0], log_start=cleaned[1])


class TableLog:
    """One pass's view of the table's log from its cursor: `advance` reads the commits since (raising
    Diverged when the cursor cannot say), `needs` answers for a file the pass would delete."""

    def __init__(self, store: ObjectStore, root: str, cursor: LogCursor, *, retention: float, now: float):
        self.store, self.root, self.cursor = store, root, cursor
        self.retention = retention
        self.cutoff_ms = int((now - retention) * 1000)
        self.listed: list[ObjectInfo] = []
        self._removed: dict[int, list[tuple[str, int | None]]] = {}  # the commits read this pass
        self._recent: set[str] | None = None
        self.next: LogCursor | None = None

    def advance(self) -> LogCursor:
        """List the log after V, read its new commits; returns the next state (also `self.next`)."""
        cursor, prefix = self.cursor, log_prefix(self.root)
        if self.retention > cursor.retention:
            raise Diverged("a Delta retention longer than the cursor's: removals it let go may be needed")
        self.listed = list(self.store.list_after(prefix, _before(prefix, cursor.version)))
        commits = {v: o for o in self.listed if (v := version_of(o.key)) is not None}
        at = commits.get(cursor.version)
        if at is None or at.size != cursor.size or abs(at.last_modified - cursor.modified) > 1e-3:
            raise Diverged(f"the Delta log's version {cursor.version} is gone or another file: the log was written anew")
        removing = {k: ms for k, ms in cursor.removing.items() if ms >= self.cutoff_ms}
        version, checkpoint = cursor.version, cursor.checkpoint
        for v in sorted(x for x in commits if x > cursor.version):
            try:
                data = self.store.get_bytes(commits[v].key)
            except ObjectNotFoundError as exc:  # a commit file is never removed this young
                raise Diverged(f"the Delta log's version {v} vanished while read") from exc
            self._removed[v] = removals(data)
            if (ms := newest_stamp(self._removed[v])) is not None and ms >= self.cutoff_ms:
                removing[str(v)] = ms
            version, checkpoint = v, named_checkpoint(data)
        before = [o for o in self.listed if o.key < _before(prefix, version)]
        self.next = LogCursor(version=version, size=commits[version].size, modified=commits[version].last_modified,
                              checkpoint=checkpoint, retention=self.retention, removing=removing,
                              objects=cursor.objects + len(before), bytes=cursor.bytes + sum(o.size for o in before),
                              cleaned_at=cursor.cleaned_at, log_start=cursor.log_start)
        return self.next

    def needs(self, key: str) -> bool:
        """Whether a commit removed the file at store key `key` inside the retention (read on the first
        question: most passes delete nothing and ask none)."""
        if self._recent is None:
            assert self.next is not None, "advance first"
            self._recent = set()
            for v in sorted(int(k) for k in self.next.removing):
                if v not in self._removed:
                    try:
                        self._removed[v] = removals(self.store.get_bytes(f"{log_prefix(self.root)}{v:020d}.json"))
                    except ObjectNotFoundError:  # removed by delta-rs's log cleanup: older than its retention
                        continue
                self._recent |= {p for p, s in self._removed[v] if s is None or s >= self.cutoff_ms}
        return key.startswith(self.root + "/") and key[len(self.root) + 1:] in self._recent

    @property
    def log_objects(self) -> tuple[int, int]:
        """(objects, bytes) of the whole log now: the cursor's and the listed ones."""
        return self.cursor.objects + len(self.listed), self.cursor.bytes + sum(o.size for o in self.listed)
