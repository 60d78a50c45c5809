"""Collect Spark event logs (`history/<attempt>/...`, docs/design.md §3 and §7): the GC sidecar's
part of a pass after checkpoints and outputs.

Kept: the newest `retain_attempts` attempts that have logs, and always the current attempt (the
store's fence: the newest claimed attempt, whose runtime may still be uploading) and any newer one.
Every file of the other attempts is deleted once it is older than the grace period (an attempt
that is still uploading, a fenced zombie, keeps its fresh files until a later pass). Also removed,
in kept attempts too: a `.inprogress` appstatus marker beside the completed marker of the same
application (the runtime uploads the completed one when Spark stops and never deletes), so the
History Server sees the application as completed.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable
from dataclasses import asdict, dataclass, field

from sparkpoint.runtime.store import JobRef, ObjectInfo, ObjectStore
from sparkpoint.runtime.store.layout import history_entry_of, history_prefix

from .fence import read_fence

log = logging.getLogger("sparkpoint.gc")


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


def kept_attempts(attempts: set[int], retain: int, current: int) -> set[int]:
    """The newest `retain` attempts with logs, plus the current attempt and any newer one."""
    if retain < 1:
        raise ValueError("retain must be at least 1")
    return set(sorted(attempts)[-retain:]) | {a for a in attempts if a >= current}


def stale_markers(infos: list[ObjectInfo], job: JobRef) -> list[ObjectInfo]:
    """`appstatus_X.inprogress` where `appstatus_X` of the same directory exists."""
    names = {(e[0], e[1], e[2]) for i in infos if (e := history_entry_of(i.key, job))}
    out = []
    for info in infos:
        e = history_entry_of(info.key, job)
        if e and e[2].startswith("appstatus_") and e[2].endswith(".inprogress") \
                and (e[0], e[1], e[2].removesuffix(".inprogress")) in names:
            out.append(info)
    return out


def history_gc_pass(store: ObjectStore, job: JobRef, *, retain_attempts: int, grace_seconds: float,
                    dry_run: bool = False, clock: Callable[[], float] = time.time) -> HistoryGcResult:
    now = clock()
    current = read_fence(store, job)  # before the listing: an attempt claimed later is newer still
    infos = list(store.list(history_prefix(job)))
    by_attempt: dict[int, list[ObjectInfo]] = {}
    for info in infos:
        entry = history_entry_of(info.key, job)
        if entry is not None:
            by_attempt.setdefault(entry[0], []).append(info)
    keep = kept_attempts(set(by_attempt), retain_attempts, current)
    result = HistoryGcResult(kept_attempts=sorted(keep), dry_run=dry_run)
    cutoff = now - grace_seconds
    doomed = [i for a, files in sorted(by_attempt.items()) if a not in keep for i in files]
    for a in sorted(set(by_attempt) - keep):
        if all(i.last_modified < cutoff for i in by_attempt[a]):
            result.deleted_attempts.append(a)
    stale = [i for i in stale_markers(infos, job) if history_entry_of(i.key, job)[0] in keep]  # type: ignore[index]
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
