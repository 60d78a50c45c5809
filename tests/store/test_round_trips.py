"""A checkpoint's round trips to the store that do not depend on each other overlap (issue 10: the
commit step made four sequential round trips, about 150 ms of a checkpoint at 20 ms each).

A store wrapper makes the calls meet at a barrier: calls that ran one after another would never
meet, and the barrier's timeout fails the checkpoint. The checkpoints run on both real backends.
"""

from __future__ import annotations

import threading
from collections.abc import Callable

import pytest

from sparkpoint.runtime.checkpoint import CheckpointWriter, FencedError, restore, write_fence
from sparkpoint.runtime.checkpoint.concurrent_calls import concurrently
from sparkpoint.runtime.store import ObjectStore
from sparkpoint.runtime.store.layout import attempt_claim_key, checkpoints_prefix, pending_key, pending_prefix

from .trees import change_files, tree_digest, write_tree


class Meeting:
    """A real store whose chosen calls wait for each other at a barrier (10 s, then BrokenBarrierError)."""

    def __init__(self, inner: ObjectStore, parties: int, joins: Callable[[str, str], bool]):
        self.inner, self.joins = inner, joins
        self.barrier = threading.Barrier(parties, timeout=10)
        self.met = 0
        self._lock = threading.Lock()  # the calls that meet count themselves at the same moment

    def __getattr__(self, name: str):  # type: ignore[no-untyped-def]
        return getattr(self.inner, name)

    def _meet(self, call: str, key: str) -> None:
        if self.joins(call, key):
            self.barrier.wait()
            with self._lock:
                self.met += 1

    def stat(self, key: str):  # type: ignore[no-untyped-def]
        self._meet("stat", key)
        return self.inner.stat(key)

    def list(self, prefix: str):  # type: ignore[no-untyped-def]
        self._meet("list", prefix)
        return self.inner.list(prefix)


def _first_checkpoint(store, job, tmp_path):  # type: ignore[no-untyped-def]
    paths = write_tree(tmp_path / "hot", 8)
    fence = write_fence(store, job)
    CheckpointWriter(store, job, attempt=fence, job_uid="u", reuse_window_seconds=0).take_checkpoint(
        tmp_path / "hot", batch_id=1)
    change_files(paths, 2)
    return fence


def test_the_commit_checks_are_one_round_trip(store, job, tmp_path) -> None:  # type: ignore[no-untyped-def]
    """The fence's two probes and the pending marker's stat meet: they run at once."""
    fence = _first_checkpoint(store, job, tmp_path)
    checks = {attempt_claim_key(job, fence), attempt_claim_key(job, fence + 1)}
    meeting = Meeting(store, 3, lambda call, key: call == "stat" and (key in checks or key.startswith(pending_prefix(job))))
    result = CheckpointWriter(meeting, job, attempt=fence, job_uid="u", reuse_window_seconds=0).take_checkpoint(  # type: ignore[arg-type]
        tmp_path / "hot", batch_id=2)
    assert meeting.met == 3
    assert store.stat(pending_key(job, result.id)) is None, "the marker is removed once committed"
    restore(store, job, tmp_path / "out", checkpoint_id=result.id)
    assert tree_digest(tmp_path / "out") == tree_digest(tmp_path / "hot")


def test_the_claim_lists_completed_and_pending_ids_at_once(store, job, tmp_path) -> None:  # type: ignore[no-untyped-def]
    fence = _first_checkpoint(store, job, tmp_path)
    claiming = threading.Event()  # the writer's constructor lists checkpoints/ alone: only the claim's listings meet
    meeting = Meeting(store, 2, lambda call, key: claiming.is_set() and call == "list"
                      and key in (checkpoints_prefix(job), pending_prefix(job)))
    writer = CheckpointWriter(meeting, job, attempt=fence, job_uid="u", reuse_window_seconds=0)  # type: ignore[arg-type]
    claiming.set()
    result = writer.take_checkpoint(tmp_path / "hot", batch_id=2)
    assert meeting.met == 2 and result.id == "chk-000002"


def test_a_fenced_writer_still_commits_nothing(store, job, tmp_path) -> None:  # type: ignore[no-untyped-def]
    fence = _first_checkpoint(store, job, tmp_path)
    writer = CheckpointWriter(store, job, attempt=fence, job_uid="u", reuse_window_seconds=0)
    write_fence(store, job)  # a newer attempt starts while this writer runs
    with pytest.raises(FencedError, match=f"attempt {fence} is fenced off by attempt {fence + 1}"):
        writer.take_checkpoint(tmp_path / "hot", batch_id=2)
    assert [o.key for o in store.list(pending_prefix(job))] == [], "the fenced operation's marker is gone"


# --- the helper, alone -------------------------------------------------------------------------------
def test_concurrently_runs_every_call_and_raises_the_first_failure_after_all_ended() -> None:
    barrier, ended = threading.Barrier(3, timeout=10), []

    def call(i: int, fail: bool):  # type: ignore[no-untyped-def]
        def run() -> int:
            barrier.wait()  # sequential calls would never meet here
            ended.append(i)
            if fail:
                raise ValueError(f"call {i}")
            return i * 10
        return run
    assert concurrently(call(0, False), call(1, False), call(2, False)) == [0, 10, 20]
    barrier.reset()
    ended.clear()
    with pytest.raises(ValueError, match="call 1"):
        concurrently(call(0, False), call(1, True), call(2, True))
    assert sorted(ended) == [0, 1, 2], "a failure does not leave calls running behind the caller"
    assert concurrently() == []
