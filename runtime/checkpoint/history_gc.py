"""Collect Spark event logs (`history/<attempt>/<start>/...`, docs/design.md §3 and §7): the GC
sidecar's part of a pass after checkpoints and outputs.

Kept: the newest `retain_attempts` attempts that have logs, and always every attempt holding the
current start (the store's fence: the newest claimed start, whose runtime may still be uploading) or
a newer one. An attempt is the operator's (`history/<attempt>/`, all its runtime starts: in-place
restarts stay together); a start written in the layout before the attempt level
(`history/<start>/eventlog_v2_...`) is an attempt of its own. Attempts are ordered by their newest
start, which grows across a job's incarnations (the fence is kept) while the operator's attempt
numbers begin at 1 again for a job created anew under its name. Every file of the other attempts is
deleted once it is older than the grace period (an attempt that is still uploading, a fenced zombie,
keeps its fresh files until a later pass). Also removed, in kept attempts too: a `.inprogress`
appstatus marker beside the completed marker of the same application (the runtime uploads the
completed one when Spark stops and never deletes), so the History Server sees it as completed.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable
from dataclasses import asdict, dataclass, field

from sparkpoint.runtime.store import JobRef, ObjectInfo, ObjectStore
from sparkpoint.runtime.store.layout import HistoryEntry, history_entry_of, history_prefix

from .fence import read_fence

log = logging.getLogger("sparkpoint.gc")

# What retention counts: (legacy, number), the operator's attempt or a legacy start.
Unit = tuple[bool, int]


@dataclass
class HistoryGcResult:
    kept_attempts: list[int] = field(default_factory=list)
    deleted_attempts: list[int] = field(default_factory=list)
    deleted_files: int = 0
    deleted_bytes: int = 0
    stale_markers: int = 0
    dry_run: bool = False

    def to_dict(self) -> dict:
        return asdict(self)


def unit_of(entry: HistoryEntry) -> Unit:
    return entry.legacy, entry.attempt


def kept_units(starts: dict[Unit, set[int]], retain: int, current: int) -> set[Unit]:
    """The newest `retain` attempts (by their newest start), plus every one holding a start at or
    above `current`."""
    if retain < 1:
        raise ValueError("retain must be at least 1")
    newest_first = sorted(starts, key=lambda u: max(starts[u]), reverse=True)
    return set(newest_first[:retain]) | {u for u, s in starts.items() if max(s) >= current}


def stale_markers(entries: list[tuple[ObjectInfo, HistoryEntry]]) -> list[ObjectInfo]:
    """`appstatus_X.inprogress` where `appstatus_X` of the same start and directory exists."""
    names = {(e.run, e.app_dir, e.name) for _, e in entries}
    return [i for i, e in entries if e.name.startswith("appstatus_") and e.name.endswith(".inprogress")
            and (e.run, e.app_dir, e.name.removesuffix(".inprogress")) in names]


def history_gc_pass(store: ObjectStore, job: JobRef, *, retain_attempts: int, grace_seconds: float,
                    dry_run: bool = False, clock: Callable[[], float] = time.time) -> HistoryGcResult:
    now = clock()
    current = read_fence(store, job)  # before the listing: a start claimed later is newer still
    entries = [(i, e) for i in store.list(history_prefix(job)) if (e := history_entry_of(i.key, job))]
    starts: dict[Unit, set[int]] = {}
    for _, e in entries:
        starts.setdefault(unit_of(e), set()).add(e.start)
    keep = kept_units(starts, retain_attempts, current)
    result = HistoryGcResult(kept_attempts=sorted(u[1] for u in keep), dry_run=dry_run)
    cutoff = now - grace_seconds
    doomed = [i for i, e in entries if unit_of(e) not in keep]
    for unit in sorted(set(starts) - keep):
        if all(i.last_modified < cutoff for i, e in entries if unit_of(e) == unit):
            result.deleted_attempts.append(unit[1])
    stale = stale_markers([(i, e) for i, e in entries if unit_of(e) in keep])
    for info in doomed + stale:
        if info.last_modified >= cutoff:
            continue
        if not dry_run:
            store.delete(info.key)
        if info in stale:
            result.stale_markers += 1
        else:
            result.deleted_files += 1
            result.deleted_bytes += info.size
    if result.deleted_files or result.stale_markers:
        log.info("gc history", extra={"job": str(job), "kept_attempts": result.kept_attempts,
                                      "deleted_attempts": result.deleted_attempts,
                                      "deleted_files": result.deleted_files, "deleted_bytes": result.deleted_bytes})
    return result
