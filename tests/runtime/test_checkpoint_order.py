"""The checkpoint pipeline with maxConcurrent > 1 on a real directory store (issue 8 items 5, 8):
ids follow batch order whatever order the asynchronous phases run and finish in, and a timed-out
request stops uploading."""

from __future__ import annotations

import threading
import time
from pathlib import Path

from sparkpoint.runtime.checkpoint import CheckpointWriter, write_fence
from sparkpoint.runtime.checkpoint.catalog import list_checkpoints
from sparkpoint.runtime.checkpoint.coordinator import CheckpointCoordinator
from sparkpoint.runtime.service import checkpointing
from sparkpoint.runtime.service.checkpointing import CheckpointPipeline
from sparkpoint.runtime.service.metrics import RuntimeMetrics
from sparkpoint.runtime.sink.console import ConsoleSink
from sparkpoint.runtime.store import DirectoryStore, JobRef

from .test_freeze import _write, make_hot_dir


class SlowUploads(DirectoryStore):
    """Uploads of files whose path contains a marker wait until released."""

    def __init__(self, root: Path):
        super().__init__(root, fsync=False)
        self.hold: str | None = None
        self.release = threading.Event()
        self.uploads = 0

    def put_file(self, key: str, path: str) -> None:
        self.uploads += 1
        if self.hold and self.hold in path:
            self.release.wait(30)
        super().put_file(key, path)


def _pipeline(tmp_path: Path, store, max_concurrent: int, timeout: float = 60.0):  # type: ignore[no-untyped-def]
    job = JobRef("default", "order")
    writer = CheckpointWriter(store, job, attempt=write_fence(store, job), job_uid="u", upload_workers=1,
                              reuse_window_seconds=0)
    pipe = CheckpointPipeline(store=store, job=job, writer=writer, sink=ConsoleSink(tmp_path / "console"), hot_dir=tmp_path / "hot",
                              freeze_root=tmp_path / "freeze", metrics=RuntimeMetrics(), lineage={},
                              spark_version="4", state_provider="rocksdb", last_batch=None)
    coord = CheckpointCoordinator(sync_phase=pipe.sync, async_phase=pipe.run_async, interval=0,
                                  timeout=timeout, max_concurrent=max_concurrent)
    return job, pipe, coord


def _next_batch(hot: Path, batch: int) -> None:
    _write(hot / "offsets" / str(batch), "v1\n{}")
    _write(hot / "state" / "0" / "0" / f"{batch + 1}.changelog", f"c{batch + 1}")
    _write(hot / "commits" / str(batch), "v1\n{}")


def test_ids_follow_batch_order_when_phases_run_out_of_order(tmp_path, monkeypatch) -> None:  # type: ignore[no-untyped-def]
    make_hot_dir(tmp_path / "hot", committed=3, planned=3, snapshots=set(), versions=4)
    store = SlowUploads(tmp_path / "store")
    job, pipe, coord = _pipeline(tmp_path, store, max_concurrent=2)
    # The first request's worker thread is descheduled before it reaches the store (until the
    # second request waits for its turn to claim an id), and its uploads finish last: the second
    # request (a newer batch) runs ahead of it.
    real_lower, calls = checkpointing._lower_thread_priority, [0]
    first_frozen, second_waits = threading.Event(), threading.Event()

    def late_first() -> None:  # the first call of the async phase: the request's freeze is done
        calls[0] += 1
        if calls[0] == 1:
            first_frozen.set()
            assert second_waits.wait(10), "the second request never reached its turn to claim an id"
        real_lower()
    real_wait_turn = pipe.writer.tickets.wait_turn

    def wait_turn(ticket, stop_check=None, poll_seconds=0.1):  # type: ignore[no-untyped-def]
        if ticket == 2:
            second_waits.set()
        real_wait_turn(ticket, stop_check, poll_seconds)
    monkeypatch.setattr(checkpointing, "_lower_thread_priority", late_first)
    monkeypatch.setattr(pipe.writer.tickets, "wait_turn", wait_turn)
    store.hold = "req-000001"
    coord.start()
    try:
        first = coord.request()
        assert first_frozen.wait(10), f"the first request never finished its freeze: {first.status} {first.error}"
        _next_batch(tmp_path / "hot", 4)
        second = coord.request()
        assert second.done.wait(30), "the newer checkpoint must not wait for the older one's uploads"
        store.release.set()
        assert first.done.wait(30)
        assert (first.status, second.status) == ("completed", "completed"), (first.error, second.error)
    finally:
        store.release.set()
        coord.stop()
    assert (first.batch_id, second.batch_id) == (3, 4)
    assert first.checkpoint_id < second.checkpoint_id, (first.checkpoint_id, second.checkpoint_id)
    manifests = list_checkpoints(store, job)
    assert manifests[-1].batch_id == 4, "the highest id must be the newest batch"
    assert pipe.writer.base is not None and pipe.writer.base.id == second.checkpoint_id


def test_a_timed_out_request_stops_uploading(tmp_path) -> None:  # type: ignore[no-untyped-def]
    make_hot_dir(tmp_path / "hot", committed=2, planned=2, snapshots=set(), versions=3)
    for i in range(40):
        _write(tmp_path / "hot" / "sources" / "0" / f"{i}", f"source file {i}")
    store = SlowUploads(tmp_path / "store")
    real_put = DirectoryStore.put_file

    def slow_put(self, key, path):  # type: ignore[no-untyped-def]
        self.uploads += 1
        time.sleep(0.1)  # deliberate: a slow store, so the 0.5 s timeout lands mid-upload
        real_put(self, key, path)
    store.put_file = slow_put.__get__(store)  # type: ignore[method-assign]
    job, _, coord = _pipeline(tmp_path, store, max_concurrent=1, timeout=0.5)
    unwound = threading.Event()  # the abandoned request's async phase has returned
    real_async = coord.async_phase

    def tracked_async(req, frozen):  # type: ignore[no-untyped-def]
        try:
            real_async(req, frozen)
        finally:
            unwound.set()
    coord.async_phase = tracked_async
    coord.start()
    try:
        req = coord.request()
        assert req.done.wait(10) and req.status == "timed_out"
        assert unwound.wait(10), f"the timed-out request still uploads ({store.uploads} so far)"
        after = store.uploads
        time.sleep(1.0)  # deliberate quiet window: nothing of the abandoned request may upload now
        assert store.uploads == after, "uploads went on after the request timed out"
    finally:
        coord.stop()
    assert store.uploads < 30, f"{store.uploads} uploads for a request that timed out after ~5"
    assert list_checkpoints(store, job) == []
