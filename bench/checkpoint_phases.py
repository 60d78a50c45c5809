"""Where a small incremental checkpoint's time goes: wall time per store call kind, on a real MinIO.

A tree of `--files` files of `--file-kib` KiB is checkpointed in full; then each repeat adds `--new`
files (the state store's new changelogs of one interval) and takes an incremental checkpoint, timing
every store call it makes (calls run in parallel, so their sum can exceed the wall time) and the
writer's own hash and upload phases. No Spark: this isolates the writer's protocol (writer.py).

    python bench/checkpoint_phases.py                     # 400 files of 20 KiB, 40 new, 5 repeats
    python bench/checkpoint_phases.py --files 2000 --new 200
"""

from __future__ import annotations

import argparse
import collections
import os
import shutil
import statistics
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

from sparkpoint.runtime.checkpoint import CheckpointWriter, write_fence
from sparkpoint.runtime.store import JobRef, ObjectStore
from sparkpoint.runtime.store.minio_server import MinioServer

CALLS = ("put_bytes", "put_if_absent", "put_file", "get_bytes", "stat", "list", "delete")


def timed(store: ObjectStore) -> dict[str, list[float]]:
    """Wrap the store's calls to record their wall times (a listing is timed until fully read)."""
    seen: dict[str, list[float]] = collections.defaultdict(list)
    lock = threading.Lock()
    for name in CALLS:
        real = getattr(store, name)

        def call(*a: Any, _real: Any = real, _name: str = name, **k: Any) -> Any:
            t = time.perf_counter()
            out = _real(*a, **k)
            if _name == "list":
                out = list(out)
            with lock:
                seen[_name].append(time.perf_counter() - t)
            return out
        setattr(store, name, call)
    return seen


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--files", type=int, default=400)
    p.add_argument("--new", type=int, default=40)
    p.add_argument("--file-kib", type=int, default=20)
    p.add_argument("--repeats", type=int, default=5)
    args = p.parse_args()
    base = Path(tempfile.mkdtemp(prefix="sparkpoint-phases-"))
    with MinioServer() as minio:
        minio.make_bucket("phases")
        store = minio.open("phases")
        seen = timed(store)
        hot, job = base / "hot", JobRef("bench", "phases")
        for i in range(args.files):
            path = hot / "state" / str(i % 4) / f"{i}.changelog"
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_bytes(os.urandom(args.file_kib * 1024))
        writer = CheckpointWriter(store, job, attempt=write_fence(store, job), job_uid="bench")
        writer.take_checkpoint(hot, batch_id=0)
        rows: list[dict[str, float]] = []
        for r in range(args.repeats):
            for i in range(args.new):
                (hot / "state" / str(i % 4) / f"new-{r}-{i}.changelog").write_bytes(os.urandom(args.file_kib * 1024))
            seen.clear()
            t0 = time.perf_counter()
            res = writer.take_checkpoint(hot, batch_id=r + 1)
            row = {"total": time.perf_counter() - t0, "hash": res.hash_seconds, "upload": res.upload_seconds}
            row.update({f"{k} x{len(v)}": sum(v) for k, v in sorted(seen.items())})
            rows.append(row)
    shutil.rmtree(base, ignore_errors=True)
    print(f"{args.files} files of {args.file_kib} KiB, {args.new} new per checkpoint; median of {args.repeats} (ms):")
    for key in rows[0]:
        print(f"  {key:20s} {statistics.median(r.get(key, 0.0) for r in rows) * 1000:8.1f}")


if __name__ == "__main__":
    main()
