"""The store side of StreamingJobSavepoints: open the job's store with the credentials of its Secret,
read a savepoint's manifest, copy the latest checkpoint into a savepoint, delete a savepoint's data.

Blocking calls (the store client is synchronous); the handlers run them in a thread. Credentials
live only in the env mapping handed to open_store, never in a message, log line or status.
"""

from __future__ import annotations

import base64

from sparkpoint.operator.savepoint_model import StorageRef
from sparkpoint.operator.savepoints import Stored
from sparkpoint.runtime.checkpoint.savepoint import create_savepoint, delete_savepoint
from sparkpoint.runtime.config import JobSpec
from sparkpoint.runtime.store import JobRef, ObjectStore, StoreError, open_store
from sparkpoint.runtime.store.layout import savepoint_manifest_key
from sparkpoint.runtime.store.manifest import Manifest

CREDENTIAL_KEYS = ("AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY")
ENDPOINT_KEY = "SPARKPOINT_S3_ENDPOINT"


class StoreAccessError(Exception):
    """The store cannot be opened or read; the message is safe to show (no credentials)."""


def storage_of(spec: JobSpec) -> StorageRef | None:
    storage = spec.checkpoint.storage
    if storage is None:
        return None
    return StorageRef(url=storage.url, endpoint=storage.endpoint,
                      secret_name=storage.secret_ref.name if storage.secret_ref else None,
                      gc_secret_name=spec.gc.secret_ref.name if spec.gc.secret_ref else None)


def decode_secret(data: dict[str, str] | None) -> dict[str, str]:
    """A Secret's `data` (base64 values) -> the keys this module uses, decoded."""
    out = {}
    for key in (*CREDENTIAL_KEYS, ENDPOINT_KEY):
        raw = (data or {}).get(key)
        if raw:
            out[key] = base64.b64decode(raw).decode()
    return out


def store_env(storage: StorageRef, secret: dict[str, str]) -> dict[str, str]:
    """The environment open_store reads: the Secret's endpoint wins over the spec's, as in the pod."""
    env = {k: v for k, v in secret.items() if k in CREDENTIAL_KEYS}
    endpoint = secret.get(ENDPOINT_KEY) or storage.endpoint
    if endpoint:
        env[ENDPOINT_KEY] = endpoint
    return env


def open_job_store(storage: StorageRef, secret: dict[str, str]) -> ObjectStore:
    try:
        return open_store(storage.url, env=store_env(storage, secret), max_connections=8)
    except StoreError as err:  # the messages name variables and URLs, not their secret values
        raise StoreAccessError(str(err)) from None


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

