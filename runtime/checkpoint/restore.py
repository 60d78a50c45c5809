"""Restoring a checkpoint or savepoint into a directory, verifying every byte (docs/design.md section 5).

Files are downloaded into a staging directory next to the target and checked for size and digest
(crc32 where the manifest records one, format 3 on; sha256 before that: store/digests.py says why);
only a complete, verified tree is moved into the target. Any missing or corrupt object, or a
manifest path that would escape the target, raises RestoreError and leaves the target untouched.
"""

from __future__ import annotations

import logging
import os
import shutil
import tempfile
import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path, PurePosixPath

from sparkpoint.runtime.store import JobRef, ObjectNotFoundError, ObjectStore, StoreError
from sparkpoint.runtime.store.digests import CRC32, SHA256, Digests
from sparkpoint.runtime.store.layout import object_key, savepoint_object_key
from sparkpoint.runtime.store.manifest import FileEntry, Manifest, ManifestError

from .catalog import latest_checkpoint, load_manifest
from .savepoint import load_savepoint

log = logging.getLogger("sparkpoint.checkpoint")
Progress = Callable[[int], None]
# A verified local copy of an entry put at the path (True), or nothing done (False: download it).
# A standby's objects (service/standby.py): the restore's plan and checks stay the store's.
LocalCopy = Callable[[FileEntry, Path], bool]


class RestoreError(StoreError):
    """The restore cannot produce a complete, verified tree; nothing was written to the target.

    `reason` is a short, bounded label (a metric label): missing_manifest, corrupt_manifest,
    missing_object, corrupt_object, unsafe_manifest, target, failed_start, none_restorable, other.
    """

    def __init__(self, message: str, reason: str = "other", points: tuple[str, ...] | None = None):
        super().__init__(message)
        self.reason = reason
        # The restore points (tags such as checkpoint:chk-000005) that could not be restored, for
        # the operator to blame; () when none is at fault (a start that failed in the job's code).
        self.points = points


@dataclass
class RestoreResult:
    manifest: Manifest
    files: int
    bytes: int
    seconds: float


def safe_relative_path(path: str) -> PurePosixPath:
    """Reject absolute paths, '..', empty or '.' components, backslashes and NULs."""
    p = PurePosixPath(path)
    if (not path or p.is_absolute() or "\\" in path or "\x00" in path
            or any(part in ("", ".", "..") for part in path.split("/"))):
        raise RestoreError(f"manifest path {path!r} escapes or is not a plain relative path; refusing",
                           reason="unsafe_manifest")
    return p


def choose_manifest(store: ObjectStore, job: JobRef, checkpoint_id: str | None,
                    savepoint: str | None) -> tuple[Manifest, Callable[[str], str]]:
    """The manifest to restore and the function mapping a sha256 to its object key."""
    if checkpoint_id and savepoint:
        raise RestoreError("give a checkpoint id or a savepoint name, not both")
    try:
        if savepoint:
            return load_savepoint(store, job, savepoint), lambda sha: savepoint_object_key(job, savepoint, sha)
        if checkpoint_id:
            manifest = load_manifest(store, job, checkpoint_id)
        else:
            found = latest_checkpoint(store, job)
            if found is None:
                raise RestoreError(f"job {job} has no completed checkpoint in {store.url}", reason="missing_manifest")
            manifest = found
    except ObjectNotFoundError as exc:
        what = f"savepoint {savepoint!r}" if savepoint else f"checkpoint {checkpoint_id!r}"
        raise RestoreError(f"{what} of job {job} not found in {store.url}", reason="missing_manifest") from exc
    except ManifestError as exc:
        raise RestoreError(str(exc), reason="corrupt_manifest") from exc
    return manifest, lambda sha: object_key(job, sha)


def wanted_digests(entry: FileEntry, audit: bool = False) -> list[str]:
    """What a download of this entry checks: crc32 if it has one (format 3 on), sha256 if it has
    none or in an audit (the object's name, re-derived from its bytes)."""
    kinds = [CRC32] if entry.crc32 is not None else []
    if audit or entry.crc32 is None:
        kinds.append(SHA256)
    return kinds


def _mismatch(entry: FileEntry, found: dict[str, str], audit: bool) -> tuple[str, str] | None:
    """The first (digest, value found) that differs from the entry's record, or None."""
    for kind in wanted_digests(entry, audit):
        if found[kind] != getattr(entry, kind):
            return kind, found[kind]
    return None


def local_copy_matches(path: Path, entry: FileEntry, chunk: int = 1 << 20) -> bool:
    """A file already on disk (a standby's held object) has the entry's size and digests
    (wanted_digests, as a download is checked)."""
    if path.stat().st_size != entry.size:
        return False
    digest = Digests(wanted_digests(entry))
    with open(path, "rb") as f:
        while data := f.read(chunk):
            digest.update(data)
    return _mismatch(entry, digest.hexdigests(), audit=False) is None


