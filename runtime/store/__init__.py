"""Object store backends (S3/MinIO and a local directory), the key layout and manifests.

    store = open_store("s3://bucket/prefix")   # endpoint + credentials from the environment
    store = open_store("file:///abs/path")
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from urllib.parse import urlparse

from .base import (
    BucketNotFoundError,
    ObjectInfo,
    ObjectNotFoundError,
    ObjectStore,
    StoreAuthError,
    StoreError,
    StoreUnreachableError,
)
from .directory import DirectoryStore
from .layout import (
    JobRef,
    check_savepoint_name,
    checkpoints_prefix,
    history_prefix,
    lineage_prefix,
    objects_prefix,
    outputs_prefix,
    pending_prefix,
    savepoint_manifest_key,
    savepoints_prefix,
)
from .manifest import FileEntry, Manifest, ManifestError, PendingMarker, Totals

# The store's public surface (one of the runtime's facades, docs/architecture.md): the operator and
# the savepoint code import these names from here, never the modules behind them.
__all__ = [
    "BucketNotFoundError", "DirectoryStore", "FileEntry", "JobRef", "Manifest", "ManifestError",
    "ObjectInfo", "ObjectNotFoundError", "ObjectStore", "PendingMarker", "StoreAuthError",
    "StoreError", "StoreUnreachableError", "Totals", "open_store",
    "CREDENTIAL_KEYS", "ENDPOINT_ENV", "REGION_ENV", "SECRET_KEYS",
    "check_savepoint_name", "checkpoints_prefix", "history_prefix", "lineage_prefix", "objects_prefix", "outputs_prefix",
    "pending_prefix", "savepoint_manifest_key", "savepoints_prefix",
]

ENDPOINT_ENV = "SPARKPOINT_S3_ENDPOINT"
REGION_ENV = "AWS_REGION"
CREDENTIAL_KEYS = ("AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY")
# What a storage Secret may hold (the one list: the pods' env, the operator's and the savepoints'
# store clients all read these keys and no others).
SECRET_KEYS = (*CREDENTIAL_KEYS, ENDPOINT_ENV, REGION_ENV)


def open_store(url: str, *, env: Mapping[str, str] | None = None, max_connections: int = 32) -> ObjectStore:
    """Open `s3://bucket[/prefix]` or `file:///abs/path`. No network call happens here: call
    `store.check()` to fail fast with a clear message."""
    env = os.environ if env is None else env
    parsed = urlparse(url)
    if parsed.scheme == "file":
        if parsed.netloc not in ("", "localhost") or not parsed.path.startswith("/"):
            raise StoreError(f"file store URL must be absolute, like file:///data/checkpoints (got {url!r})")
        return DirectoryStore(parsed.path)
    if parsed.scheme == "s3":
        if not parsed.netloc:
            raise StoreError(f"s3 store URL needs a bucket, like s3://bucket/prefix (got {url!r})")
        endpoint = env.get(ENDPOINT_ENV) or env.get("AWS_ENDPOINT_URL")
        if not endpoint:
            raise StoreError(f"{ENDPOINT_ENV} is not set (e.g. http://127.0.0.1:9000) for store {url}")
        if not endpoint.startswith(("http://", "https://")):
            raise StoreError(f"{ENDPOINT_ENV} must start with http:// or https:// (got {endpoint!r})")
        access, secret = (env.get(k) for k in CREDENTIAL_KEYS)
        if not access or not secret:
            raise StoreError(f"AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY must be set for store {url}")
        from .s3 import S3Store  # imported lazily: the directory backend needs no network stack

        return S3Store(endpoint, parsed.netloc, parsed.path, access, secret,
                       region=env.get(REGION_ENV), max_connections=max_connections)
    raise StoreError(f"unsupported store URL {url!r}: use s3://bucket/prefix or file:///path")
