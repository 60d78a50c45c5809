"""What a delta sink's table still needs from its folder: the rule that makes the GC sidecar's output
pass the table's vacuum (docs/design.md §7).

The output pass (output_gc.py) already keeps every file a retained checkpoint's restore or the
readers' history needs; a retained checkpoint's published table version holds exactly the files of
its history (delta.py), so that rule covers "no retained checkpoint's published version needs it".
For a Delta table it also keeps the data files that the table itself still needs:

- the files of the table's current version (a restore that returned the table to a point the
  retention rules no longer keep, then crashed before its continuation entry, leaves such files);
- every file a commit removed less than the retention before the pass (Delta's
  `deletedFileRetentionDuration` semantics: a reader that loaded an older version, or travels back
  to one that recent, still finds its files).

The removals are read from the log's commit files (`_delta_log/<version>.json`, one JSON action per
line: `{"remove": {"path", "deletionTimestamp", ...}}`), listed after the current version is
loaded, so a removal committed meanwhile is either in a listed commit or its file was in the
loaded version. Nothing here writes to the log: delta-rs's own `vacuum` commits VACUUM START/END
(a second log writer beside the fenced runtime, and a write the GC credential may not make), and
its `full` mode deletes staged files a retained checkpoint has not published yet.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterable
from dataclasses import dataclass
from urllib.parse import unquote

from sparkpoint.runtime.store import JobRef, ObjectInfo, ObjectStore
from sparkpoint.runtime.store.base import ObjectNotFoundError

from .delta_table import delta_location, open_table, table_paths
from .keys import sink_root

COMMIT_FILE = re.compile(r"/_delta_log/\d{20}\.json$")
DEFAULT_RETENTION_SECONDS = 7 * 24 * 3600.0  # Delta's default delta.deletedFileRetentionDuration
# A commit file is stored after its removals were stamped (same pod, same clock); this margin only
# decides which commit files are read at all, and errs on reading more.
_LISTING_MARGIN_SECONDS = 600.0


class TableUnreadableError(ValueError):
    """delta-rs could not load the table's current version: the pass deletes nothing of that path."""


def removals(commit: bytes) -> list[tuple[str, int | None]]:
    """The (path relative to the table's root, deletionTimestamp in ms) of one commit file's removes."""
    out: list[tuple[str, int | None]] = []
    for line in commit.splitlines():
        if not line.strip():
            continue
        remove = json.loads(line).get("remove")
        if remove is not None:
            stamp = remove.get("deletionTimestamp")
            out.append((unquote(remove["path"]), None if stamp is None else int(stamp)))
    return out


def removed_paths(commit: bytes, cutoff_ms: int) -> set[str]:
    """The data files that one commit file removed at or after `cutoff_ms`; a removal without a
    timestamp counts as recent."""
    return _recent(removals(commit), cutoff_ms)


def _recent(removed: list[tuple[str, int | None]], cutoff_ms: int) -> set[str]:
    return {path for path, stamp in removed if stamp is None or stamp >= cutoff_ms}


def recent_commits(log: Iterable[ObjectInfo], cutoff: float) -> list[ObjectInfo]:
    """The commit files that may hold a removal at or after `cutoff` (seconds)."""
    return [o for o in log if COMMIT_FILE.search(o.key) and o.last_modified >= cutoff - _LISTING_MARGIN_SECONDS]


@dataclass
class TableNeeds:
    keys: set[str]  # store keys of the data files the table still needs
    listed: list[ObjectInfo]  # the whole log as listed
    read: dict[int, list[tuple[str, int | None]]]  # version -> removals, of the commits inside the retention


def table_needs(store: ObjectStore, job: JobRef, path: str, *, retention_seconds: float, now: float) -> set[str]:
    """Store keys of the data files the delta table at `outputs/<path>/` still needs (see above)."""
    return read_table(store, job, path, retention_seconds=retention_seconds, now=now).keys


def read_table(store: ObjectStore, job: JobRef, path: str, *, retention_seconds: float, now: float) -> TableNeeds:
    """table_needs, with the log as listed and the removals read (a cursor's log state, delta_cursor.py)."""
    root = sink_root(job, path)
    try:
        table = open_table(delta_location(store, root))
        current = table_paths(table) if table is not None else set()
    except Exception as exc:  # delta-rs raises its own errors, OSError, or pyarrow's
        raise TableUnreadableError(f"the delta table at {root}/ cannot be read: {type(exc).__name__}: {exc}") from exc
    needed = set(current)
    cutoff = now - retention_seconds
    log = list(store.list(f"{root}/_delta_log/"))
    listed = recent_commits(log, cutoff)
    read: dict[int, list[tuple[str, int | None]]] = {}
    for info in listed:
        cache_key = _cache_key(store, info)
        if cache_key not in _REMOVALS:
            try:
                _REMOVALS[cache_key] = removals(store.get_bytes(info.key))
            except ObjectNotFoundError:
                continue  # removed by delta-rs's log cleanup (older than the log retention) meanwhile
        read[int(info.key.rsplit("/", 1)[1][:20])] = _REMOVALS[cache_key]
        needed |= _recent(_REMOVALS[cache_key], int(cutoff * 1000))
    _forget_all_but(f"{store.url}\n{root}/_delta_log/", {_cache_key(store, o) for o in listed})
    return TableNeeds({f"{root}/{p}" for p in needed}, log, read)


# Commit files never change once written (a job deleted and created again under the same name writes
# them anew: size and time are in the key), so the sidecar reads each one once: a table checkpointed
# every 10 s has some 60,000 commit files inside a week's retention.
_REMOVALS: dict[str, list[tuple[str, int | None]]] = {}


def _cache_key(store: ObjectStore, info: ObjectInfo) -> str:
    return f"{store.url}\n{info.key}\n{info.size}\n{info.last_modified}"


def _forget_all_but(prefix: str, keep: set[str]) -> None:
    for key in [k for k in _REMOVALS if k.startswith(prefix) and k not in keep]:
        del _REMOVALS[key]