def write_inline(entry: FileEntry, dest: Path) -> None:
    """An inline file (carried in its manifest) written out, after the same checks as an object's.
    Inline files are small: every digest the entry has is checked."""
    try:
        data = entry.inline_bytes()
    except ManifestError as exc:
        raise RestoreError(str(exc), reason="corrupt_manifest") from None
    digest = Digests(wanted_digests(entry, audit=True))
    digest.update(data)
    if len(data) != entry.size or _mismatch(entry, digest.hexdigests(), audit=True):
        raise RestoreError(f"inline data of {entry.path!r} does not match its size and digests (sha256 "
                           f"{entry.sha256})", reason="corrupt_manifest")
    dest.write_bytes(data)


def fetch_verified(store: ObjectStore, key: str, entry: FileEntry, dest: Path, *, audit: bool = False) -> None:
    """Download one file and check its size and digests (wanted_digests)."""
    if entry.inline:
        write_inline(entry, dest)
        return
    try:
        found = store.get_file(key, str(dest), digests=wanted_digests(entry, audit))
    except ObjectNotFoundError as exc:
        raise RestoreError(f"object {entry.sha256} of {entry.path!r} is missing from the store",
                           reason="missing_object") from exc
    size = dest.stat().st_size
    if size != entry.size:
        raise RestoreError(f"object {entry.sha256} of {entry.path!r} has {size} bytes, manifest says {entry.size}",
                           reason="corrupt_object")
    bad = _mismatch(entry, found, audit)
    if bad:
        raise RestoreError(f"object {entry.sha256} of {entry.path!r} is corrupt (its {bad[0]} is {bad[1]}, "
                           f"manifest says {getattr(entry, bad[0])})", reason="corrupt_object")


STAGING_PREFIX = ".sparkpoint-restore-"


def _prepare_target(target: Path) -> bool:
    """True if the target exists (an empty dir, perhaps a mount point); leftovers of an earlier,
    interrupted restore inside it are removed."""
    if not target.exists():
        return False
    if not target.is_dir():
        raise RestoreError(f"restore target {target} exists and is not a directory")
    for child in target.iterdir():
        if child.name.startswith(STAGING_PREFIX) and child.is_dir():
            shutil.rmtree(child, ignore_errors=True)
        else:
            raise RestoreError(f"restore target {target} is not empty; refusing to mix trees")
    return True


def restore(
    store: ObjectStore,
    job: JobRef,
    target_dir: str | os.PathLike[str],
    checkpoint_id: str | None = None,
    savepoint: str | None = None,
    workers: int = 8,
    progress: Progress | None = None,
    local: LocalCopy | None = None,
    select: Callable[[FileEntry], bool] | None = None,
) -> RestoreResult:
    """`select`: restore only the entries it accepts (the driver's share when executors fetch the state
    partitions themselves: executor_state/restore.py)."""
    started = time.perf_counter()
    target = Path(target_dir).absolute()
    manifest, key_of = choose_manifest(store, job, checkpoint_id, savepoint)
    entries = [e for e in manifest.files if select is None or select(e)]
    paths = [safe_relative_path(e.path) for e in entries]
    if len(set(paths)) != len(paths):
        raise RestoreError(f"manifest {manifest.id} lists a path twice; refusing", reason="unsafe_manifest")
    # Stage on the target's own filesystem (the target may be an emptyDir mount point), then
    # move the verified tree in with renames.
    exists = _prepare_target(target)
    if exists:
        staging = Path(tempfile.mkdtemp(prefix=STAGING_PREFIX, dir=target))
    else:
        target.parent.mkdir(parents=True, exist_ok=True)
        staging = Path(tempfile.mkdtemp(prefix=f".{target.name}{STAGING_PREFIX}", dir=target.parent))
    try:
        for p in {p.parent for p in paths}:
            (staging / p).mkdir(parents=True, exist_ok=True)

        def fetch(item: tuple[FileEntry, PurePosixPath]) -> None:
            entry, rel = item
            if entry.inline or local is None or not local(entry, staging / rel):
                fetch_verified(store, key_of(entry.sha256), entry, staging / rel)
            if progress:
                progress(entry.size)
        with ThreadPoolExecutor(max(1, workers)) as pool:
            list(pool.map(fetch, zip(entries, paths, strict=True)))
        if exists:
            if [c for c in target.iterdir() if c != staging]:
                raise RestoreError(f"restore target {target} was written to during the restore; refusing")
            for child in staging.iterdir():
                os.rename(child, target / child.name)
        else:
            try:
                os.rename(staging, target)  # atomic: the whole verified tree appears at once
            except OSError as exc:
                raise RestoreError(f"restore target {target} appeared during the restore: {exc}") from exc
    finally:
        shutil.rmtree(staging, ignore_errors=True)
    result = RestoreResult(manifest=manifest, files=len(entries), bytes=sum(e.size for e in entries),
                           seconds=round(time.perf_counter() - started, 4))
    log.info("restore completed", extra={"job": str(job), "id": manifest.id, "files": result.files,
                                         "bytes": result.bytes, "seconds": result.seconds})
    return result
