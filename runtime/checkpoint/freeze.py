"""The synchronous phase of a checkpoint: hard-link a crash-consistent restart set (DESIGN.md §4).

Spark writes the hot dir every micro-batch. A restart after committed batch C needs:
`metadata`, `offsets/` and `commits/` up to C, `sources/`, and for every state store directory the
newest snapshot of a version <= C+1 plus the changelogs/deltas after it up to C+1 (RocksDB
snapshots also need the SST files their zip lists). Spark writes every one of those files
atomically (temp file + rename), so a file visible under its final name is complete.

Order is what makes the set crash-consistent without pausing Spark: `commits/` is read first, so
every state file of versions <= C+1 already exists; files of the running batch (C+2 and up) are
ignored. Nothing here waits for the running batch. Hard links share the inode, so a file Spark
later deletes from the hot dir stays readable in the freeze dir until the upload is done.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import time
import zipfile
from dataclasses import dataclass
from pathlib import Path

_VERSIONED = re.compile(r"^(\d+)(?:_[A-Za-z0-9-]+)?\.(zip|changelog|delta|snapshot)$")
_SNAPSHOT_KINDS = ("zip", "snapshot")
_BATCH_FILE = re.compile(r"^\d+$")


class FreezeError(Exception):
    """The hot dir has no restartable state (nothing committed yet, or a needed file is missing)."""


@dataclass(frozen=True)
class FreezeResult:
    batch_id: int  # the committed batch C a restart from this set resumes after
    files: list[str]  # relative '/'-separated paths linked into the freeze dir
    seconds: float


def _is_temp(name: str) -> bool:
    # Hadoop's checksum sidecars (.x.crc) and in-flight temp files are never part of a checkpoint.
    return name.startswith(".") or name.endswith((".tmp", ".crc")) or name.startswith("_temporary")


def latest_committed_batch(hot_dir: str | os.PathLike[str]) -> int | None:
    """The highest batch id with a commit file, or None when nothing has committed yet."""
    try:
        names = os.listdir(Path(hot_dir) / "commits")
    except FileNotFoundError:
        return None
    batches = [int(n) for n in names if _BATCH_FILE.match(n)]
    return max(batches, default=None)


def _log_files_up_to(hot: Path, sub: str, batch: int) -> list[str]:
    try:
        names = os.listdir(hot / sub)
    except FileNotFoundError:
        return []
    return [f"{sub}/{n}" for n in names if _BATCH_FILE.match(n) and int(n) <= batch]


def _all_files(hot: Path, sub: str) -> list[str]:
    out = []
    for root, dirs, files in os.walk(hot / sub):
        dirs[:] = [d for d in dirs if not _is_temp(d)]
        rel_root = Path(root).relative_to(hot).as_posix()
        out.extend(f"{rel_root}/{f}" for f in files if not _is_temp(f))
    return out


def _referenced_ssts(zip_path: Path) -> list[str]:
    """The SST file names (under SSTs/) a RocksDB snapshot zip needs, from its `metadata` entry."""
    try:
        with zipfile.ZipFile(zip_path) as zf:
            text = zf.read("metadata").decode()
    except (KeyError, zipfile.BadZipFile, OSError) as exc:
        raise FreezeError(f"unreadable RocksDB snapshot {zip_path}: {exc}") from None
    body = text.split("\n", 1)[1] if text.startswith("v") else text  # first line is the format ("v1")
    return [f["dfsSstFileName"] for f in json.loads(body).get("sstFiles", [])]


def _state_dir_files(hot: Path, rel_dir: str, names: list[str], max_version: int) -> list[str]:
    """Newest snapshot <= max_version in one store directory, and every changelog/delta after it."""
    versioned: list[tuple[int, str, str]] = []
    for name in names:
        m = _VERSIONED.match(name)
        if m and int(m.group(1)) <= max_version:
            versioned.append((int(m.group(1)), m.group(2), name))
    snapshots = [v for v, kind, _ in versioned if kind in _SNAPSHOT_KINDS]
    base = max(snapshots, default=0)
    out = []
    for version, kind, name in versioned:
        if (kind in _SNAPSHOT_KINDS and version == base) or (kind not in _SNAPSHOT_KINDS and version > base):
            out.append(f"{rel_dir}/{name}")
            if kind == "zip":
                out.extend(f"{rel_dir}/SSTs/{sst}" for sst in _referenced_ssts(hot / rel_dir / name))
    return out


def _state_files(hot: Path, batch: int) -> list[str]:
    """Every state file a restart after `batch` needs (state version = batch + 1)."""
    out: list[str] = []
    for root, dirs, files in os.walk(hot / "state"):
        dirs[:] = [d for d in dirs if not _is_temp(d) and d != "SSTs"]
        rel_root = Path(root).relative_to(hot).as_posix()
        plain = [f for f in files if not _is_temp(f)]
        if "/_metadata" in f"/{rel_root}/" or rel_root.endswith("_metadata"):
            out.extend(f"{rel_root}/{f}" for f in plain)  # operator and schema metadata
            continue
        versioned = [f for f in plain if _VERSIONED.match(f)]
        out.extend(_state_dir_files(hot, rel_root, versioned, batch + 1))
        out.extend(f"{rel_root}/{f}" for f in plain if not _VERSIONED.match(f))
    return out


def restart_set(hot_dir: str | os.PathLike[str], batch: int) -> list[str]:
    """Relative paths of the files a restart after committed `batch` needs. Pure listing, no copies."""
    hot = Path(hot_dir)
    files = ["metadata"]
    files += _log_files_up_to(hot, "offsets", batch)
    files += _log_files_up_to(hot, "commits", batch)
    files += _all_files(hot, "sources")
    files += _state_files(hot, batch)
    return files


def required_files(batch: int) -> list[str]:
    """Files without which a restart after `batch` is impossible (checked by local recovery too)."""
    return ["metadata", f"offsets/{batch}", f"commits/{batch}"]


def freeze(hot_dir: str | os.PathLike[str], freeze_dir: str | os.PathLike[str]) -> FreezeResult:
    """Hard-link the restart set of the latest committed batch into `freeze_dir` (same filesystem).

    Raises FreezeError when nothing is committed yet or a required file is missing.
    """
    started = time.perf_counter()
    hot, dest = Path(hot_dir), Path(freeze_dir)
    batch = latest_committed_batch(hot)  # commits/ first: see the module docstring
    if batch is None:
        raise FreezeError(f"no committed batch in {hot} yet")
    files = restart_set(hot, batch)
    required = set(required_files(batch))
    linked: list[str] = []
    made_dirs: set[Path] = set()
    try:
        for rel in files:
            target = dest / rel
            if target.parent not in made_dirs:
                target.parent.mkdir(parents=True, exist_ok=True)
                made_dirs.add(target.parent)
            try:
                os.link(hot / rel, target)
            except FileNotFoundError:
                # Spark's maintenance may purge an old log entry between listing and linking; only
                # the files a restart reads must be present.
                if rel in required or rel.startswith("state/"):
                    raise FreezeError(f"hot dir file vanished while freezing: {rel}") from None
                continue
            linked.append(rel)
        missing = required - set(linked)
        if missing:
            raise FreezeError(f"hot dir {hot} lacks {sorted(missing)} for batch {batch}")
    except BaseException:
        shutil.rmtree(dest, ignore_errors=True)
        raise
    return FreezeResult(batch_id=batch, files=sorted(linked), seconds=time.perf_counter() - started)


def check_restartable(hot_dir: str | os.PathLike[str]) -> int:
    """Validate a hot dir for local recovery; return its committed batch or raise FreezeError.

    Checks what Spark reads first on restart: the query metadata, the latest commit and its
    offsets (parseable), and every state file of the restart set.
    """
    hot = Path(hot_dir)
    batch = latest_committed_batch(hot)
    if batch is None:
        raise FreezeError(f"{hot} has no committed batch")
    for rel in required_files(batch):
        path = hot / rel
        try:
            text = path.read_text()
        except (OSError, UnicodeDecodeError) as exc:
            raise FreezeError(f"{hot}: cannot read {rel}: {exc}") from None
        if rel != "metadata" and not text.startswith("v"):
            raise FreezeError(f"{hot}: {rel} is not a Spark log entry")
    for rel in restart_set(hot, batch):
        if not (hot / rel).is_file():
            raise FreezeError(f"{hot}: state file {rel} is missing")
    return batch
