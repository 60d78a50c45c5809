"""Where a small incremental checkpoint's time goes: wall time per store call kind, on a real MinIO.

A tree of `--files` files of `--file-kib` KiB is checkpointed in full; then each repeat adds `--new`
files (the state store's new changelogs of one interval) and takes an incremental checkpoint, timing
every store call it makes (calls run in parallel, so their sum can exceed the wall time) and the
writer's own hash and upload phases. No Spark: this isolates the writer's protocol (writer.py).

Ways of running one checkpoint alternate (A B B A), chosen by `--modes`:
- `now`: what the writer does;
- `serial-calls`: the same writer with its independent round trips made one after another, as before
  they overlapped (the claim's two listings after the hash, the fence read in full: three requests,
  then the marker's stat, the marker's removal before the hash cache's save);
- `sequential`: `now`, but the objects/ listing is read before any upload starts.
`--latency-ms` puts a toxiproxy round trip between the writer and MinIO.

    python bench/checkpoint_phases.py                     # 400 files of 20 KiB, 40 new, 5 repeats
    python bench/checkpoint_phases.py --files 3000 --new 50 --file-kib 100 --latency-ms 20
    python bench/checkpoint_phases.py --modes now,sequential
"""

from __future__ import annotations

import argparse
import collections
import contextlib
import os
import shutil
import statistics
import tempfile
import threading
import time
from collections.abc import Callable, Iterator
from concurrent.futures import Future
from pathlib import Path
from typing import Any

from peers.stats import bootstrap_median  # bench/ is on sys.path when this runs as a script
from peers.toxiproxy import Toxiproxy

from harness.minio_server import MinioServer
from sparkpoint.runtime.checkpoint import CheckpointResult, CheckpointWriter, catalog, fence, write_fence
from sparkpoint.runtime.checkpoint import writer as writer_module
from sparkpoint.runtime.store import JobRef, ObjectStore
from sparkpoint.runtime.store.s3 import S3Store

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


def _at_once_in_order(fn: Callable[[], Any]) -> Future[Any]:
    future: Future[Any] = Future()
    try:
        future.set_result(fn())
    except BaseException as exc:
        future.set_exception(exc)
    return future


def _in_order(*calls: Callable[[], Any]) -> list[Any]:
    return [c() for c in calls]


def _full_fence_check(store: ObjectStore, job: JobRef, attempt: int) -> None:
    current = fence.read_fence(store, job)  # fence.json's stat and read, then the claim above it
    if current != attempt:
        raise fence.FencedError(f"attempt {attempt} is fenced off by attempt {current}")


@contextlib.contextmanager
def serial_calls() -> Iterator[None]:
    """The writer's overlapped round trips made one after another (the `serial-calls` mode)."""
    saved = [(m, n, getattr(m, n)) for m, n in ((writer_module, "in_background"), (writer_module, "concurrently"),
                                                 (catalog, "concurrently"), (writer_module, "check_fence"))]
    writer_module.in_background = _at_once_in_order
    writer_module.concurrently = catalog.concurrently = _in_order
    writer_module.check_fence = _full_fence_check
    try:
        yield
    finally:
        for module, name, value in saved:
            setattr(module, name, value)


def checkpoint(writer: CheckpointWriter, hot: Path, batch_id: int, mode: str) -> CheckpointResult:
    if mode == "now":
        return writer.take_checkpoint(hot, batch_id=batch_id)
    if mode == "serial-calls":
        with serial_calls():
            return writer.take_checkpoint(hot, batch_id=batch_id)
    op = writer.begin(hot, batch_id=batch_id)
    op.plan()  # the whole listing first
    op.upload_all()
    return op.commit()


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--files", type=int, default=400)
    p.add_argument("--new", type=int, default=40)
    p.add_argument("--file-kib", type=int, default=20)
    p.add_argument("--repeats", type=int, default=5, help="checkpoints per mode")
    p.add_argument("--latency-ms", type=int, default=0, help="round trip added between writer and MinIO")
    p.add_argument("--modes", default="now,serial-calls", help="two of now, serial-calls, sequential: A B B A")
    args = p.parse_args()
    args.modes = args.modes.split(",")
    if len(args.modes) != 2 or not set(args.modes) <= {"now", "serial-calls", "sequential"}:
        p.error("--modes takes two of now, serial-calls, sequential")
    base = Path(tempfile.mkdtemp(prefix="sparkpoint-phases-"))
    proxy = Toxiproxy().start() if args.latency_ms else None
    try:
        with MinioServer() as minio:
            minio.make_bucket("phases")
            store: ObjectStore = minio.open("phases")
            if proxy:
                listen = proxy.proxy("minio", minio.endpoint.split("://", 1)[1])
                proxy.set_latency("minio", args.latency_ms)
                store = S3Store(f"http://{listen}", "phases", "", minio.access_key, minio.secret_key)
            rows = run(store, base / "hot", args)
    finally:
        if proxy:
            proxy.stop()
        shutil.rmtree(base, ignore_errors=True)
    print(f"{args.files} files of {args.file_kib} KiB, {args.new} new per checkpoint, "
          f"{args.latency_ms} ms round trip; median of {args.repeats} per mode (ms):")
    for mode, mine in rows.items():
        print(f"  {mode}:")
        for key in mine[0]:
            print(f"    {key:20s} {statistics.median(r.get(key, 0.0) for r in mine) * 1000:8.1f}")
    a, b = args.modes
    paired = [x["total"] / y["total"] for x, y in zip(rows[a], rows[b], strict=True)]
    ratio = bootstrap_median(paired)
    print(f"  {a} / {b} total, paired: {ratio.value:.3f} [{ratio.low:.3f}, {ratio.high:.3f}]")


def run(store: ObjectStore, hot: Path, args: argparse.Namespace) -> dict[str, list[dict[str, float]]]:
    seen = timed(store)
    job = JobRef("bench", "phases")
    for i in range(args.files):
        path = hot / "state" / str(i % 4) / f"{i}.changelog"
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(os.urandom(args.file_kib * 1024))
    writer = CheckpointWriter(store, job, attempt=write_fence(store, job), job_uid="bench", reuse_window_seconds=0)
    writer.take_checkpoint(hot, batch_id=0)
    rows: dict[str, list[dict[str, float]]] = {m: [] for m in args.modes}
    for r in range(args.repeats * 2):
        mode = args.modes[(r + r // 2) % 2]  # A B B A: neither always goes first
        for i in range(args.new):
            (hot / "state" / str(i % 4) / f"new-{r}-{i}.changelog").write_bytes(os.urandom(args.file_kib * 1024))
        seen.clear()
        t0 = time.perf_counter()
        res = checkpoint(writer, hot, r + 1, mode)
        row = {"total": time.perf_counter() - t0, "hash": res.hash_seconds, "upload": res.upload_seconds}
        row.update({f"{k} x{len(v)}": sum(v) for k, v in sorted(seen.items())})
        rows[mode].append(row)
    return rows


if __name__ == "__main__":
    main()
