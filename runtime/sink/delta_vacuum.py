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

Both are read from the log itself in bounded memory (delta_log_read.py: its newest checkpoint and the
commits after it, the commits inside the retention for their `remove` actions), into the pass's spill,
after the commit entries are listed, so a removal committed meanwhile is either in a read commit or its
file is in the version read. Nothing here writes to the log: delta-rs's own `vacuum` commits VACUUM
START/END (a second log writer beside the fenced runtime, and a write the GC credential may not make),
and its `full` mode deletes staged files a retained checkpoint has not published yet.
"""

from __future__ import annotations

from dataclasses import dataclass

from sparkpoint.runtime.store import JobRef, ObjectStore

from .delta_log_read import LogRead, TableUnreadableError, read_log, removals
from .gc_spill import Spill
from .keys import sink_root

DEFAULT_RETENTION_SECONDS = 7 * 24 * 3600.0  # Delta's default delta.deletedFileRetentionDuration

__all__ = ["DEFAULT_RETENTION_SECONDS", "TableNeeds", "TableUnreadableError", "read_table", "removals",
           "removed_paths", "table_needs"]


def removed_paths(commit: bytes, cutoff_ms: int) -> set[str]:
    """The data files that one commit file removed at or after `cutoff_ms`; a removal without a
    timestamp counts as recent."""
    return {path for path, stamp in removals(commit) if stamp is None or stamp >= cutoff_ms}


@dataclass
class TableNeeds:
    root: str
    log: LogRead  # the live and removed files (in the spill) and the log's state for a cursor

    def __contains__(self, key: object) -> bool:
        """Whether the table still needs the data file at store key `key`."""
        if not isinstance(key, str) or not key.startswith(self.root + "/"):
            return False
        path = key[len(self.root) + 1:]
        return path in self.log.live or path in self.log.removed


def read_table(store: ObjectStore, job: JobRef, path: str, *, retention_seconds: float, now: float,
               spill: Spill) -> TableNeeds:
    """What the delta table at `outputs/<path>/` still needs (see above), its sets in `spill`."""
    root = sink_root(job, path)
    try:
        log = read_log(store, spill, f"{root}/_delta_log/", retention=retention_seconds, now=now)
    except TableUnreadableError:
        raise
    except Exception as exc:  # pyarrow's errors on a checkpoint it cannot decode, a commit's bad JSON
        raise TableUnreadableError(f"the delta table at {root}/ cannot be read: {type(exc).__name__}: {exc}") from exc
    return TableNeeds(root, log)


def table_needs(store: ObjectStore, job: JobRef, path: str, *, retention_seconds: float, now: float) -> set[str]:
    """Store keys of the data files the delta table at `outputs/<path>/` still needs, as a set (tests)."""
    with Spill() as spill:
        log = read_table(store, job, path, retention_seconds=retention_seconds, now=now, spill=spill).log
        root = sink_root(job, path)
        return {f"{root}/{p}" for p in [*log.live, *log.removed]}
