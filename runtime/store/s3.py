"""S3 / MinIO object store backend on the `minio` client.

Credentials come from the caller (open_store reads the environment) and never appear in
`url`, logs or error messages. Transient failures (connection errors, 5xx, SlowDown) are retried
with backoff; the client's own urllib3 retries are turned off so the policy lives in one place.
"""

from __future__ import annotations

import io
import os
import uuid
import xml.etree.ElementTree as ET
from collections.abc import Callable, Collection, Iterator, Sequence
from typing import TypeVar

import urllib3
from minio import Minio
from minio.commonconfig import CopySource
from minio.credentials import Provider, StaticProvider
from minio.error import InvalidResponseError, S3Error, ServerError

from .base import (
    BucketNotFoundError,
    ObjectInfo,
    ObjectNotFoundError,
    ObjectStore,
    StoreAuthError,
    StoreError,
    StoreUnreachableError,
)
from .digests import Digests
from .retry import with_retries
from .s3_listing import page_query, parse_page, parse_prefixes

T = TypeVar("T")

# Worst case per store call: attempts x (connect or read timeout) plus backoff, about 2 minutes.
CONNECT_TIMEOUT = 5.0  # seconds to open a connection
READ_TIMEOUT = 30.0  # seconds any one socket read or write may block (not the whole transfer)
PART_SIZE = 16 * 1024 * 1024  # multipart above this size; parts upload in parallel
_AUTH_CODES = {"AccessDenied", "InvalidAccessKeyId", "SignatureDoesNotMatch", "InvalidToken",
               "ExpiredToken", "AuthorizationHeaderMalformed"}
_MISSING_KEY_CODES = {"NoSuchKey", "NoSuchObject", "NoSuchVersion", "ResourceNotFound"}
_TRANSIENT_CODES = {"SlowDown", "InternalError", "ServiceUnavailable", "RequestTimeout",
                    "XMinioServerNotInitialized", "XMinioReadQuorum", "XMinioWriteQuorum",
                    "OperationTimedOut"}


def _is_transient(exc: BaseException) -> bool:
    if isinstance(exc, urllib3.exceptions.HTTPError):
        return True
    if isinstance(exc, ServerError):
        return exc.status_code >= 500
    if isinstance(exc, S3Error):
        return exc.code in _TRANSIENT_CODES
    return isinstance(exc, InvalidResponseError)


# The one key the writers' self-check creates (once per store root, then only refused creates).
CONDITIONAL_PROBE_KEY = ".sparkpoint-check/conditional-put"


