"""Reading what the store holds: checkpoint manifests, in id order."""

from __future__ import annotations

import logging

from sparkpoint.runtime.store import JobRef, ObjectNotFoundError, ObjectStore, StoreError
from sparkpoint.runtime.store.layout import (
    CHECKPOINT_ID,
    checkpoint_key,
    checkpoint_number,
    checkpoints_prefix,
    id_from_json_key,
    pending_prefix,
)
from sparkpoint.runtime.store.manifest import Manifest

from .concurrent_calls import concurrently

log = logging.getLogger("sparkpoint.checkpoint")


def list_checkpoint_ids(store: ObjectStore, job: JobRef) -> list[str]:
    """Completed checkpoint ids, oldest first."""
    ids = [id_from_json_key(o.key) for o in store.list(checkpoints_prefix(job)) if o.key.endswith(".json")]
    return sorted((i for i in ids if CHECKPOINT_ID.match(i)), key=checkpoint_number)


def load_manifest(store: ObjectStore, job: JobRef, checkpoint_id: str) -> Manifest:
    """Raises ObjectNotFoundError if missing (naming the checkpoint by its id, as users know it, not
    by its store key), ManifestError if corrupt."""
    key = checkpoint_key(job, checkpoint_id)
    try:
        raw = store.get_bytes(key)
    except ObjectNotFoundError as exc:
        raise ObjectNotFoundError(f"checkpoint {checkpoint_id!r} of job {job} not found in {store.url}") from exc
    return Manifest.from_json(raw, where=key)


def list_checkpoints(store: ObjectStore, job: JobRef) -> list[Manifest]:
    """Every completed checkpoint's manifest, oldest first."""
    return [load_manifest(store, job, cid) for cid in list_checkpoint_ids(store, job)]


def latest_checkpoint(store: ObjectStore, job: JobRef) -> Manifest | None:
    ids = list_checkpoint_ids(store, job)
    return load_manifest(store, job, ids[-1]) if ids else None


def latest_readable_checkpoint(store: ObjectStore, job: JobRef) -> Manifest | None:
    """The newest checkpoint whose manifest reads: a corrupt newest manifest (which the restore fell
    back past) must not stop new checkpoints, which take this one as their base."""
    for cid in reversed(list_checkpoint_ids(store, job)):
        try:
            return load_manifest(store, job, cid)
        except StoreError as exc:
            log.warning("checkpoint manifest unreadable; not a base", extra={"id": cid, "error": str(exc)})
    return None


def highest_checkpoint_number(store: ObjectStore, job: JobRef) -> int:
    """Highest id used by a completed or pending checkpoint (0 if none)."""
    completed, pending = concurrently(lambda: list_checkpoint_ids(store, job),
                                      lambda: [id_from_json_key(o.key) for o in store.list(pending_prefix(job))])
    numbers = [checkpoint_number(i) for i in completed]
    numbers += [checkpoint_number(m) for m in pending if CHECKPOINT_ID.match(m)]
    return max(numbers, default=0)
