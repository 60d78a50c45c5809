"""A store outage only delays checkpoints (issue 8, item 10), piece by piece and fast:
the sink stages on local disk without the store, within a budget (backpressure, never a crash or a
drop); a frozen S3 endpoint fails a call within bounded time; failed checkpoints back off.
The end-to-end runs against a frozen and a dead MinIO are in test_store_outage.py (slow)."""

from __future__ import annotations

import socket
import threading
import time

import pytest
from hypothesis import given
from hypothesis import strategies as st

from harness.minio_server import free_port
from sparkpoint.runtime.checkpoint import write_fence
from sparkpoint.runtime.checkpoint.coordinator import RETRY_BACKOFF_CAP, due_reason, retry_delay
from sparkpoint.runtime.sink.journal import SinkJournal
from sparkpoint.runtime.sink.transactional import (
    SinkStopped,
    TransactionalSink,
    read_committed,
    staged_budget_bytes,
)
from sparkpoint.runtime.store.base import StoreUnreachableError
from sparkpoint.runtime.store.s3 import S3Store

from .test_sink import FakeBatch, fake_write_files


def _rows(values):
    return FakeBatch([{"v": v} for v in values])


def _dead_store() -> S3Store:
    """A real S3 client whose endpoint refuses connections (MinIO down)."""
    return S3Store(f"http://127.0.0.1:{free_port()}", "outage-bucket", "p", "k", "s", attempts=2)


def test_batches_stage_while_the_store_is_down_and_the_next_checkpoint_covers_them(store, job, tmp_path):
    sink = TransactionalSink(store, job, attempt=write_fence(store, job), path="default",
                             journal=SinkJournal(tmp_path / "journal"), write_files=fake_write_files)
    sink.store = _dead_store()  # the outage starts
    for b in range(5):
        sink.write_batch(_rows([2 * b, 2 * b + 1]), b)  # never touches the store
    failed = sink.manifest_extra(2)
    with pytest.raises(StoreUnreachableError):
        sink.upload_staged(failed)  # this checkpoint fails; nothing was published
    assert sink.staged_bytes() > 0
    sink.store = store  # the store is back
    extra = sink.manifest_extra(4)
    assert [f["batch"] for f in extra["sink"]["files"]] == [0, 1, 2, 3, 4]
    sink.upload_staged(extra)
    sink.publish("chk-000001", extra)
    assert [r["v"] for r in read_committed(store, job)] == list(range(10))
    assert sink.staged_bytes() == 0  # published output leaves the local disk


def test_staging_over_budget_waits_for_a_publish_and_drops_nothing(store, job, tmp_path):
    one_batch = len(b'{"v": 0}\n') * 10
    sink = TransactionalSink(store, job, attempt=write_fence(store, job), path="default",
                             journal=SinkJournal(tmp_path / "journal"), staged_budget_bytes=one_batch + 5,
                             fmt="jsonl", write_files=fake_write_files)
    sink.write_batch(_rows(range(0, 10)), 0)
    blocked = threading.Thread(target=sink.write_batch, args=(_rows(range(10, 20)), 1), daemon=True)
    blocked.start()
    blocked.join(1.0)
    assert blocked.is_alive(), "a batch over the budget must wait, not stage"
    assert sink.journal.entry(1) is None
    extra = sink.manifest_extra(0)  # a checkpoint publishes batch 0 and frees its space
    sink.upload_staged(extra)
    sink.publish("chk-000001", extra)
    blocked.join(10)
    assert not blocked.is_alive() and sink.journal.entry(1) is not None
    extra = sink.manifest_extra(1)
    sink.upload_staged(extra)
    sink.publish("chk-000002", extra)
    assert [r["v"] for r in read_committed(store, job)] == list(range(20))
    # a batch bigger than the whole budget is staged when nothing else is (no deadlock)
    sink.write_batch(_rows(range(20, 60)), 2)
    assert sink.journal.entry(2)["rows"] == 40
    # a drain stops a waiting batch with an error (Spark re-runs it later), never a silent drop
    sink.stopping.set()
    with pytest.raises(SinkStopped):
        sink.write_batch(_rows(range(60, 70)), 3)
    assert sink.journal.entry(3) is None


