"""The object store interface both backends implement, and the errors they raise.

Keys are '/'-separated and relative to the store's root (bucket + prefix, or a directory).
Implementations must make `put_if_absent` atomic: it is how manifests avoid overwriting each other.
"""

from __future__ import annotations

import abc
from collections.abc import Collection, Iterator, Sequence
from dataclasses import dataclass


class StoreError(Exception):
    """Any failure talking to the object store; the message names the problem and the store."""


class StoreUnreachableError(StoreError):
    """The endpoint did not answer (connection refused, DNS, timeout) after retries."""


class StoreAuthError(StoreError):
    """The credentials were rejected."""


class BucketNotFoundError(StoreError):
    """The bucket (or the root directory) does not exist."""


class ObjectNotFoundError(StoreError):
    """A key that must exist does not."""


@dataclass(frozen=True)
class ObjectInfo:
    key: str
    size: int
    last_modified: float  # seconds since the epoch, as the store reports it

    @property
    def mtime(self) -> float:
        return self.last_modified


class ObjectStore(abc.ABC):
    """Blob storage primitives; everything above this layer is backend-agnostic."""

    url: str  # credential-free description, safe to log

    @abc.abstractmethod
    def check(self, *, writes: bool = False) -> None:
        """Raise a clear StoreError if the store is unreachable, refuses us, or has no bucket. With
        writes=True, also prove the store can do what a writer needs (conditional creates)."""

    @abc.abstractmethod
    def put_bytes(self, key: str, data: bytes) -> None: ...

    @abc.abstractmethod
    def get_bytes(self, key: str) -> bytes:
        """Raise ObjectNotFoundError if the key is missing."""

    @abc.abstractmethod
    def put_if_absent(self, key: str, data: bytes) -> bool:
        """Create the key only if it does not exist; False if it already existed."""

    @abc.abstractmethod
    def put_file(self, key: str, path: str) -> None: ...

    @abc.abstractmethod
    def get_file(self, key: str, path: str, *, digests: Collection[str] = ()) -> dict[str, str]:
        """Download to `path` (overwritten). Return the hex digests (digests.py: "sha256",
        "crc32") of the bytes written, computed while streaming (no second read); {} if none were
        asked for. Raise ObjectNotFoundError if missing."""

    @abc.abstractmethod
    def stat(self, key: str) -> ObjectInfo | None: ...

    @abc.abstractmethod
    def list(self, prefix: str) -> Iterator[ObjectInfo]:
        """Every key starting with `prefix` (recursive), in lexicographic order."""

    def list_after(self, prefix: str, start_after: str) -> Iterator[ObjectInfo]:
        """The keys of `list(prefix)` that sort after `start_after`, in order: S3's `start-after`, so a
        listing that resumes from a cursor costs the keys after it, not every key below the prefix.
        Backends answer it without listing the keys before; this fallback does list them."""
        return (info for info in self.list(prefix) if info.key > start_after)

    def list_children(self, prefix: str) -> Sequence[str]:
        """The names one level below `prefix` (which ends in '/' or is empty) that hold keys, sorted:
        S3's delimiter listing. Backends answer it without listing every key below; this fallback
        does list them."""
        return sorted({info.key[len(prefix):].split("/", 1)[0] for info in self.list(prefix)
                       if "/" in info.key[len(prefix):]})

    @abc.abstractmethod
    def delete(self, key: str) -> None:
        """Idempotent: deleting a missing key is not an error."""

    @abc.abstractmethod
    def copy(self, src: str, dst: str) -> None:
        """Server-side copy where the backend supports it."""

    def exists(self, key: str) -> bool:
        return self.stat(key) is not None

    def __repr__(self) -> str:
        return f"{type(self).__name__}({self.url})"
