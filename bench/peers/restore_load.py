"""Remote restore throughput under CPU load vs raw GET bandwidth under the same load.

A checkpoint of incompressible files is written to the store; then, while `burners` processes keep
every core busy (standing in for a busy Spark driver and executors), it is (1) downloaded with plain
GETs, 8 at a time, no hashing, and (2) restored with runtime/checkpoint/restore.py (8 workers, every
byte sha256-verified). The ratio (2)/(1) is the goal's "restore >= 70% of raw GET". Each repeat runs
both, in alternating order; the fraction reported is the median of the repeats' own ratios."""

from __future__ import annotations

import os
import resource
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

from sparkpoint.runtime.checkpoint import CheckpointWriter
from sparkpoint.runtime.checkpoint.fence import write_fence
from sparkpoint.runtime.checkpoint.restore import restore
from sparkpoint.runtime.store import JobRef, ObjectStore
from sparkpoint.runtime.store.layout import object_key

MIB = 1024 * 1024


BURN = "import time\nx = 0\nend = time.time() + 3600\nwhile time.time() < end:\n    x = (x * 31 + 7) % 1000003\n"


def _burners(n: int) -> list[subprocess.Popen]:
    """Busy loops in fresh interpreters (exec, not fork). With forked burners the first download of
    each repeat ran several times slower than the second, whichever it was (fractions 2.15, 0.30,
    1.54, 0.28, 1.51, 0.26 alternating); copy-on-write faults in this process after the fork are the
    likely cause."""
    return [subprocess.Popen([sys.executable, "-c", BURN]) for _ in range(n)]


def measure(store: ObjectStore, base: Path, *, files: int, file_mib: int, repeats: int = 3,
            burners: int | None = None) -> dict[str, Any]:
    job = JobRef("bench", f"restore-{os.getpid()}-{int(time.time())}")
    src = base / "restore-src"
    (src / "state").mkdir(parents=True, exist_ok=True)
    for i in range(files):
        (src / "state" / f"{i:04d}.sst").write_bytes(os.urandom(file_mib * MIB))
    writer = CheckpointWriter(store, job, attempt=write_fence(store, job), job_uid="bench")
    manifest = writer.take_checkpoint(src, batch_id=0).manifest
    total_mib = files * file_mib
    burners = (os.cpu_count() or 2) if burners is None else burners

    cpu: dict[str, list[float]] = {"raw": [], "restore": []}  # this process's CPU seconds per GiB

    def timed(kind: str, fn: Callable[[], object]) -> float:
        c0, t0 = _cpu_seconds(), time.perf_counter()
        fn()
        rate = total_mib / (time.perf_counter() - t0)
        cpu[kind].append((_cpu_seconds() - c0) * 1024 / total_mib)
        return rate

    def raw_get() -> float:
        scratch = Path(tempfile.mkdtemp(dir=base))
        with ThreadPoolExecutor(8) as pool:
            rate = timed("raw", lambda: list(pool.map(
                lambda e: store.get_file(object_key(job, e.sha256), str(scratch / e.sha256)), manifest.files)))
        shutil.rmtree(scratch)
        return rate

    def verified_restore() -> float:
        rate = timed("restore", lambda: restore(store, job, base / "restored", workers=8))
        shutil.rmtree(base / "restored")
        return rate

    raw, verified = [], []
    for i in range(repeats):
        procs = _burners(burners)
        try:
            time.sleep(1.0)  # the burners hold the cores before either download starts
            if i % 2 == 0:  # alternate which goes first, so neither always meets a colder cache
                raw.append(raw_get())
                verified.append(verified_restore())
            else:
                verified.append(verified_restore())
                raw.append(raw_get())
        finally:
            for p in procs:
                p.kill()
                p.wait()
    shutil.rmtree(src)
    return {**summarize(raw, verified, files=files, file_mib=file_mib, burners=burners),
            "raw_cpu_s_per_gib": statistics.median(cpu["raw"]),
            "restore_cpu_s_per_gib": statistics.median(cpu["restore"])}


def _cpu_seconds() -> float:
    """User + system CPU of this process (all its threads; not the burners, which are children)."""
    ru = resource.getrusage(resource.RUSAGE_SELF)
    return ru.ru_utime + ru.ru_stime


def summarize(raw: list[float], verified: list[float], **setup: int) -> dict[str, Any]:
    """Both rates' medians, and the fraction as the median of each repeat's own ratio: a repeat's
    two downloads share its moment's load, so pairing them cancels the drift between repeats."""
    fractions = [v / r for r, v in zip(raw, verified, strict=True)]
    return {**setup, "raw_get_mib_s": statistics.median(raw), "restore_mib_s": statistics.median(verified),
            "fraction": statistics.median(fractions), "fractions": fractions, "repeats": len(raw)}