def test_a_batch_over_budget_asks_for_the_checkpoint_that_frees_it(store, job, tmp_path):
    one_batch = len(b'{"v": 0}\n') * 10
    sink = TransactionalSink(store, job, attempt=write_fence(store, job), path="default",
                             journal=SinkJournal(tmp_path / "journal"), staged_budget_bytes=one_batch + 5,
                             fmt="jsonl", write_files=fake_write_files)
    asked = []

    def checkpoint() -> None:  # what the runner's coordinator does, on its own thread
        asked.append(threading.current_thread().name)
        extra = sink.manifest_extra(0)  # takes the sink's lock: the ask must not hold it
        sink.upload_staged(extra)
        sink.publish("chk-000001", extra)

    sink.on_over_budget = lambda: threading.Thread(target=checkpoint, name="coordinator").start()
    sink.write_batch(_rows(range(0, 10)), 0)
    done = threading.Thread(target=sink.write_batch, args=(_rows(range(10, 20)), 1), daemon=True)
    done.start()
    done.join(10)
    assert not done.is_alive(), "the batch waited although a checkpoint was asked for"
    assert asked == ["coordinator"]  # asked once, not on every poll
    assert [r["v"] for r in read_committed(store, job)] == list(range(10))
    assert sink.journal.entry(1) is not None


def test_staged_budget_setting():
    assert staged_budget_bytes({}) == 1 << 30
    assert staged_budget_bytes({"SPARKPOINT_SINK_STAGED_BUDGET": "512Mi"}) == 512 << 20
    with pytest.raises(ValueError, match="SPARKPOINT_SINK_STAGED_BUDGET"):
        staged_budget_bytes({"SPARKPOINT_SINK_STAGED_BUDGET": "lots"})


def test_a_frozen_s3_endpoint_fails_a_call_in_bounded_time():
    """A server that accepts connections but never answers (as a SIGSTOPped MinIO): the call must
    end with StoreUnreachableError after attempts x read timeout, not hang."""
    with socket.socket() as frozen:
        frozen.bind(("127.0.0.1", 0))
        frozen.listen(16)  # the kernel completes handshakes; nobody ever reads or answers
        port = frozen.getsockname()[1]
        s3 = S3Store(f"http://127.0.0.1:{port}", "outage-bucket", "p", "k", "s", attempts=2, read_timeout=0.5)
        t0 = time.monotonic()
        with pytest.raises(StoreUnreachableError):
            s3.put_bytes("x/y", b"data")
        assert time.monotonic() - t0 < 10


@given(failures=st.integers(0, 20), interval=st.floats(0.5, 120), since_end=st.floats(0, 1000))
def test_failed_checkpoints_back_off_but_requests_do_not(failures, interval, since_end):
    now, last_end = 10_000.0, 10_000.0 - since_end
    since_end = now - last_end  # as the rule sees it (float rounding)
    reason = due_reason(now=now, queued=0, in_flight=0, max_concurrent=1, interval=interval,
                        last_trigger=last_end, last_end=last_end, min_pause=0.0, failures=failures)
    delay = retry_delay(failures, interval)
    assert delay <= max(RETRY_BACKOFF_CAP, interval)  # retried soon after the store returns
    if reason == "interval":
        assert since_end >= max(interval, delay)
    elif since_end >= max(interval, delay):
        pytest.fail("a due retry was not started")
    assert due_reason(now=now, queued=1, in_flight=0, max_concurrent=1, interval=interval,
                      last_trigger=last_end, last_end=last_end, min_pause=0.0, failures=failures) == "request"
    if failures >= 3 and interval * 4 <= RETRY_BACKOFF_CAP:
        assert delay == interval * 2 ** (failures - 1) or delay == RETRY_BACKOFF_CAP


def test_coordinator_counts_consecutive_failures_and_keeps_retrying():
    from sparkpoint.runtime.checkpoint.coordinator import CheckpointCoordinator

    outcomes = iter([False, False, False, True])
    seen_failures = []

    def async_phase(req, frozen):
        if not next(outcomes, True):
            raise StoreUnreachableError("store down")

    coord = CheckpointCoordinator(sync_phase=lambda req: None, async_phase=async_phase,
                                  on_finished=lambda req: seen_failures.append(coord.consecutive_failures()),
                                  interval=0.05, timeout=30)
    coord.start()
    try:
        deadline = time.monotonic() + 20
        while len(seen_failures) < 4 and time.monotonic() < deadline:
            time.sleep(0.02)
    finally:
        coord.stop()
    assert seen_failures[:4] == [1, 2, 3, 0]  # reported while failing, retried, reset by a success
    assert [r.status for r in coord.recent(100)[:4]] == ["failed", "failed", "failed", "completed"]
