"""The physical limits, measured in the same run: raw MinIO PUT/GET bandwidth (the runtime's own
store client, no hashing), local disk write bandwidth (fsync'd) and single-core sha256 throughput."""

from __future__ import annotations

import hashlib
import os
import tempfile
import time
from pathlib import Path

MIB = 1024 * 1024


def sha256_mib_s(total_mib: int = 256) -> float:
    block = os.urandom(MIB)
    h = hashlib.sha256()
    t0 = time.perf_counter()
    for _ in range(total_mib):
        h.update(block)
    return total_mib / (time.perf_counter() - t0)


def disk_write_mib_s(directory: Path, total_mib: int = 256) -> float:
    block = os.urandom(4 * MIB)
    path = Path(tempfile.mktemp(dir=directory, prefix="disk-bench-"))
    t0 = time.perf_counter()
    with open(path, "wb") as f:
        for _ in range(total_mib // 4):
            f.write(block)
        f.flush()
        os.fsync(f.fileno())
    seconds = time.perf_counter() - t0
    path.unlink()
    return total_mib / seconds


def store_put_get_mib_s(store, directory: Path, files: int = 8, file_mib: int = 32) -> tuple[float, float]:  # type: ignore[no-untyped-def]
    """Upload then download `files` objects of `file_mib` MiB, 8 at a time as the runtime does."""
    from concurrent.futures import ThreadPoolExecutor

    src = Path(tempfile.mktemp(dir=directory, prefix="put-"))
    src.write_bytes(os.urandom(file_mib * MIB))
    keys = [f"limits/obj-{i}" for i in range(files)]
    with ThreadPoolExecutor(8) as pool:
        t0 = time.perf_counter()
        list(pool.map(lambda k: store.put_file(k, str(src)), keys))
        put = files * file_mib / (time.perf_counter() - t0)
        t0 = time.perf_counter()
        list(pool.map(lambda k: store.get_file(k, str(src) + k.replace("/", "-")), keys))
        get = files * file_mib / (time.perf_counter() - t0)
    for k in keys:
        store.delete(k)
        Path(str(src) + k.replace("/", "-")).unlink(missing_ok=True)
    src.unlink()
    return put, get


def measure(store, directory: Path, small: bool) -> dict[str, float]:  # type: ignore[no-untyped-def]
    n = 64 if small else 512
    put, get = store_put_get_mib_s(store, directory, files=8, file_mib=8 if small else 64)
    return {"sha256_mib_s": sha256_mib_s(n), "disk_write_mib_s": disk_write_mib_s(directory, n),
            "store_put_mib_s": put, "store_get_mib_s": get}
