"""The synchronous phase of a checkpoint: hard-link a crash-consistent restart set (docs/design.md §4).

Spark writes the hot dir every micro-batch. A restart after committed batch C needs:
`metadata`, `offsets/` and `commits/` up to C, `sources/`, and for every state store directory the
newest snapshot of a version <= C+1 plus the changelogs/deltas after it up to C+1 (RocksDB
snapshots also need the SST files their zip lists). Spark writes every one of those files
atomically (temp file + rename), so a file visible under its final name is complete.

Order is what makes the set crash-consistent without pausing Spark: `commits/` is read first, so
every state file of versions <= C+1 already exists; files of the running batch (C+2 and up) are
ignored. Nothing here waits for the running batch. Hard links share the inode, so a file Spark
later deletes from the hot dir stays readable in the freeze dir until the upload is done.

State checkpoint format v2 (`spark.sql.streaming.stateStore.checkpointFormatVersion=2`, RocksDB):
files are named `<version>_<uuid>.changelog|zip`, and `commits/N` (log `v2`) records in
`stateUniqueIds` {operator: [[uuid, ...] per partition]} the uuid of every store's version N+1.
A re-run of a batch that never committed leaves files of the same version under another uuid, so
the version alone no longer identifies the history: the freeze follows the lineage the commit log
records (version C+1's uuid from commits/C, version C's from commits/C-1, ...) back to the newest
snapshot of that lineage, and refuses (FreezeError) when a uuid-named file it needs cannot be
placed. Stray files of abandoned re-runs are left out.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Literal

from .spark_files import SparkFileError, check_snapshot_zip, check_state_file, parse_log_entry
from .state_gaps import SNAPSHOT_KINDS as _SNAPSHOT_KINDS
from .state_gaps import VERSIONED as _VERSIONED
from .state_gaps import state_gaps

_UUID = re.compile(r"^[0-9a-fA-F]{8}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{12}$")
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
    out: list[str] = []
    for root, dirs, files in os.walk(hot / sub):
        dirs[:] = [d for d in dirs if not _is_temp(d)]
        rel_root = Path(root).relative_to(hot).as_posix()
        out.extend(f"{rel_root}/{f}" for f in files if not _is_temp(f))
    return out


def _referenced_ssts(zip_path: Path) -> list[str]:
    """The SST file names (under SSTs/) a RocksDB snapshot zip needs, from its `metadata` entry."""
    try:
        return check_snapshot_zip(zip_path)
    except SparkFileError as exc:
        raise FreezeError(str(exc)) from None


# (operator, partition, version) -> the uuids the commit log records for that state version; None
# when the commit log does not say (purged, or written without checkpoint format v2).
LineageLookup = Callable[[str, str, int], "set[str] | None"]


def commit_state_ids(hot: Path, batch: int) -> dict[str, object] | None:
    """`stateUniqueIds` of commits/<batch> (checkpoint format v2), or None."""
    try:
        found = parse_log_entry(hot / "commits" / str(batch), "commits").get("stateUniqueIds")
    except SparkFileError:
        return None
    return found if isinstance(found, dict) else None


def lineage_of(entry: Callable[[int], Mapping[str, object] | None]) -> LineageLookup:
    """A lookup over `entry(batch)`: the stateUniqueIds of commits/<batch>, asked once per batch."""
    cache: dict[int, Mapping[str, object] | None] = {}

    def ids(op: str, part: str, version: int) -> set[str] | None:
        batch = version - 1
        if batch not in cache:
            cache[batch] = entry(batch)
        by_op = cache[batch]
        try:
            found = by_op[op][int(part)]  # type: ignore[index]
        except (TypeError, KeyError, IndexError, ValueError):
            return None
        return {u for u in found if isinstance(u, str)} if isinstance(found, list) else None
    return ids


def commit_lineage(hot: Path) -> LineageLookup:
    """Reads commits/N lazily (once each) to answer which uuid is version N+1 of each store."""
    return lineage_of(lambda batch: commit_state_ids(hot, batch))


def shipped_lineage(ids_by_batch: Mapping[int, Mapping[str, object] | None]) -> LineageLookup:
    """The same lookup over commit entries' stateUniqueIds sent by the driver (an executor has no
    commits/ of its own: executor_state/report.py, PrepareRequest)."""
    return lineage_of(ids_by_batch.get)


def _v2_dir_files(hot: Path, rel_dir: str, names: list[str], max_version: int,
                  lineage: LineageLookup) -> list[str]:
    """Checkpoint format v2: the committed lineage of versions max_version, max_version-1, ... back to
    its newest snapshot (or to version 1)."""
    parts = rel_dir.split("/")
    if len(parts) < 3:
        raise FreezeError(f"{rel_dir}: uuid-named state files outside state/<operator>/<partition>")
    op, part = parts[1], parts[2]
    files: dict[tuple[int, str, str], str] = {}
    for name in names:
        m = _VERSIONED.match(name)
        if m and m.group(2):
            files[(int(m.group(1)), m.group(2), m.group(3))] = name
    have_version = {v for v, _, _ in files}
    out: list[str] = []
    for version in range(max_version, 0, -1):
        ids = lineage(op, part, version)
        if ids is None:
            if version not in have_version and not out:
                continue  # this store has no state of that version yet (nothing committed to it)
            raise FreezeError(f"{rel_dir}: commits/{version - 1} records no state unique id for operator "
                              f"{op} partition {part}; cannot place its checkpoint-format-v2 files")
        snapshot = [files[k] for k in files if k[0] == version and k[1] in ids and k[2] == "zip"]
        if snapshot:
            out.append(f"{rel_dir}/{snapshot[0]}")
            out.extend(f"{rel_dir}/SSTs/{sst}" for sst in _referenced_ssts(hot / rel_dir / snapshot[0]))
            return out
        delta = [files[k] for k in files if k[0] == version and k[1] in ids and k[2] != "zip"]
        if not delta:
            raise FreezeError(f"{rel_dir}: version {version} of the committed lineage (uuid "
                              f"{sorted(ids)}) has neither a snapshot nor a changelog")
        out.append(f"{rel_dir}/{delta[0]}")
    return out


def state_partitions(hot: Path, batch: int) -> tuple[int | None, list[str]]:
    """The state partitions the offsets log of `batch` names (None: it does not say) and the operator
    directories under state/."""
    try:
        conf = parse_log_entry(hot / "offsets" / str(batch), "offsets").get("conf") or {}
        partitions: int | None = int(conf["spark.sql.shuffle.partitions"])
    except (SparkFileError, KeyError, TypeError, ValueError, AttributeError):
        partitions = None
    try:
        operators = [d for d in os.listdir(hot / "state") if d.isdigit()]
    except FileNotFoundError:
        operators = []
    return partitions, operators


def _state_dir_files(hot: Path, rel_dir: str, names: list[str], max_version: int,
                     lineage: LineageLookup | None = None) -> list[str]:
    """Newest snapshot <= max_version in one store directory, and every changelog/delta after it."""
    tagged = [n for n in names if (m := _VERSIONED.match(n)) and m.group(2)]
    if tagged:
        if any(not _UUID.match(_VERSIONED.match(n).group(2)) for n in tagged):  # type: ignore[union-attr]
            raise FreezeError(f"{rel_dir}: state files with an unknown name tag ({sorted(tagged)[:3]}); "
                              f"refusing to guess which belong to the committed history")
        return _v2_dir_files(hot, rel_dir, names, max_version, lineage or commit_lineage(hot))
    versioned: list[tuple[int, str, str]] = []
    for name in names:
        m = _VERSIONED.match(name)
        if m and int(m.group(1)) <= max_version:
            versioned.append((int(m.group(1)), m.group(3), name))
    snapshots = [v for v, kind, _ in versioned if kind in _SNAPSHOT_KINDS]
    base = max(snapshots, default=0)
    out = []
    for version, kind, name in versioned:
        if (kind in _SNAPSHOT_KINDS and version == base) or (kind not in _SNAPSHOT_KINDS and version > base):
            out.append(f"{rel_dir}/{name}")
            if kind == "zip":
                out.extend(f"{rel_dir}/SSTs/{sst}" for sst in _referenced_ssts(hot / rel_dir / name))
    return out


# Fault injection for the reliability tests (unset in production): `SPARKPOINT_FAULT_STALE_STATE_LISTING=<n>`
# makes the first n listings of the state (a freeze's, or local recovery's check) leave the first store
# directory's changelog/delta of the restart version out, as a stale NFS listing would; state_gaps,
# which must refuse that set, is the real check.
_stale_state_listings = 0


def _stale_state_listing() -> bool:
    global _stale_state_listings
    if _stale_state_listings >= int(os.environ.get("SPARKPOINT_FAULT_STALE_STATE_LISTING") or 0):
        return False
    _stale_state_listings += 1  # listings run one at a time (the coordinator's sync phase)
    return True


# Where the state is split in the executor mode (docs/design.md §4, "Executor-side state"): a state
# partition directory `state/<operator>/<partition>` lives on the disk of the executor that runs it;
# everything else of the hot dir (logs, sources, the operators' metadata) on the driver's.
Scope = Literal["all", "driver"]
_PARTITION_DIR = re.compile(r"^state/\d+/\d+$")


def partition_dir_of(rel: str) -> str | None:
    """`state/<op>/<partition>` of a relative path inside a state partition directory, else None."""
    parts = rel.split("/")
    if len(parts) >= 3 and _PARTITION_DIR.match("/".join(parts[:3])):
        return "/".join(parts[:3])
    return None


def _walk_state(hot: Path, top: str, batch: int, lineage: LineageLookup, *,
                skip_partitions: bool = False) -> tuple[list[str], dict[str, list[str]]]:
    """The restart files under `hot/top` for state version batch + 1, and each store directory with
    its versioned names (for state_gaps). `skip_partitions`: leave the partition directories out."""
    out: list[str] = []
    stores: dict[str, list[str]] = {}
    stale = {f"{batch + 1}.changelog", f"{batch + 1}.delta"} if _stale_state_listing() else set()
    for root, dirs, files in os.walk(hot / top):
        dirs[:] = [d for d in dirs if not _is_temp(d) and d != "SSTs"]
        rel_root = Path(root).relative_to(hot).as_posix()
        if skip_partitions:  # but the schema file Spark's driver keeps in a partition's _metadata
            out.extend(f"{rel_root}/{d}/_metadata/{f}" for d in dirs if partition_dir_of(f"{rel_root}/{d}")
                       for f in _metadata_files(hot / rel_root / d / "_metadata"))
            dirs[:] = [d for d in dirs if not partition_dir_of(f"{rel_root}/{d}")]
        plain = [f for f in files if not _is_temp(f)]
        if "/_metadata" in f"/{rel_root}/" or rel_root.endswith("_metadata"):
            out.extend(f"{rel_root}/{f}" for f in plain)  # operator and schema metadata
            continue
        versioned = [f for f in plain if _VERSIONED.match(f)]
        if stale & set(versioned):
            versioned, stale = [f for f in versioned if f not in stale], set()
        if versioned:
            stores[rel_root] = versioned
        out.extend(_state_dir_files(hot, rel_root, versioned, batch + 1, lineage))
        out.extend(f"{rel_root}/{f}" for f in plain if not _VERSIONED.match(f))
    return out, stores


def _metadata_files(meta: Path) -> list[str]:
    """The files under a partition's `_metadata` (relative to it): the state schema file, which Spark's
    driver writes into partition 0's directory on its own disk (executor_state/restore.py)."""
    if not meta.is_dir():
        return []
    return sorted(p.relative_to(meta).as_posix() for p in meta.rglob("*") if p.is_file() and not _is_temp(p.name))


