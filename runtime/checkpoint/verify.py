"""Checking that every object a checkpoint or savepoint references exists and is intact."""

from __future__ import annotations

import tempfile
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path

from sparkpoint.runtime.store import JobRef, ObjectStore

from .restore import RestoreError, choose_manifest, fetch_verified


@dataclass
class VerifyResult:
    id: str
    objects: int
    bytes: int
    problems: list[str] = field(default_factory=list)

    @property
    def ok(self) -> bool:
        return not self.problems


def verify(store: ObjectStore, job: JobRef, checkpoint_id: str | None = None, savepoint: str | None = None,
           *, deep: bool = True, workers: int = 8) -> VerifyResult:
    """deep=True downloads every object and checks its sha256 (its name) and crc32 (what a restore
    checks); deep=False only checks existence and size.
    Files carried inline in the manifest are always checked (no request needed).
    Raises RestoreError if the manifest itself is missing or corrupt."""
    manifest, key_of = choose_manifest(store, job, checkpoint_id, savepoint)
    unique = {e.sha256: e for e in manifest.files}
    result = VerifyResult(id=manifest.id, objects=len(unique), bytes=sum(e.size for e in unique.values()))

    with tempfile.TemporaryDirectory(prefix="sparkpoint-verify-") as tmp:
        def check(entry) -> str | None:  # type: ignore[no-untyped-def]
            key = key_of(entry.sha256)
            if not deep and not entry.inline:
                info = store.stat(key)
                if info is None:
                    return f"object {entry.sha256} of {entry.path!r} is missing"
                if info.size != entry.size:
                    return f"object {entry.sha256} of {entry.path!r} has {info.size} bytes, expected {entry.size}"
                return None
            dest = Path(tmp) / entry.sha256
            try:
                fetch_verified(store, key, entry, dest, audit=True)
            except RestoreError as exc:
                return str(exc)
            finally:
                dest.unlink(missing_ok=True)
            return None
        with ThreadPoolExecutor(max(1, workers)) as pool:
            result.problems = [p for p in pool.map(check, unique.values()) if p]
    return result
