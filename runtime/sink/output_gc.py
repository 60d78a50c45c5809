"""Collecting the sinks' output garbage, run by the GC sidecar after its checkpoint pass (docs/design.md §7).

What grows without it: staged files of crashed or fenced attempts and of checkpoints that failed
after uploading, batches a restore re-ran (the abandoned history's entries and files), and upsert
files a newer attempt superseded. What must stay, under the rules checkpoint objects follow:

- every entry and file of the history readers see (from the head back, lineage.py);
- for every checkpoint manifest still in the store and every savepoint: the files its `extra.sink`
  names (a crash between manifest and entry publishes them at restore) and the chain its entry
  continues (a restore of it makes that chain the history readers see);
- everything staged by the newest attempt or a newer one (its checkpoints upload before their
  manifests exist, and it names only its own staging folder, keys.batch_dir_key), and everything
  younger than the grace period;
- everything at all while a savepoint is being copied (its source checkpoint may leave retention
  during the copy, while the savepoint manifest, which names the same files, is not written yet);
- for a delta sink, what its table still needs: its current version's files and the files a commit
  removed within the Delta retention (delta_vacuum.py); of `_delta_log/`, only the files older than
  the log retention and than its newest checkpoint older than that go (delta_log_gc.py).

Entries are deleted before files, so a crash in between leaves plain orphans for the next pass.
Deleting an entry that no needed chain contains never changes the head readers pick: the head is the
newest checkpoint entry or a newer attempt's continuation, and both are in the head's own chain.
A chain that cannot be followed (a missing or cyclic entry) stops the pass for that path: nothing
of it is deleted.
"""

from __future__ import annotations

import logging
import re
import time
from collections.abc import Callable
from typing import Any

from sparkpoint.runtime.checkpoint.fence import claim_incarnation, read_fence
from sparkpoint.runtime.store import JobRef, ObjectStore
from sparkpoint.runtime.store.layout import id_from_json_key, outputs_prefix, pending_prefix

from .delta_log_gc import collect_expired_log
from .delta_vacuum import DEFAULT_RETENTION_SECONDS
from .gc_cursor import (
    INCREMENTAL_AREAS,
    Diverged,
    PassContext,
    parse_cursor,
    read_cursors,
    write_cursor,
)
from .gc_cursor_pass import incremental_pass
from .gc_full_pass import full_pass
from .gc_result import OutputGcResult
from .keys import commit_key, file_keys
from .lineage import OutputLineageError
from .upsert_snapshot import restorable

log = logging.getLogger("sparkpoint.gc")
_AREA = re.compile(r"^(?P<path>.+?)/(?P<area>_commits|_compactions|_delta_log|_snapshots|staging|upserts)/")
_AREAS = {"_commits", "_compactions", "_delta_log", "_snapshots", "staging", "upserts", "_gc"}


