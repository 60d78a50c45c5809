"""Test helpers: build directory trees that look like a Spark hot checkpoint dir."""

from __future__ import annotations

import hashlib
import os
import random
from pathlib import Path


def write_tree(root: Path, n: int, size: int = 4096, seed: int = 0) -> list[Path]:
    """n files spread over a few subdirectories, distinct random content."""
    rng = random.Random(seed)
    paths = []
    for i in range(n):
        sub = root / ["state/0/0", "state/0/1", "offsets", "commits"][i % 4]
        sub.mkdir(parents=True, exist_ok=True)
        path = sub / f"f{i:04d}.sst"
        path.write_bytes(rng.randbytes(size + rng.randrange(0, size // 4 + 1)))
        paths.append(path)
    return paths


def change_files(paths: list[Path], k: int, seed: int = 1) -> list[Path]:
    """Rewrite k of the files with new content (a new inode, as Spark's rename-on-write gives)."""
    rng = random.Random(seed)
    changed = rng.sample(paths, k)
    for path in changed:
        tmp = path.with_suffix(".tmp")
        tmp.write_bytes(rng.randbytes(path.stat().st_size))
        os.replace(tmp, path)
    return changed


def tree_digest(root: Path) -> dict[str, str]:
    """relative path -> sha256 of every file: equal digests mean byte-identical trees."""
    return {p.relative_to(root).as_posix(): hashlib.sha256(p.read_bytes()).hexdigest()
            for p in sorted(root.rglob("*")) if p.is_file()}


def rewrite_in_place(path: Path) -> bytes:
    """Reverse a file's bytes in place (same inode, same size) and bump its mtime, as a writer that
    rewrites a file while it is read would; returns the original bytes."""
    data = path.read_bytes()
    with open(path, "r+b") as f:
        f.truncate(0)
        f.write(bytes(reversed(data)))
    st = path.stat()
    os.utime(path, ns=(st.st_atime_ns, st.st_mtime_ns + 1_000_000))
    return data
