"""Remote restore throughput under CPU load vs raw GET bandwidth under the same load.

A checkpoint of incompressible files is written to the store; then, while `burners` processes keep
every core busy (standing in for a busy Spark driver and executors), it is (1) downloaded with plain
GETs, 8 at a time, no hashing, and (2) restored with runtime/checkpoint/restore.py (8 workers, every
byte sha256-verified). The ratio (2)/(1) is the goal's "restore >= 70% of raw GET"."""

from __future__ import annotations

import multiprocessing
import os
import shutil
import statistics
import tempfile
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

from sparkpoint.runtime.checkpoint import CheckpointWriter
from sparkpoint.runtime.checkpoint.fence import write_fence
from sparkpoint.runtime.checkpoint.restore import restore
from sparkpoint.runtime.store import JobRef, ObjectStore
from sparkpoint.runtime.store.layout import object_key

MIB = 1024 * 1024


def _burn(stop_at: float) -> None:
    x = 0
    while time.time() < stop_at:
        x = (x * 31 + 7) % 1000003


def measure(store: ObjectStore, base: Path, *, files: int, file_mib: int, repeats: int = 3,
            burners: int | None = None) -> dict[str, float]:
    job = JobRef("bench", f"restore-{os.getpid()}-{int(time.time())}")
    src = base / "restore-src"
    (src / "state").mkdir(parents=True, exist_ok=True)
    for i in range(files):
        (src / "state" / f"{i:04d}.sst").write_bytes(os.urandom(file_mib * MIB))
    writer = CheckpointWriter(store, job, attempt=write_fence(store, job), job_uid="bench")
    manifest = writer.take_checkpoint(src, batch_id=0).manifest
    total_mib = files * file_mib
    burners = (os.cpu_count() or 2) if burners is None else burners
    raw, verified = [], []
    for _ in range(repeats):
        procs = [multiprocessing.Process(target=_burn, args=(time.time() + 3600,)) for _ in range(burners)]
        for p in procs:
            p.start()
        try:
            scratch = Path(tempfile.mkdtemp(dir=base))
            t0 = time.perf_counter()
            with ThreadPoolExecutor(8) as pool:
                list(pool.map(lambda e, d=scratch: store.get_file(object_key(job, e.sha256), str(d / e.sha256)),
                              manifest.files))
            raw.append(total_mib / (time.perf_counter() - t0))
            shutil.rmtree(scratch)
            t0 = time.perf_counter()
            restore(store, job, base / "restored", workers=8)
            verified.append(total_mib / (time.perf_counter() - t0))
            shutil.rmtree(base / "restored")
        finally:
            for p in procs:
                p.terminate()
                p.join()
    shutil.rmtree(src)
    raw_mib_s, restore_mib_s = statistics.median(raw), statistics.median(verified)
    return {"files": files, "file_mib": file_mib, "burners": burners, "raw_get_mib_s": raw_mib_s,
            "restore_mib_s": restore_mib_s, "fraction": restore_mib_s / raw_mib_s, "repeats": repeats}