def output_gc_pass(store: ObjectStore, job: JobRef, *, grace_seconds: float, dry_run: bool = False,
                   clock: Callable[[], float] = time.time,
                   delta_retention_seconds: float = DEFAULT_RETENTION_SECONDS,
                   incremental: bool = True) -> OutputGcResult:
    """One output pass; `incremental=False` ignores the paths' cursors (the full pass: it decides every
    key it lists, and leaves a new cursor unless dry_run)."""
    result = OutputGcResult(dry_run=dry_run)
    now = clock()
    if any(id_from_json_key(o.key).startswith("sp-") for o in store.list(pending_prefix(job))):
        log.info("output gc skipped: a savepoint is being copied", extra={"job": str(job)})
        result.counted = False
        return result
    newest_attempt = read_fence(store, job)
    # Read once, after the fence: a newer attempt's files are spared by it. The upsert points come from
    # the same read: a checkpoint made after it has a higher batch and one deleted after it only keeps more.
    restorable_manifests, savepoints = restorable(store, job)
    manifests = sections_of(restorable_manifests,
                            attached(store, job, savepoints, claim_incarnation(store, job, newest_attempt)))
    points = [(p.attempt, p.batch_id) for p in [*restorable_manifests, *savepoints]]
    ctx = PassContext(store, job, now, grace_seconds, dry_run, newest_attempt, manifests, read_cursors(store, job))
    for path, names in sorted(sink_paths(store, job).items()):
        # A transactional or delta sink's path with a cursor: only what changed since the last pass
        # (gc_cursor.py; a Delta log's commits since the last pass, delta_cursor.py)
        transactional = names <= INCREMENTAL_AREAS
        retention = delta_retention_seconds if "_delta_log" in names else None
        if retention is not None:  # the expired Delta log first: the pass below lists what is left
            collect_expired_log(ctx, path, result, retention)
        if transactional and incremental and (cursor := parse_cursor(ctx.cursors.get(path))) is not None:
            try:
                write_cursor(ctx, path, incremental_pass(ctx, path, cursor, result, retention))
                continue
            except (Diverged, OutputLineageError) as exc:  # raised before anything was deleted
                log.info("output gc pass of a path is full", extra={"job": str(job), "path": path,
                                                                    "reason": str(exc)})
        full_pass(ctx, path, names, result, transactional=transactional,
                  delta_retention_seconds=delta_retention_seconds, points=points)
    log.info("output gc pass", extra={"job": str(job), "deleted_entries": len(result.deleted_entries),
                                      "deleted_files": result.deleted_files, "deleted_bytes": result.deleted_bytes,
                                      "dry_run": dry_run})
    return result


def sink_paths(store: ObjectStore, job: JobRef) -> dict[str, set[str]]:
    """Every sink path under the job's outputs/ -> the areas it holds, from delimiter listings (a
    path is a folder holding an area; a path may be nested, e.g. `a/b`)."""
    out: dict[str, set[str]] = {}

    def visit(prefix: str, rel: str) -> None:
        names = store.list_children(prefix)
        if (areas := {n for n in names if n in _AREAS}) and rel:
            out[rel] = areas
        for name in names:
            if name not in _AREAS:
                visit(f"{prefix}{name}/", f"{rel}/{name}" if rel else name)

    visit(outputs_prefix(job), "")
    return out


def sink_sections(store: ObjectStore, job: JobRef, incarnation: str | None) -> list[tuple[str, dict[str, Any]]]:
    """(entry id, extra.sink) of every checkpoint manifest in the store and every attached savepoint."""
    manifests, savepoints = restorable(store, job)
    return sections_of(manifests, attached(store, job, savepoints, incarnation))


def attached(store: ObjectStore, job: JobRef, savepoints: list[Any], incarnation: str | None) -> list[Any]:
    """The savepoints whose restore would continue an output history. A savepoint of another job of
    this name (`incarnation`: the current one's uid) whose entries or files are gone (gc.onDelete:
    delete) is detached: its restore starts a new history (transactional.py, `_not_republished`), so
    it needs nothing of the output and bounds nothing. The current job's points keep the strict rule:
    a missing entry there is an error, not a reason to collect."""
    out = []
    for sp in savepoints:
        sink = (sp.extra or {}).get("sink")
        own = (sink or {}).get("incarnation") or sp.job_uid
        if sink and incarnation is not None and own and own != incarnation:
            path = str(sink.get("path", "default")).strip("/")
            previous = sink.get("previous")
            if (previous is not None and not store.exists(commit_key(job, path, previous))) or not all(
                    store.exists(k) for f in sink.get("files", []) for k in file_keys(f)):
                continue
        out.append(sp)
    return out


def sections_of(manifests: list[Any], savepoints: list[Any]) -> list[tuple[str, dict[str, Any]]]:
    out = []
    for manifest in manifests:
        if sink := (manifest.extra or {}).get("sink"):
            out.append((manifest.id, sink))
    for savepoint in savepoints:
        if sink := (savepoint.extra or {}).get("sink"):
            out.append((savepoint.source_checkpoint or savepoint.id, sink))
    return out
