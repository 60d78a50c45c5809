"""File hashing with a cache keyed by (inode, size, mtime_ns).

The freeze step hard-links the hot dir's files, so an unchanged file keeps its inode, size and
mtime across checkpoints and is never re-read. The cache is pruned to the files of the latest
checkpoint so it cannot grow without bound, and optionally persisted as JSON.
"""

from __future__ import annotations

import hashlib
import json
import logging
import os
import threading
from pathlib import Path

log = logging.getLogger("sparkpoint.checkpoint")
_CHUNK = 1024 * 1024


def sha256_file(path: str | os.PathLike[str]) -> str:
    digest = hashlib.sha256()
    with open(path, "rb", buffering=0) as f:
        buf = bytearray(_CHUNK)
        view = memoryview(buf)
        while n := f.readinto(buf):
            digest.update(view[:n])  # hashlib releases the GIL on large buffers
    return digest.hexdigest()


def cache_key(st: os.stat_result) -> str:
    return f"{st.st_ino}:{st.st_size}:{st.st_mtime_ns}"


class HashCache:
    """Thread-safe map (inode, size, mtime_ns) -> sha256; `path=None` keeps it in memory only."""

    def __init__(self, path: str | os.PathLike[str] | None = None):
        self.path = Path(path) if path else None
        self._entries: dict[str, str] = {}
        self._lock = threading.Lock()
        self.hits = 0
        self.misses = 0
        if self.path and self.path.exists():
            try:
                loaded = json.loads(self.path.read_text())
                self._entries = {str(k): str(v) for k, v in loaded.get("entries", {}).items()}
            except (OSError, ValueError, AttributeError) as exc:
                log.warning("ignoring unreadable hash cache", extra={"path": str(self.path), "error": str(exc)})

    def __len__(self) -> int:
        return len(self._entries)

    def hash(self, path: str | os.PathLike[str], st: os.stat_result | None = None) -> str:
        st = st or os.stat(path)
        key = cache_key(st)
        with self._lock:
            known = self._entries.get(key)
            if known:
                self.hits += 1
                return known
        digest = sha256_file(path)
        with self._lock:
            self.misses += 1
            self._entries[key] = digest
        return digest

    def retain_only(self, keys: set[str]) -> None:
        with self._lock:
            self._entries = {k: v for k, v in self._entries.items() if k in keys}

    def save(self) -> None:
        if not self.path:
            return
        self.path.parent.mkdir(parents=True, exist_ok=True)
        tmp = self.path.with_suffix(self.path.suffix + ".tmp")
        with self._lock:
            tmp.write_text(json.dumps({"version": 1, "entries": self._entries}))
        os.replace(tmp, self.path)
