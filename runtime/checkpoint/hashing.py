"""File digests with a cache keyed by (inode, size, mtime_ns).

The freeze step hard-links the hot dir's files, so an unchanged file keeps its inode, size and
mtime across checkpoints and is never re-read. The cache is pruned to the files of the latest
checkpoint so it cannot grow without bound, and optionally persisted as JSON.
"""

from __future__ import annotations

import json
import logging
import os
import threading
from pathlib import Path
from typing import NamedTuple

from sparkpoint.runtime.store.digests import CRC32, SHA256, Digests

log = logging.getLogger("sparkpoint.checkpoint")
_CHUNK = 1024 * 1024
CACHE_VERSION = 2  # 2: sha256 and crc32 per file; a version-1 cache (sha256 only) is dropped


class FileDigests(NamedTuple):
    sha256: str  # the object's name
    crc32: str  # what a restore checks


def _read_digests(path: str | os.PathLike[str], kinds: tuple[str, ...]) -> dict[str, str]:
    digest = Digests(kinds)
    with open(path, "rb", buffering=0) as f:
        buf = bytearray(_CHUNK)
        view = memoryview(buf)
        while n := f.readinto(buf):
            digest.update(view[:n])  # hashlib and zlib release the GIL on large buffers
    return digest.hexdigests()


def file_digests(path: str | os.PathLike[str]) -> FileDigests:
    """sha256 and crc32 of a file in one read."""
    out = _read_digests(path, (SHA256, CRC32))
    return FileDigests(out[SHA256], out[CRC32])


def sha256_file(path: str | os.PathLike[str]) -> str:
    return _read_digests(path, (SHA256,))[SHA256]


def cache_key(st: os.stat_result) -> str:
    return f"{st.st_ino}:{st.st_size}:{st.st_mtime_ns}"


class HashCache:
    """Thread-safe map (inode, size, mtime_ns) -> FileDigests; `path=None` keeps it in memory only."""

    def __init__(self, path: str | os.PathLike[str] | None = None):
        self.path = Path(path) if path else None
        self._entries: dict[str, FileDigests] = {}
        self._lock = threading.Lock()
        self.hits = 0
        self.misses = 0
        if self.path and self.path.exists():
            try:
                loaded = json.loads(self.path.read_text())
                if loaded.get("version") == CACHE_VERSION:  # an older cache only costs one re-read
                    self._entries = {str(k): FileDigests(str(v[0]), str(v[1]))
                                     for k, v in loaded.get("entries", {}).items()}
            except (OSError, ValueError, AttributeError, TypeError, IndexError) as exc:
                log.warning("ignoring unreadable hash cache", extra={"path": str(self.path), "error": str(exc)})

    def __len__(self) -> int:
        return len(self._entries)

    def cached(self, st: os.stat_result) -> FileDigests | None:
        """The digests of an unchanged file, or None (counted as a hit only when found)."""
        with self._lock:
            known = self._entries.get(cache_key(st))
            if known:
                self.hits += 1
            return known

    def digests(self, path: str | os.PathLike[str], st: os.stat_result | None = None) -> FileDigests:
        st = st or os.stat(path)
        known = self.cached(st)
        if known:
            return known
        digests = file_digests(path)
        with self._lock:
            self.misses += 1
            self._entries[cache_key(st)] = digests
        return digests

    def retain_only(self, keys: set[str]) -> None:
        with self._lock:
            self._entries = {k: v for k, v in self._entries.items() if k in keys}

    def save(self) -> None:
        if not self.path:
            return
        self.path.parent.mkdir(parents=True, exist_ok=True)
        tmp = self.path.with_suffix(self.path.suffix + ".tmp")
        with self._lock:
            tmp.write_text(json.dumps({"version": CACHE_VERSION, "entries": self._entries}))
        os.replace(tmp, self.path)