class S3Store(ObjectStore):
    def __init__(
        self,
        endpoint: str,
        bucket: str,
        prefix: str,
        access_key: str | None,
        secret_key: str | None,
        *,
        credentials: Provider | None = None,
        region: str | None = None,
        max_connections: int = 32,
        attempts: int | None = None,
        connect_timeout: float = CONNECT_TIMEOUT,
        read_timeout: float = READ_TIMEOUT,
    ):
        secure = endpoint.startswith("https://")
        host = endpoint.split("://", 1)[-1].rstrip("/")
        self.bucket = bucket
        self.prefix = prefix.strip("/")
        self.endpoint, self.region = endpoint, region
        self.url = f"s3://{bucket}/{self.prefix}" + f" (endpoint {endpoint})"
        self.attempts = attempts or int(os.environ.get("SPARKPOINT_S3_ATTEMPTS", "4"))
        http = urllib3.PoolManager(
            # Every socket operation is bounded, so a frozen server (connections accepted, no answer)
            # fails a call after `read_timeout` per attempt instead of hanging it forever.
            timeout=urllib3.Timeout(connect=connect_timeout, read=read_timeout),
            maxsize=max_connections,
            retries=urllib3.Retry(total=0, connect=0, read=0, redirect=0, status=0, raise_on_status=False),
        )
        # `credentials` (runtime.store.credentials) when the keys are not static; never both.
        self.credentials = credentials or (
            StaticProvider(access_key, secret_key) if access_key and secret_key else None)
        self.client = Minio(host, credentials=self.credentials, secure=secure,
                            region=region or "us-east-1", http_client=http)

    # --- helpers ---------------------------------------------------------------------------
    def _full(self, key: str) -> str:
        if not key or key.startswith("/") or "//" in key:
            raise StoreError(f"invalid object key {key!r}")
        return f"{self.prefix}/{key}" if self.prefix else key

    def _rel(self, full: str) -> str:
        return full[len(self.prefix) + 1:] if self.prefix else full

    def _call(self, what: str, key: str | None, fn: Callable[[], T]) -> T:
        """Run one client call with retries, translating failures into clear StoreErrors."""
        try:
            return with_retries(fn, is_transient=_is_transient, attempts=self.attempts, what=what)
        except S3Error as exc:
            where = f"{what} {key!r} in {self.url}" if key else f"{what} on {self.url}"
            if exc.code == "NoSuchBucket":
                raise BucketNotFoundError(f"bucket {self.bucket!r} does not exist ({where})") from None
            if exc.code in _AUTH_CODES:
                raise StoreAuthError(f"credentials rejected by the store ({exc.code}) during {where}") from None
            if exc.code in _MISSING_KEY_CODES:
                raise ObjectNotFoundError(f"object {key!r} not found in {self.url}") from None
            raise StoreError(f"{where} failed: {exc.code}: {exc.message}") from None
        except urllib3.exceptions.HTTPError as exc:
            raise StoreUnreachableError(
                f"object store {self.url} is unreachable after {self.attempts} attempts "
                f"({type(exc).__name__})") from None
        except ServerError as exc:
            if exc.status_code >= 500:  # still failing after the retries: down or starting, not wrong
                raise StoreUnreachableError(f"object store {self.url} is unavailable after {self.attempts} "
                                            f"attempts (HTTP {exc.status_code})") from None
            raise StoreError(f"{what} on {self.url} failed: {exc}") from None
        except InvalidResponseError as exc:
            raise StoreError(f"{what} on {self.url} failed: {exc}") from None
        except ValueError as exc:  # the client validates names (e.g. bucket names) before sending
            raise StoreError(f"{what} on {self.url}: {exc}") from None

    # --- interface -------------------------------------------------------------------------
    def check(self, *, writes: bool = False) -> None:
        # A listing of one key exercises reachability, credentials and the bucket in one call.
        def probe() -> None:
            for _ in self.client.list_objects(self.bucket, prefix=f"{self.prefix}/" if self.prefix else None):
                break
        self._call("check", None, probe)
        if writes:  # readers (list, verify, restore, GC) need no write permission for the probe
            self._check_conditional_writes()

    def _check_conditional_writes(self) -> None:
        """Manifests, pending markers and attempt claims rely on `If-None-Match: *`; a server (or a
        gateway in front of it) that ignores the header would let two writers both 'create' a key.
        Prove it is honoured: a create of the one probe key (made by the first check ever, kept so
        that no delete permission is needed) with new content must be refused. The content is unique
        per call, so put_if_absent's lost-response rule (same bytes = our own write) cannot answer."""
        key = CONDITIONAL_PROBE_KEY
        try:
            first = self.put_if_absent(key, uuid.uuid4().hex.encode())
            second = self.put_if_absent(key, uuid.uuid4().hex.encode()) if first else False
        except StoreUnreachableError:
            raise
        except StoreError as exc:
            raise StoreError(f"object store {self.url} failed a conditional write (If-None-Match: *), "
                             f"which Sparkpoint needs: {exc}") from None
        if second:
            raise StoreError(
                f"object store {self.url} does not honour conditional writes (If-None-Match: *): a second "
                "create of the same key was accepted. Sparkpoint needs them to never overwrite a manifest "
                "or an attempt claim; use a server that supports them (AWS S3, MinIO since 2024)")

    def put_bytes(self, key: str, data: bytes) -> None:
        full = self._full(key)
        self._call("put", key, lambda: self.client.put_object(self.bucket, full, io.BytesIO(data), len(data)))

    def get_bytes(self, key: str) -> bytes:
        full = self._full(key)

        def get() -> bytes:
            resp = self.client.get_object(self.bucket, full)
            try:
                return resp.read()
            finally:
                resp.close()
                resp.release_conn()
        return self._call("get", key, get)

    def put_if_absent(self, key: str, data: bytes) -> bool:
        full = self._full(key)
        tries = [0]

        def put() -> bool:
            tries[0] += 1
            try:
                # S3 conditional write: the server refuses (412) if the key already exists.
                self.client._put_object(self.bucket, full, data, headers={"If-None-Match": "*"})
                return True
            except S3Error as exc:
                if exc.code in ("PreconditionFailed", "ConditionalRequestConflict"):
                    # After a retry, the existing object may be our own earlier try whose response
                    # was lost: the same bytes mean we created it.
                    return tries[0] > 1 and self._holds(full, data)
                raise
        return self._call("conditional put", key, put)

    def _holds(self, full: str, data: bytes) -> bool:
        resp = self.client.get_object(self.bucket, full)
        try:
            return resp.read() == data
        finally:
            resp.close()
            resp.release_conn()

    def put_file(self, key: str, path: str) -> None:
        full = self._full(key)
        self._call("upload", key, lambda: self.client.fput_object(
            self.bucket, full, path, part_size=PART_SIZE, num_parallel_uploads=2))

    def get_file(self, key: str, path: str, *, digests: Collection[str] = ()) -> dict[str, str]:
        full = self._full(key)

        def get() -> dict[str, str]:
            digest = Digests(digests)  # fresh per try: a retry restarts the digests
            resp = self.client.get_object(self.bucket, full)
            try:
                with open(path, "wb") as f:
                    for chunk in resp.stream(1024 * 1024):
                        digest.update(chunk)
                        f.write(chunk)
            finally:
                resp.close()
                resp.release_conn()
            return digest.hexdigests()
        return self._call("download", key, get)

    def stat(self, key: str) -> ObjectInfo | None:
        full = self._full(key)
        try:
            st = self._call("stat", key, lambda: self.client.stat_object(self.bucket, full))
        except ObjectNotFoundError:
            return None
        if st.size is None or st.last_modified is None:  # optional in the client's types; S3's HEAD has both
            raise StoreError(f"stat of {key} on {self.url}: the answer has no size or date")
        return ObjectInfo(key=key, size=st.size, last_modified=st.last_modified.timestamp())

    def list(self, prefix: str) -> Iterator[ObjectInfo]:
        full = f"{self.prefix}/{prefix}" if self.prefix else prefix
        continuation: str | None = None
        while True:  # page by page, each retried on its own
            def page(token: str | None = continuation) -> tuple[list[tuple[str, int, float]], str | None]:
                return self._listing_page(full, token, parse_page)
            entries, continuation = self._call("list", prefix or "/", page)
            for key, size, modified in entries:
                yield ObjectInfo(key=self._rel(key), size=size, last_modified=modified)
            if continuation is None:
                return

    def list_after(self, prefix: str, start_after: str) -> Iterator[ObjectInfo]:
        full = f"{self.prefix}/{prefix}" if self.prefix else prefix
        after = f"{self.prefix}/{start_after}" if self.prefix else start_after
        continuation: str | None = None
        while True:
            def page(token: str | None = continuation) -> tuple[list[tuple[str, int, float]], str | None]:
                return self._listing_page(full, token, parse_page, start_after=after)
            entries, continuation = self._call("list", prefix or "/", page)
            for key, size, modified in entries:
                yield ObjectInfo(key=self._rel(key), size=size, last_modified=modified)
            if continuation is None:
                return

    def list_children(self, prefix: str) -> Sequence[str]:
        full = f"{self.prefix}/{prefix}" if self.prefix else prefix
        names: list[str] = []
        continuation: str | None = None
        while True:
            def page(token: str | None = continuation) -> tuple[list[str], str | None]:
                return self._listing_page(full, token, parse_prefixes, delimiter="/")
            found, continuation = self._call("list", prefix or "/", page)
            names += [p[len(full):].rstrip("/") for p in found if p.startswith(full)]
            if continuation is None:
                return sorted(n for n in names if n)

    def _listing_page(self, full: str, token: str | None, parse: Callable[[bytes], T], delimiter: str = "",
                      start_after: str = "") -> T:
        """One page of a listing through the client's private request call: signed, with its region and
        error handling, but answered by s3_listing's parsers (6x less CPU per key than the client's, see there)."""
        query: dict[str, str | list[str] | tuple[str]] = {**page_query(full, token, delimiter, start_after)}
        resp = self.client._execute("GET", self.bucket, query_params=query)
        try:
            return parse(resp.data)
        except (ValueError, ET.ParseError) as exc:
            raise InvalidResponseError(resp.status, resp.headers.get("content-type"),
                                       f"unreadable listing: {exc}") from None

    def delete(self, key: str) -> None:
        full = self._full(key)
        self._call("delete", key, lambda: self.client.remove_object(self.bucket, full))

    def copy(self, src: str, dst: str) -> None:
        src_full, dst_full = self._full(src), self._full(dst)
        self._call("copy", src, lambda: self.client.copy_object(
            self.bucket, dst_full, CopySource(self.bucket, src_full)))

    def create_bucket(self) -> None:
        """Create the bucket if missing (tests and the embedded setup; production buckets are provisioned)."""
        def make() -> None:
            if not self.client.bucket_exists(self.bucket):
                self.client.make_bucket(self.bucket)
        self._call("create bucket", None, make)
