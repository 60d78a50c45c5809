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
    "CREDENTIAL_KEYS", "DEFAULT_REGION_ENV", "ENDPOINT_ENV", "REGION_ENV", "SECRET_KEYS", "STS_DURATION_ENV", "region_of", "s3_endpoint",
    "check_savepoint_name", "checkpoints_prefix", "history_prefix", "lineage_prefix", "objects_prefix", "outputs_prefix",
    "pending_prefix", "savepoint_manifest_key", "savepoints_prefix",
]

ENDPOINT_ENV = "SPARKPOINT_S3_ENDPOINT"
REGION_ENV = "AWS_REGION"
DEFAULT_REGION_ENV = "AWS_DEFAULT_REGION"
# How long STS keys of the cloud's own identity live, in seconds (checkpoint.storage.stsDuration).
STS_DURATION_ENV = "SPARKPOINT_STS_DURATION_SECONDS"
CREDENTIAL_KEYS = ("AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY")
# What a storage Secret may hold (the one list: the pods' env, the operator's and the savepoints'
# store clients all read these keys and no others).
SECRET_KEYS = (*CREDENTIAL_KEYS, ENDPOINT_ENV, REGION_ENV)


def region_of(env: Mapping[str, str]) -> str | None:
    """AWS_REGION, else AWS_DEFAULT_REGION (the AWS SDKs' order)."""
    return env.get(REGION_ENV) or env.get(DEFAULT_REGION_ENV) or None


def aws_host(service: str, region: str) -> str:
    return f"https://{service}.{region}.amazonaws.com" + (".cn" if region.startswith("cn-") else "")


def s3_endpoint(url: str, env: Mapping[str, str]) -> str:
    """SPARKPOINT_S3_ENDPOINT (or AWS_ENDPOINT_URL), else AWS S3 in the region."""
    endpoint = env.get(ENDPOINT_ENV) or env.get("AWS_ENDPOINT_URL")
    if not endpoint:
        region = region_of(env)
        if not region:
            raise StoreError(f"{ENDPOINT_ENV} is not set (e.g. http://127.0.0.1:9000), nor {REGION_ENV} or "
                             f"{DEFAULT_REGION_ENV} for AWS S3, for store {url}")
        return aws_host("s3", region)
    if not endpoint.startswith(("http://", "https://")):
        raise StoreError(f"{ENDPOINT_ENV} must start with http:// or https:// (got {endpoint!r})")
    return endpoint


def open_store(url: str, *, env: Mapping[str, str] | None = None, max_connections: int = 32,
               ambient: bool = True) -> ObjectStore:
    """Open `s3://bucket[/prefix]` or `file:///abs/path`. No network call happens here: call
    `store.check()` to fail fast with a clear message. Credentials: static keys from `env`, else
    (`ambient`) the cloud's own identity (runtime.store.credentials)."""
    env = os.environ if env is None else env
    parsed = urlparse(url)
    if parsed.scheme == "file":
        if parsed.netloc not in ("", "localhost") or not parsed.path.startswith("/"):
            raise StoreError(f"file store URL must be absolute, like file:///data/checkpoints (got {url!r})")
        return DirectoryStore(parsed.path)
    if parsed.scheme == "s3":
        if not parsed.netloc:
            raise StoreError(f"s3 store URL needs a bucket, like s3://bucket/prefix (got {url!r})")
        from .credentials import store_credentials  # lazily, as S3Store: no network stack for files

        endpoint = s3_endpoint(url, env)
        credentials = store_credentials(env, ambient=ambient)
        from .s3 import S3Store  # imported lazily: the directory backend needs no network stack

        return S3Store(endpoint, parsed.netloc, parsed.path, None, None, credentials=credentials,
                       region=region_of(env), max_connections=max_connections)
    raise StoreError(f"unsupported store URL {url!r}: use s3://bucket/prefix or file:///path")
