"""An executor's first step of a checkpoint: freeze and hash its own state partitions for batch C
(docs/design.md §4, "Executor-side state").

`state_root` is this executor's local copy of the checkpoint location: it holds `state/<op>/<partition>`
directories of the partitions this executor ran, on its own disk. Each is frozen as the single-process
freeze does (checkpoint/freeze.py: the newest snapshot <= C+1 and the changelogs/deltas after it, the
SST files its zip lists; a partition's _metadata, the schema file, is the driver's), by hard links, so Spark's maintenance may delete
files meanwhile. A partition whose chain has a gap is reported incomplete, not raised: it may be an old
copy of a partition that moved to another executor, which the driver's merge decides. Then every frozen
file is hashed (sha256 names the object, CRC-32 is what a restore checks) with the same cache as the
driver's (inode, size, mtime), so unchanged files are not read again.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path

from sparkpoint.runtime.checkpoint.freeze import (
    FreezeError,
    LineageLookup,
    link_files,
    partition_restart_files,
    shipped_lineage,
)
from sparkpoint.runtime.checkpoint.hashing import HashCache, cache_key
from sparkpoint.runtime.checkpoint.operation import StopCheck, no_stop
from sparkpoint.runtime.checkpoint.state_gaps import VERSIONED
from sparkpoint.runtime.checkpoint.tree import scan_tree, tree_digests

from .report import ExecutorReport, PrepareRequest, StateFile


@dataclass(frozen=True)
class Prepared:
    """What the executor keeps between its two steps: the report it sent, where the files are frozen
    and each file's stat when it was hashed (upload re-checks it)."""

    report: ExecutorReport
    freeze_dir: Path
    stats: dict[str, os.stat_result]  # relative path -> stat at hashing


def partition_dirs(state_root: Path) -> list[str]:
    """The `state/<op>/<partition>` directories under this executor's state root."""
    out = []
    for op in sorted(os.listdir(state_root / "state")) if (state_root / "state").is_dir() else []:
        if op.isdigit() and (state_root / "state" / op).is_dir():
            out += [f"state/{op}/{p}" for p in sorted(os.listdir(state_root / "state" / op), key=_number)
                    if p.isdigit() and (state_root / "state" / op / p).is_dir()]
    return out


def _number(name: str) -> int:
    return int(name) if name.isdigit() else -1


def _has_state(files: list[str]) -> bool:
    return any(VERSIONED.match(f.rsplit("/", 1)[-1]) for f in files)


def prepare(state_root: str | os.PathLike[str], request: PrepareRequest, freeze_dir: str | os.PathLike[str], *,
            executor: str, hash_cache: HashCache | None = None, hash_workers: int = 2,
            stop: StopCheck = no_stop) -> Prepared:
    """Freeze and hash this executor's partitions' restart set for a restart after the request's
    committed batch (its lineage places checkpoint-format-v2 files)."""
    root, dest, batch = Path(state_root), Path(freeze_dir), request.batch
    lineage: LineageLookup = shipped_lineage(request.lineage)
    files: list[str] = []
    covered: list[str] = []
    incomplete: dict[str, str] = {}
    for part in partition_dirs(root):
        try:
            found = partition_restart_files(root, part, batch, lineage)
        except FreezeError as exc:
            incomplete[part] = str(exc)
            continue
        if not _has_state(found):  # e.g. a directory made for a later version only
            incomplete[part] = f"{part}: no state file of a version <= {batch + 1}"
            continue
        covered.append(part)
        # A partition's _metadata (the schema file) is the driver's: Spark's driver writes it, on its disk.
        files += [f for f in found if f.split("/")[3:4] != ["_metadata"]]
    dest.mkdir(parents=True, exist_ok=True)
    link_files(root, dest, files, set())
    tree = scan_tree(dest)
    digests = tree_digests(tree, hash_cache or HashCache(None), hash_workers, stop)
    if hash_cache is not None:
        hash_cache.retain_only({cache_key(st) for _, _, st in tree})
    report = ExecutorReport(
        executor=executor, batch=batch, covered=covered, incomplete=incomplete,
        files=[StateFile(path=rel, size=st.st_size, sha256=d.sha256, crc32=d.crc32)
               for (rel, _, st), d in zip(tree, digests, strict=True)])
    return Prepared(report=report, freeze_dir=dest, stats={rel: st for rel, _, st in tree})
