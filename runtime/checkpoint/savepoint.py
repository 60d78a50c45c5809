"""Savepoints: self-contained copies of a checkpoint under savepoints/<name>/ (never GC'd).

While copying, a pending marker `pending/sp-<name>.json` keeps the source objects live for GC.
The savepoint's manifest is written last, with a conditional put, so its existence means complete.
"""

from __future__ import annotations

import logging
from concurrent.futures import ThreadPoolExecutor

from sparkpoint.runtime.store import JobRef, ObjectStore, StoreError
from sparkpoint.runtime.store.layout import (
    check_savepoint_name,
    object_key,
    pending_key,
    savepoint_manifest_key,
    savepoint_object_key,
    savepoint_root,
    savepoints_prefix,
)
from sparkpoint.runtime.store.manifest import Manifest, PendingMarker, utcnow

from .catalog import latest_checkpoint, load_manifest
from .fence import read_fence

log = logging.getLogger("sparkpoint.checkpoint")


class SavepointError(StoreError):
    """A savepoint could not be created (no source, name taken)."""


def load_savepoint(store: ObjectStore, job: JobRef, name: str) -> Manifest:
    key = savepoint_manifest_key(job, name)
    return Manifest.from_json(store.get_bytes(key), where=key)


def list_savepoints(store: ObjectStore, job: JobRef) -> list[Manifest]:
    """Completed savepoints, oldest first."""
    prefix = savepoints_prefix(job)
    found = []
    for info in store.list(prefix):
        rest = info.key[len(prefix):]
        if rest.count("/") == 1 and rest.endswith("/manifest.json"):
            found.append(Manifest.from_json(store.get_bytes(info.key), where=info.key))
    return sorted(found, key=lambda m: m.completion_time)


def create_savepoint(store: ObjectStore, job: JobRef, name: str, checkpoint_id: str | None = None,
                     *, workers: int = 8) -> Manifest:
    """Copy a checkpoint (default: the latest) into savepoint `name` with server-side copies."""
    check_savepoint_name(name)
    if store.stat(savepoint_manifest_key(job, name)):
        raise SavepointError(f"savepoint {name!r} of job {job} already exists")
    source = load_manifest(store, job, checkpoint_id) if checkpoint_id else latest_checkpoint(store, job)
    if source is None:
        raise SavepointError(f"job {job} has no completed checkpoint to take a savepoint from")
    shas = sorted(source.shas())
    marker_key = pending_key(job, f"sp-{name}")
    marker = PendingMarker(id=f"sp-{name}", kind="savepoint", attempt=read_fence(store, job),
                           created=utcnow(), objects=shas, reuse_window_seconds=0)
    store.put_bytes(marker_key, marker.to_json())
    try:
        with ThreadPoolExecutor(max(1, workers)) as pool:
            list(pool.map(lambda sha: store.copy(object_key(job, sha), savepoint_object_key(job, name, sha)),
                          shas))
        manifest = source.model_copy(update={
            "kind": "savepoint", "id": name, "source_checkpoint": source.id, "completion_time": utcnow()})
        if not store.put_if_absent(savepoint_manifest_key(job, name), manifest.to_json()):
            raise SavepointError(f"savepoint {name!r} of job {job} was created concurrently")
    finally:
        store.delete(marker_key)
    log.info("savepoint created", extra={"job": str(job), "savepoint": name, "source": source.id,
                                         "objects": len(shas)})
    return manifest


def delete_savepoint(store: ObjectStore, job: JobRef, name: str) -> int:
    """Delete the manifest first (so a half-deleted savepoint is never listed), then its objects.
    Returns the number of keys deleted; idempotent."""
    root = savepoint_root(job, name) + "/"
    store.delete(savepoint_manifest_key(job, name))
    deleted = 1
    for info in store.list(root):
        store.delete(info.key)
        deleted += 1
    return deleted
