"""An executor's second step of a checkpoint: upload the objects the driver's plan asks of it, under
the driver's pending checkpoint (docs/design.md §4, "Executor-side state").

The driver planned (checkpoint/plan.py) after its pending marker named every object, so this uploads
exactly what it is asked, to the keys the single-process path uses (`objects/<aa>/<sha256>`), with the
executor store role (put objects, never delete, never a manifest). After each upload the source is
re-stat'ed: a file that changed since it was hashed is reported in `changed`, not acknowledged, and the
driver (which may delete) removes the object and fails the checkpoint.
"""

from __future__ import annotations

import os
import time
from collections.abc import Iterable
from concurrent.futures import ThreadPoolExecutor

from sparkpoint.runtime.checkpoint.errors import CheckpointError
from sparkpoint.runtime.checkpoint.operation import StopCheck, no_stop
from sparkpoint.runtime.store import JobRef, ObjectStore
from sparkpoint.runtime.store.layout import object_key

from .prepare import Prepared
from .report import UploadAck


def _same(a: os.stat_result, b: os.stat_result) -> bool:
    return (a.st_ino, a.st_size, a.st_mtime_ns) == (b.st_ino, b.st_size, b.st_mtime_ns)


def upload(prepared: Prepared, store: ObjectStore, job: JobRef, checkpoint: str, shas: Iterable[str], *,
           workers: int = 4, stop: StopCheck = no_stop) -> UploadAck:
    """Upload the objects `shas` (each a file of `prepared`'s report) for pending `checkpoint`."""
    started = time.perf_counter()
    path_of = {f.sha256: f.path for f in prepared.report.files}
    wanted = sorted(set(shas))
    unknown = [sha for sha in wanted if sha not in path_of]
    if unknown:
        raise CheckpointError(f"executor {prepared.report.executor} holds no file with sha256 {unknown[0]} "
                              f"(checkpoint {checkpoint} asked for {len(unknown)} such)")

    def put(sha: str) -> tuple[str, bool]:
        stop()
        rel = path_of[sha]
        source = prepared.freeze_dir / rel
        store.put_file(object_key(job, sha), str(source))
        return sha, _same(os.stat(source), prepared.stats[rel])

    with ThreadPoolExecutor(max(1, workers)) as pool:
        results = list(pool.map(put, wanted))
    sizes = {f.sha256: f.size for f in prepared.report.files}
    uploaded = {sha: object_key(job, sha) for sha, same in results if same}
    return UploadAck(executor=prepared.report.executor, checkpoint=checkpoint, uploaded=uploaded,
                     changed=[sha for sha, same in results if not same],
                     uploaded_bytes=sum(sizes[sha] for sha in uploaded), seconds=round(time.perf_counter() - started, 4))