def _state_files(hot: Path, batch: int, scope: Scope = "all") -> list[str]:
    """Every state file a restart after `batch` needs (state version = batch + 1); the driver's scope
    leaves the partition directories out, and with them the check that every partition is there
    (the merge of the executors' reports checks that, executor_state/merge.py)."""
    out, stores = _walk_state(hot, "state", batch, commit_lineage(hot), skip_partitions=scope == "driver")
    partitions, operators = state_partitions(hot, batch) if scope == "all" else (None, [])
    if reasons := state_gaps(stores, batch + 1, partitions=partitions, operators=operators, batch=batch):
        raise FreezeError("; ".join(reasons))
    return out


def partition_restart_files(root: str | os.PathLike[str], partition_dir: str, batch: int,
                            lineage: LineageLookup | None = None) -> list[str]:
    """The files of one state partition directory (`state/<op>/<partition>` under `root`) a restart
    after committed `batch` needs; FreezeError when its chain has a gap. `lineage`: the committed
    uuids (checkpoint format v2), which an executor learns from the driver's commit log."""
    hot = Path(root)
    out, stores = _walk_state(hot, partition_dir, batch, lineage or commit_lineage(hot))
    if reasons := state_gaps(stores, batch + 1):
        raise FreezeError("; ".join(reasons))
    return out


