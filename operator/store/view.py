"""What the operator reads from the store: recent checkpoint manifests and the savepoints.

The store is opened with the credentials of the Secret named by spec.checkpoint.storage.secretRef,
passed as an environment mapping to open_store and never logged or copied anywhere else. All
calls are blocking (the store clients are synchronous): run them in a thread.
"""

from __future__ import annotations

import os
from collections.abc import Callable
from typing import Any

from sparkpoint.runtime.checkpoint import list_checkpoint_ids, load_manifest, record_id_floor
from sparkpoint.runtime.spec import JobSpec
from sparkpoint.runtime.store import (
    CREDENTIAL_KEYS,
    ENDPOINT_ENV,
    SECRET_KEYS,
    JobRef,
    Manifest,
    ObjectStore,
    StoreError,
    checkpoints_prefix,
    history_prefix,
    lineage_prefix,
    objects_prefix,
    open_store,
    outputs_prefix,
    pending_prefix,
    savepoints_prefix,
)

from ..decisions.model import CheckpointFact
from ..decisions.observe import fact_from_manifest
from .ref import StorageRef

RECENT_MANIFESTS = 10
MAX_SAVEPOINTS = 20


class StoreAccessError(Exception):
    """The store cannot be opened or read; the message is safe to show (no credentials)."""


class SecretMissing(StoreAccessError):
    """The Secret that holds the store's credentials does not exist (any more)."""


def storage_of(spec: JobSpec) -> StorageRef | None:
    """Where a job's data lives and which Secrets open it (None: the demo's pod-local directory)."""
    storage = spec.checkpoint.storage
    if storage is None:
        return None
    return StorageRef(url=storage.url, endpoint=storage.endpoint,
                      secret_name=storage.secret_ref.name if storage.secret_ref else None,
                      gc_secret_name=spec.gc.secret_ref.name if spec.gc.secret_ref else None)


def secret_for(storage: StorageRef, deletes: bool) -> tuple[str | None, str]:
    """(Secret name, the spec field naming it): spec.gc.secretRef's for whatever deletes, when set."""
    if deletes and storage.gc_secret_name:
        return storage.gc_secret_name, "spec.gc.secretRef"
    return storage.secret_name, "spec.checkpoint.storage.secretRef"


def store_env(storage: StorageRef, secret: dict[str, str] | None) -> dict[str, str]:
    """The environment open_store reads, as the job's pod gets it (builders): the Secret's keys
    (SECRET_KEYS), the spec's endpoint winning over the Secret's (what a manifest says wins)."""
    env = {k: v for k, v in (secret or {}).items() if k in SECRET_KEYS}
    if storage.endpoint:
        env[ENDPOINT_ENV] = storage.endpoint
    return env


def open_job_store(storage: StorageRef, secret: dict[str, str] | None, max_connections: int = 4, *,
                   own_identity: bool = False) -> ObjectStore:
    """The one way the operator opens a job's store. The operator shares one client between the
    jobs on the same store and credentials: max_connections = its store threads. With a Secret, its
    keys only; without one, the operator's own cloud identity when `own_identity`, else refused."""
    env = store_env(storage, secret)
    if own_identity and secret is None:
        # The operator's own environment supplies the identity (its token file, container or
        # instance credentials) and the region; the spec's endpoint still wins.
        env = {**{k: v for k, v in os.environ.items() if k.startswith("AWS_") and k not in CREDENTIAL_KEYS}, **env}
    try:
        return open_store(storage.url, env=env, max_connections=max_connections, ambient=own_identity)
    except StoreError as err:  # the messages name variables and URLs, not their values
        raise StoreAccessError(str(err)) from None


def checkpoint_fact(store: ObjectStore, job: JobRef, cid: str) -> CheckpointFact:
    return fact_from_manifest(load_manifest(store, job, cid))


def recent_checkpoints(store: ObjectStore, job: JobRef,
                       read_fact: Callable[[ObjectStore, JobRef, str], CheckpointFact] = checkpoint_fact,
                       ) -> list[CheckpointFact]:
    """The newest completed checkpoints, oldest first (corrupt manifests are skipped: the runtime
    and GC report those; status only lists what can be restored). A completed manifest never
    changes, so `read_fact` may be a cached checkpoint_fact (store/facts.py)."""
    facts = []
    for cid in list_checkpoint_ids(store, job)[-RECENT_MANIFESTS:]:
        try:
            facts.append(read_fact(store, job, cid))
        except Exception:  # noqa: BLE001 - deleted by GC meanwhile, or corrupt
            continue
    return facts


def savepoints(store: ObjectStore, job: JobRef) -> list[dict[str, Any]]:
    """Savepoints however they were taken (nonce, StreamingJobSavepoint, suspend, upgrade), newest
    MAX_SAVEPOINTS, oldest first."""
    prefix = savepoints_prefix(job)
    keys = [o for o in store.list(prefix)
            if o.key[len(prefix):].count("/") == 1 and o.key.endswith("/manifest.json")]
    keys.sort(key=lambda o: o.last_modified)
    found = []
    for info in keys[-MAX_SAVEPOINTS:]:
        try:
            m = Manifest.from_json(store.get_bytes(info.key), where=info.key)
        except Exception:  # noqa: BLE001 - being deleted, or corrupt
            continue
        found.append({"name": info.key[len(prefix):].split("/", 1)[0], "checkpoint": m.source_checkpoint,
                      "batch": m.batch_id, "bytes": m.totals.bytes,
                      "completedAt": m.completion_time.isoformat().replace("+00:00", "Z")})
    return found


def delete_checkpoints(store: ObjectStore, job: JobRef) -> int:
    """gc.onDelete=delete: all the job's data, its sinks' outputs first, then its checkpoints,
    pending markers, shared objects, Spark's event logs (history/) and last the lineage records
    describing them. A later job of the same name then starts from nothing (kept lineage records would
    say its restoreFrom was applied), but its checkpoint ids continue above this job's (recorded first
    in checkpoint-ids.json, runtime/checkpoint/id_floor.py). Kept: savepoints
    (self-contained, deleted only on request; restoring one starts a new output history after it) and
    the fence (attempt numbers keep growing across jobs of a name, so a zombie stays fenced)."""
    record_id_floor(store, job)  # first: the next job of the name numbers its checkpoints above these
    deleted = 0
    # Outputs first: a deletion cut short then leaves checkpoints without output (a new job resumes
    # them and starts a new output history), never output whose ids a new job's checkpoints reuse.
    for prefix in (outputs_prefix(job), checkpoints_prefix(job), pending_prefix(job), objects_prefix(job),
                   history_prefix(job), lineage_prefix(job)):
        for info in list(store.list(prefix)):
            store.delete(info.key)
            deleted += 1
    return deleted
