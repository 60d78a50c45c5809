"""The fence under concurrent starters (issue 8 item 2), on both backends.

Many runtimes start together (threads in one process, and separate processes); each claims an
attempt, then tries to commit a checkpoint and publish a sink entry. Exactly one may hold the
newest attempt; every other one is fenced and commits nothing.
"""

from __future__ import annotations

import os
import subprocess
import sys
import threading
from pathlib import Path

import pytest

from sparkpoint.runtime.checkpoint import CheckpointWriter, FencedError, read_fence, write_fence
from sparkpoint.runtime.checkpoint.catalog import list_checkpoints
from sparkpoint.runtime.checkpoint.fence import check_fence
from sparkpoint.runtime.store import JobRef, ObjectStore, open_store
from sparkpoint.runtime.store.layout import fence_key
from sparkpoint.runtime.store.manifest import Fence

from .trees import write_tree

STARTERS = 8


def _race(n: int, start_one) -> list:  # type: ignore[no-untyped-def]
    """Run `start_one(i)` on n threads released together; results in thread order."""
    barrier, results = threading.Barrier(n), [None] * n

    def run(i: int) -> None:
        barrier.wait()
        results[i] = start_one(i)
    threads = [threading.Thread(target=run, args=(i,)) for i in range(n)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(60)
    return results


def _assert_one_newest(store: ObjectStore, job: JobRef, attempts: list[int]) -> int:
    assert len(set(attempts)) == len(attempts), f"two starters hold the same attempt: {sorted(attempts)}"
    newest = max(attempts)
    assert read_fence(store, job) == newest
    key = fence_key(job)
    assert Fence.from_json(store.get_bytes(key), where=key).attempt == newest, "fence.json is not current"
    check_fence(store, job, newest)
    for attempt in attempts:
        if attempt != newest:
            with pytest.raises(FencedError):
                check_fence(store, job, attempt)
    return newest


def test_concurrent_starters_threads_then_commit(store, job, tmp_path) -> None:  # type: ignore[no-untyped-def]
    write_tree(tmp_path / "hot", 4)
    write_fence(store, job)  # an earlier attempt exists: starters race from attempt 1
    attempts = _race(STARTERS, lambda i: write_fence(store, job))
    newest = _assert_one_newest(store, job, attempts)

    def commit(i: int):  # type: ignore[no-untyped-def]
        writer = CheckpointWriter(store, job, attempt=attempts[i], job_uid=f"u{i}", reuse_window_seconds=0)
        try:
            return writer.take_checkpoint(tmp_path / "hot", batch_id=i).manifest.attempt
        except FencedError:
            return None
    committed = [a for a in _race(STARTERS, commit) if a is not None]
    assert committed == [newest], f"fenced attempts committed manifests: {committed}"
    assert [m.attempt for m in list_checkpoints(store, job)] == [newest]


_STARTER = """
import sys
from sparkpoint.runtime.checkpoint import write_fence
from sparkpoint.runtime.store import JobRef, open_store
store = open_store(sys.argv[1]); job = JobRef.parse(sys.argv[2])
print("ready", flush=True)
sys.stdin.readline()  # all processes released together
print(write_fence(store, job), flush=True)
"""


def test_concurrent_starters_processes(store_url, job) -> None:  # type: ignore[no-untyped-def]
    procs = [subprocess.Popen([sys.executable, "-c", _STARTER, store_url, str(job)], stdin=subprocess.PIPE,
                              stdout=subprocess.PIPE, text=True, env=dict(os.environ)) for _ in range(6)]
    for p in procs:  # every interpreter has imported and opened the store before the release
        assert p.stdout is not None and p.stdout.readline().strip() == "ready"
    for p in procs:
        p.stdin.write("go\n")  # type: ignore[union-attr]
        p.stdin.flush()  # type: ignore[union-attr]
    attempts = []
    for p in procs:
        out, _ = p.communicate(timeout=120)
        assert p.returncode == 0
        attempts.append(int(out.strip()))
    _assert_one_newest(open_store(store_url), job, attempts)


def test_fenced_writer_never_publishes_after_a_newer_claim(store, job, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    write_tree(tmp_path / "hot", 3)
    old = write_fence(store, job)
    writer = CheckpointWriter(store, job, attempt=old, job_uid="u", reuse_window_seconds=0)
    op = writer.begin(tmp_path / "hot", batch_id=1)
    op.plan()
    op.upload_all()
    write_fence(store, job)
    with pytest.raises(FencedError):
        op.commit()
    assert list_checkpoints(store, job) == []


def test_only_the_newest_of_concurrent_starters_publishes_sink_output(store, job, tmp_path) -> None:  # type: ignore[no-untyped-def]
    from sparkpoint.runtime.sink.journal import SinkJournal
    from sparkpoint.runtime.sink.transactional import TransactionalSink, read_committed
    from tests.runtime.test_sink import FakeBatch, fake_write_files

    attempts = _race(STARTERS, lambda i: write_fence(store, job))
    newest = max(attempts)

    def publish(i: int):  # type: ignore[no-untyped-def]
        sink = TransactionalSink(store, job, attempt=attempts[i], path="default",
                                 journal=SinkJournal(tmp_path / f"journal-{i}"), write_files=fake_write_files)
        sink.write_batch(FakeBatch([{"attempt": attempts[i]}]), 0)
        try:
            extra = sink.manifest_extra(0)
            sink.upload_staged(extra)  # the checkpoint's async phase, before the manifest
            sink.publish(f"chk-{i + 1:06d}", extra)
            return attempts[i]
        except FencedError:
            return None
    published = [a for a in _race(STARTERS, publish) if a is not None]
    assert published == [newest]
    assert read_committed(store, job) == [{"attempt": newest}]


@pytest.mark.parametrize("claims", [0, 1, 3])
def test_check_fence_passes_only_the_newest_claim(store, job, claims) -> None:  # type: ignore[no-untyped-def]
    """The commit path's two-probe check agrees with read_fence: only the newest claimed attempt passes;
    an older one, a number never claimed and one past the newest are fenced."""
    for _ in range(claims):
        write_fence(store, job)
    assert read_fence(store, job) == claims
    for attempt in range(claims + 3):
        if attempt == claims:
            check_fence(store, job, attempt)
        else:
            with pytest.raises(FencedError, match=f"attempt {attempt} is fenced off by attempt {claims}"):
                check_fence(store, job, attempt)


def test_a_zombie_pod_restarted_late_does_not_fence_off_a_newer_attempt(store, job) -> None:  # type: ignore[no-untyped-def]
    """The operator started attempt 2 after attempt 1's node was lost; attempt 1's container then
    restarts in place on that node. Its runtime must not claim the fence over attempt 2's (each
    start of a runtime claims a new number, in-place restarts too)."""
    first = write_fence(store, job, incarnation="uid-a", launch=1)
    second = write_fence(store, job, incarnation="uid-a", launch=2)
    with pytest.raises(FencedError, match="attempt 2 of this job has started since"):
        write_fence(store, job, incarnation="uid-a", launch=1)
    assert read_fence(store, job) == second > first
    check_fence(store, job, second)  # the newer attempt still commits
    # Its own in-place restart claims anew (the same launch), as does a job created again (a new
    # incarnation numbers its attempts from 1), and a runtime outside Kubernetes (no launch).
    assert write_fence(store, job, incarnation="uid-a", launch=2) == second + 1
    assert write_fence(store, job, incarnation="uid-b", launch=1) == second + 2
    assert write_fence(store, job) == second + 3
    fence = Fence.from_json(store.get_bytes(fence_key(job)), where="fence")
    assert fence.incarnation is None and fence.launch is None  # fence.json keeps its old shape