def restart_set(hot_dir: str | os.PathLike[str], batch: int, scope: Scope = "all") -> list[str]:
    """Relative paths of the files a restart after committed `batch` needs. Pure listing, no copies.
    `scope="driver"`: the driver's share in the executor mode (no partition directories)."""
    hot = Path(hot_dir)
    files = ["metadata"]
    files += _log_files_up_to(hot, "offsets", batch)
    files += _log_files_up_to(hot, "commits", batch)
    files += _all_files(hot, "sources")
    files += _state_files(hot, batch, scope)
    return files


def required_files(batch: int) -> list[str]:
    """Files without which a restart after `batch` is impossible (checked by local recovery too)."""
    return ["metadata", f"offsets/{batch}", f"commits/{batch}"]


def link_files(src: Path, dest: Path, files: list[str], required: set[str]) -> list[str]:
    """Hard-link `files` (relative) from `src` into `dest` (same filesystem); the linked ones, sorted.
    A state file or a `required` one that vanished fails (FreezeError) and removes `dest`."""
    linked: list[str] = []
    made_dirs: set[Path] = set()
    try:
        for rel in files:
            target = dest / rel
            if target.parent not in made_dirs:
                target.parent.mkdir(parents=True, exist_ok=True)
                made_dirs.add(target.parent)
            try:
                os.link(src / rel, target)
            except FileNotFoundError:
                # Spark's maintenance may purge an old log entry between listing and linking; only
                # the files a restart reads must be present.
                if rel in required or rel.startswith("state/"):
                    raise FreezeError(f"hot dir file vanished while freezing: {rel}") from None
                continue
            linked.append(rel)
        missing = required - set(linked)
        if missing:
            raise FreezeError(f"hot dir {src} lacks {sorted(missing)}")
    except BaseException:
        shutil.rmtree(dest, ignore_errors=True)
        raise
    return sorted(linked)


