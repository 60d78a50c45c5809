"""The frozen tree of one checkpoint: its files and their digests.

A large state store has thousands of files and most are unchanged between checkpoints, so both steps
are kept cheap per file: one lstat each, and cached digests looked up without a pool task.
"""

from __future__ import annotations

import os
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

from .errors import CheckpointError
from .hashing import FileDigests, HashCache

Files = list[tuple[str, Path, os.stat_result]]


def scan_tree(root: Path) -> Files:
    """(relative '/' path, absolute path, stat) of every regular file, sorted by path.
    One lstat per file (os.scandir): a large state store's tree is scanned at every checkpoint."""
    if not root.is_dir():
        raise CheckpointError(f"cannot checkpoint {root}: not a directory")
    found: Files = []

    def walk(directory: str, rel: str) -> None:
        with os.scandir(directory) as it:
            entries = sorted(it, key=lambda e: e.name)
        for entry in entries:
            name = f"{rel}{entry.name}"
            if entry.is_dir(follow_symlinks=False):
                walk(entry.path, name + "/")
            elif entry.is_file(follow_symlinks=False):
                found.append((name, Path(entry.path), entry.stat(follow_symlinks=False)))
            else:
                raise CheckpointError(f"cannot checkpoint {entry.path}: only regular files are supported")
    walk(str(root), "")
    found.sort(key=lambda item: item[0])
    return found


def tree_digests(files: Files, cache: HashCache, workers: int, stop: Callable[[], None]) -> list[FileDigests]:
    """Every file's digests: cached ones looked up here, the rest read by a pool (most files of
    a large state are unchanged, and a pool task per cache hit costs more than the lookup)."""
    found = [cache.cached(st) for _, _, st in files]
    missing = [i for i, d in enumerate(found) if d is None]

    def read(i: int) -> FileDigests:
        stop()
        return cache.digests(files[i][1], files[i][2])
    stop()
    with ThreadPoolExecutor(workers) as pool:
        for i, d in zip(missing, pool.map(read, missing), strict=True):
            found[i] = d
    return found  # type: ignore[return-value]  # every None was filled
