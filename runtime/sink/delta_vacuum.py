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
import os
import re
from collections.abc import Iterable, Mapping
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


def removed_paths(commit: bytes, cutoff_ms: int) -> set[str]:
    """The data files (paths relative to the table's root) that one commit file removed at or after
    `cutoff_ms`; a removal without a timestamp counts as recent."""
    out: set[str] = set()
    for line in commit.splitlines():
        if not line.strip():
            continue
        remove = json.loads(line).get("remove")
        if remove is None:
            continue
        stamp = remove.get("deletionTimestamp")
        if stamp is None or int(stamp) >= cutoff_ms:
            out.add(unquote(remove["path"]))
    return out


def recent_commits(log: Iterable[ObjectInfo], cutoff: float) -> list[ObjectInfo]:
    """The commit files that may hold a removal at or after `cutoff` (seconds)."""
    return [o for o in log if COMMIT_FILE.search(o.key) and o.last_modified >= cutoff - _LISTING_MARGIN_SECONDS]


def table_needs(store: ObjectStore, job: JobRef, path: str, *, retention_seconds: float, now: float,
                env: Mapping[str, str] = os.environ) -> set[str]:
    """Store keys of the data files the delta table at `outputs/<path>/` still needs (see above)."""
    root = sink_root(job, path)
    try:
        table = open_table(delta_location(store, root, env))
        current = table_paths(table) if table is not None else set()
    except Exception as exc:  # delta-rs raises its own errors, OSError, or pyarrow's
        raise TableUnreadableError(f"the delta table at {root}/ cannot be read: {type(exc).__name__}: {exc}") from exc
    needed = set(current)
    cutoff = now - retention_seconds
    for info in recent_commits(store.list(f"{root}/_delta_log/"), cutoff):
        try:
            needed |= removed_paths(store.get_bytes(info.key), int(cutoff * 1000))
        except ObjectNotFoundError:
            continue  # removed by delta-rs's log cleanup (older than the log retention) meanwhile
    return {f"{root}/{p}" for p in needed}
