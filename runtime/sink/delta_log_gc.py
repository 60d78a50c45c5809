"""A delta sink's expired Delta log, collected by the GC sidecar (docs/design.md §7): what Delta's own
metadata cleanup does, which no one else does here. The runtime commits through delta-rs's
`create_write_transaction`, whose post-commit hook writes a log checkpoint every 100 commits but
deletes nothing (checked with delta-rs 1.6.6), and the runtime's credential may not delete outside
`pending/` (docs/security.md); so the log grew by a commit per checkpoint and a checkpoint of the
whole table per 100, for the job's life.

A log file (`<v>.json`, `<v>.checkpoint[...].parquet`, `<v>.crc`, any `<v>.` file) goes when its
version is below V, the newest single-file checkpoint `<V>.checkpoint.parquet` older than the log
retention, and the file is itself older than that. Every version from V on is read from checkpoint V
and the commits after it, so every version inside the retention stays readable (time travel, a
streaming reader's start, the pass's own removals inside `gc.deltaRetention`). The retention is
Delta's default `delta.logRetentionDuration`, 30 days, or `gc.deltaRetention` when longer; the
table's own property is not read (as `deletedFileRetentionDuration` is not), and the sink sets none.
`_last_checkpoint` and everything not named by a version stay.

Cost: the log is listed from its first key and the listing stops at the first file younger than the
retention, so a steady pass lists what expired since the last pass plus the files between V and the
next checkpoint (a checkpoint interval); a file is deleted as soon as a newer expired checkpoint is
met, so memory holds at most one interval, also on a first pass over a year of log.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass
from typing import Any

from sparkpoint.runtime.store import ObjectInfo

from .gc_cursor import PassContext
from .keys import sink_root

LOG_RETENTION_SECONDS = 30 * 24 * 3600.0  # Delta's default delta.logRetentionDuration
CLEAN_EVERY = 3600.0  # a path's log is collected at most hourly: a steady pass lists none of it
_VERSIONED = re.compile(r"/_delta_log/(\d{20})\.")
_CHECKPOINT = re.compile(r"/_delta_log/(\d{20})\.checkpoint\.parquet$")


def log_retention(delta_retention_seconds: float) -> float:
    return max(LOG_RETENTION_SECONDS, delta_retention_seconds)


def expired_log(listing: Iterable[ObjectInfo], cutoff: float) -> Iterator[ObjectInfo]:
    """Pure over the listing (the log in key order, read lazily): the files to delete, each yielded
    once a newer checkpoint older than `cutoff` (seconds) is met; stops at the first younger file."""
    pending: list[tuple[int, ObjectInfo]] = []
    for info in listing:
        m = _VERSIONED.search(info.key)
        if m is None:
            continue  # _last_checkpoint and anything not named by a version
        if info.last_modified > cutoff:
            break
        version = int(m[1])
        if _CHECKPOINT.search(info.key):
            yield from (o for v, o in pending if v < version)
            pending = [(v, o) for v, o in pending if v >= version]
        pending.append((version, info))


@dataclass
class Collected:
    files: int = 0
    bytes: int = 0
    before_files: int = 0  # of those, the ones sorting before `boundary` (a cursor's counted objects)
    before_bytes: int = 0
    kept: int = 0  # the newest expired checkpoint's version: every older file went


def collect_log(listing: Iterable[ObjectInfo], cutoff: float, delete: Callable[[str], None],
                boundary: str | None = None) -> Collected:
    """Delete what expired_log yields (`delete` is the store's, or nothing for a dry run)."""
    done = Collected()
    for info in expired_log(listing, cutoff):
        done.kept = max(done.kept, int(_VERSIONED.search(info.key)[1]) + 1)  # type: ignore[index]
        delete(info.key)
        done.files, done.bytes = done.files + 1, done.bytes + info.size
        if boundary is not None and info.key < boundary:
            done.before_files, done.before_bytes = done.before_files + 1, done.before_bytes + info.size
    return done


def collect_expired_log(ctx: PassContext, path: str, result: Any, delta_retention: float) -> None:
    """The output pass's step for a delta path, before its cursor's or full pass (which then list what
    is left), at most once per CLEAN_EVERY per path: the listing starts at the version the last one
    kept (the cursor's `log_start`). Counts go to result.deleted_log_files/bytes; the cursor's count
    of the log's objects before its version loses what went, and it records when and from where."""
    prefix = f"{sink_root(ctx.job, path)}/_delta_log/"
    state = (ctx.cursors.get(path) or {}).get("delta")
    state = state if isinstance(state, dict) else {}
    if ctx.now - float(state.get("cleaned_at", 0.0)) < CLEAN_EVERY:  # (a full pass's new cursor keeps these)
        ctx.log_cleaned[path] = (float(state["cleaned_at"]), int(state.get("log_start", 0)))
        return
    boundary = f"{prefix}{int(state['version']):020d}" if "version" in state else None
    start = int(state.get("log_start", 0))
    listing = ctx.store.list_after(prefix, f"{prefix}{start:020d}") if start else ctx.store.list(prefix)
    cutoff = ctx.now - max(log_retention(delta_retention), ctx.grace_seconds)
    done = collect_log(listing, cutoff, (lambda key: None) if ctx.dry_run else ctx.store.delete, boundary)
    result.deleted_log_files += done.files
    result.deleted_log_bytes += done.bytes
    if ctx.dry_run:
        return
    kept = max(start, done.kept)
    ctx.log_cleaned[path] = (ctx.now, kept)
    if state:
        state.update(objects=max(0, int(state.get("objects", 0)) - done.before_files),
                     bytes=max(0, int(state.get("bytes", 0)) - done.before_bytes), cleaned_at=ctx.now, log_start=kept)
