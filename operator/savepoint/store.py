"""The store side of StreamingJobSavepoints: read a savepoint's manifest, copy the latest checkpoint
into a savepoint, delete a savepoint's data. The store is opened the one way the operator opens a
job's store (store_view.open_job_store, through StoreFacts).

Blocking calls (the store client is synchronous); the handlers run them in a thread.
"""

from __future__ import annotations

from sparkpoint.runtime.checkpoint import create_savepoint, delete_savepoint
from sparkpoint.runtime.store import JobRef, Manifest, ObjectStore, StoreError, savepoint_manifest_key

from ..store.view import StoreAccessError
from .decide import Stored


def read_stored(store: ObjectStore, job: JobRef, name: str) -> Stored | None:
    key = savepoint_manifest_key(job, name)
    try:
        if store.stat(key) is None:
            return None
        manifest = Manifest.from_json(store.get_bytes(key), where=key)
    except StoreError as err:
        raise StoreAccessError(f"cannot read {key}: {err}") from None
    return stored_of(manifest)


def stored_of(manifest: Manifest) -> Stored:
    return Stored(checkpoint=manifest.source_checkpoint, size_bytes=manifest.totals.bytes,
                  completed_at=manifest.completion_time.isoformat())


def copy_latest(store: ObjectStore, job: JobRef, name: str) -> Stored:
    """Make savepoint `name` from the job's latest completed checkpoint (server-side copies)."""
    return stored_of(create_savepoint(store, job, name))


def delete_data(store: ObjectStore, job: JobRef, name: str) -> int:
    """Delete the savepoint's manifest and objects; idempotent. Returns the keys deleted."""
    return delete_savepoint(store, job, name)