def freeze(hot_dir: str | os.PathLike[str], freeze_dir: str | os.PathLike[str],
           scope: Scope = "all") -> FreezeResult:
    """Hard-link the restart set of the latest committed batch into `freeze_dir` (same filesystem).
    `scope="driver"`: the driver's share in the executor mode (restart_set).

    Raises FreezeError when nothing is committed yet or a required file is missing.
    """
    started = time.perf_counter()
    hot, dest = Path(hot_dir), Path(freeze_dir)
    batch = latest_committed_batch(hot)  # commits/ first: see the module docstring
    if batch is None:
        raise FreezeError(f"no committed batch in {hot} yet")
    linked = link_files(hot, dest, restart_set(hot, batch, scope), set(required_files(batch)))
    return FreezeResult(batch_id=batch, files=linked, seconds=time.perf_counter() - started)


def check_restartable(hot_dir: str | os.PathLike[str]) -> int:
    """Validate a hot dir for local recovery; return its committed batch or raise FreezeError.

    Checks what Spark reads on restart, as Spark would: the query metadata (JSON), the latest
    commit and offsets entries (and a planned-but-uncommitted next offsets entry, which Spark re-runs),
    parsed; every state file of the restart set present, changelogs complete lz4 block chains,
    snapshot zips readable with their SST list.
    """
    hot = Path(hot_dir)
    batch = latest_committed_batch(hot)
    if batch is None:
        raise FreezeError(f"{hot} has no committed batch")
    try:
        meta = json.loads((hot / "metadata").read_text())
        if not isinstance(meta, dict) or "id" not in meta:
            raise ValueError("no query id")
    except (OSError, ValueError) as exc:
        raise FreezeError(f"{hot}: metadata is unreadable: {exc}") from None
    try:
        parse_log_entry(hot / "commits" / str(batch), "commits")
        offsets = parse_log_entry(hot / "offsets" / str(batch), "offsets")
        if (hot / "offsets" / str(batch + 1)).exists():
            parse_log_entry(hot / "offsets" / str(batch + 1), "offsets")
        codec = str((offsets.get("conf") or {}).get("spark.sql.streaming.stateStore.compression.codec", "lz4"))
        for rel in restart_set(hot, batch):
            if rel.startswith("state/"):
                check_state_file(hot / rel, codec)
            elif not (hot / rel).is_file():
                raise FreezeError(f"{hot}: {rel} is missing")
    except SparkFileError as exc:
        raise FreezeError(f"{hot}: {exc}") from None
    return batch
