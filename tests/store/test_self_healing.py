"""Self-healing reuse and the writer's late checks (issue 8 items 3 and 8), on both backends."""

from __future__ import annotations

import threading
import time
from pathlib import Path

import pytest

from sparkpoint.runtime.checkpoint import CheckpointError, CheckpointWriter, restore, verify, write_fence
from sparkpoint.runtime.checkpoint.catalog import list_checkpoint_ids
from sparkpoint.runtime.store import JobRef, ObjectStore
from sparkpoint.runtime.store.layout import object_key, objects_prefix, pending_key

from .clirun import sparkpoint_json
from .trees import change_files, rewrite_in_place, tree_digest, write_tree


def _writer(store: ObjectStore, job: JobRef, **kw) -> CheckpointWriter:  # type: ignore[no-untyped-def]
    return CheckpointWriter(store, job, attempt=write_fence(store, job), job_uid="u", **kw)


class CountingStore:
    """Counts requests per method (proxy to a real store)."""

    def __init__(self, inner: ObjectStore):
        self.inner, self.calls = inner, {}

    def __getattr__(self, name: str):  # type: ignore[no-untyped-def]
        attr = getattr(self.inner, name)
        if not callable(attr):
            return attr

        def counted(*a, **kw):  # type: ignore[no-untyped-def]
            self.calls[name] = self.calls.get(name, 0) + 1
            return attr(*a, **kw)
        return counted


def test_a_lost_reused_object_is_uploaded_again_by_the_next_checkpoint(store, job, tmp_path) -> None:  # type: ignore[no-untyped-def]
    paths = write_tree(tmp_path / "hot", 12)
    writer = _writer(store, job, reuse_window_seconds=0)
    first = writer.take_checkpoint(tmp_path / "hot", batch_id=1)
    lost = first.manifest.files[4]
    store.delete(object_key(job, lost.sha256))  # a lifecycle rule, an operator's mistake, ...
    change_files([p for p in paths if p.name != Path(lost.path).name], 2)
    second = writer.take_checkpoint(tmp_path / "hot", batch_id=2)
    assert second.uploaded_objects == 3, "the lost object must be uploaded again with the 2 changed files"
    assert verify(store, job, second.id, deep=True).ok
    restore(store, job, tmp_path / "out", checkpoint_id=second.id)
    assert tree_digest(tmp_path / "out") == tree_digest(tmp_path / "hot")


def test_reuse_check_is_one_listing_not_a_request_per_object(store, job, tmp_path) -> None:  # type: ignore[no-untyped-def]
    write_tree(tmp_path / "hot", 40)
    _writer(store, job, reuse_window_seconds=0).take_checkpoint(tmp_path / "hot", batch_id=1)
    counting = CountingStore(store)
    writer = CheckpointWriter(counting, job, attempt=1, job_uid="u", reuse_window_seconds=0)  # type: ignore[arg-type]
    counting.calls.clear()
    writer.take_checkpoint(tmp_path / "hot", batch_id=2)
    assert counting.calls.get("stat", 0) <= 3, counting.calls
    assert counting.calls.get("list", 0) <= 4, counting.calls


def test_cli_create_heals_a_lost_object(store_url, job, tmp_path) -> None:  # type: ignore[no-untyped-def]
    common = ["--store", store_url, "--job", str(job), "--reuse-window", "0s"]
    write_tree(tmp_path / "hot", 6)
    first = sparkpoint_json("checkpoints", "create", "--from", str(tmp_path / "hot"), *common)
    from sparkpoint.runtime.store import open_store

    store = open_store(store_url)
    victim = next(i.key for i in store.list(objects_prefix(job)))
    store.delete(victim)
    second = sparkpoint_json("checkpoints", "create", "--from", str(tmp_path / "hot"), *common)
    assert first["uploaded_objects"] == 6 and second["uploaded_objects"] == 1
    assert verify(store, job, second["id"], deep=True).ok


def test_pending_marker_removed_mid_checkpoint_commits_nothing(store, job, tmp_path) -> None:  # type: ignore[no-untyped-def]
    write_tree(tmp_path / "hot", 8)
    writer = _writer(store, job, reuse_window_seconds=0)
    first = writer.take_checkpoint(tmp_path / "hot", batch_id=1)
    op = writer.begin(tmp_path / "hot", batch_id=2)
    op.plan()
    op.upload_all()
    # The writer paused past the pending timeout: GC removed its marker and may have removed the
    # objects the marker protected.
    store.delete(pending_key(job, op.id))
    store.delete(object_key(job, first.manifest.files[0].sha256))
    with pytest.raises(CheckpointError, match="pending marker"):
        op.commit()
    assert list_checkpoint_ids(store, job) == [first.id]


def test_pending_marker_older_than_the_gc_timeout_commits_nothing(store, job, tmp_path) -> None:  # type: ignore[no-untyped-def]
    """GC judges a marker abandoned by its age and deletes the objects before the marker itself."""
    write_tree(tmp_path / "hot", 4)
    now = [0.0]
    writer = CheckpointWriter(store, job, attempt=write_fence(store, job), job_uid="u", reuse_window_seconds=0,
                              pending_timeout_seconds=600, clock=lambda: time.time() + now[0])
    op = writer.begin(tmp_path / "hot", batch_id=1)
    op.plan()
    op.upload_all()
    now[0] = 601  # the writer was paused past the pending timeout
    with pytest.raises(CheckpointError, match="pending timeout"):
        op.commit()
    assert list_checkpoint_ids(store, job) == []


def test_file_rewritten_between_hashing_and_upload_fails_the_checkpoint(store, job, tmp_path) -> None:  # type: ignore[no-untyped-def]
    paths = write_tree(tmp_path / "hot", 5)
    writer = _writer(store, job, reuse_window_seconds=0)
    op = writer.begin(tmp_path / "hot", batch_id=1)
    rewrite_in_place(paths[2])
    with pytest.raises(CheckpointError, match="changed"):
        op.plan()
        op.upload_all()
        op.commit()
    assert list_checkpoint_ids(store, job) == []


class NoObjectDeletes:
    """A store whose credential cannot delete objects (the runtime role of access_policy.py)."""

    def __init__(self, inner: ObjectStore):
        self.inner = inner

    def delete(self, key: str) -> None:
        if "/objects/" not in key:
            self.inner.delete(key)

    def __getattr__(self, name: str):  # type: ignore[no-untyped-def]
        return getattr(self.inner, name)


def test_wrong_bytes_left_by_a_failed_upload_are_not_carried_to_the_next_checkpoint(store, job, tmp_path) -> None:  # type: ignore[no-untyped-def]
    """The runtime's writer reuses what its failed checkpoints uploaded, but only uploads it re-checked:
    an object whose source changed while it was read (and that the role could not delete) is uploaded
    again, so the next checkpoint restores byte for byte."""
    hot = tmp_path / "hot"
    paths = write_tree(hot, 5)
    limited = NoObjectDeletes(store)
    writer = CheckpointWriter(limited, job, attempt=write_fence(store, job), job_uid="u",  # type: ignore[arg-type]
                              reuse_window_seconds=0, carry_failed=True, upload_workers=1)
    victim = paths[2]
    op = writer.begin(hot, batch_id=1)
    op.plan()
    data = rewrite_in_place(victim)  # while it is uploaded
    with pytest.raises(CheckpointError, match="changed"):
        op.upload_all()
    op.abort()
    assert store.stat(pending_key(job, op.id)) is not None  # kept for the next checkpoint
    victim.write_bytes(data)  # the next checkpoint needs the original content (and hash) again
    result = writer.take_checkpoint(hot, batch_id=2)
    assert result.uploaded_objects >= 1 and store.stat(pending_key(job, op.id)) is None
    restore(store, job, tmp_path / "restored", workers=1)
    assert tree_digest(tmp_path / "restored") == tree_digest(hot)


def test_a_cancelled_checkpoint_stops_hashing_and_uploading(store, job, tmp_path) -> None:  # type: ignore[no-untyped-def]
    write_tree(tmp_path / "hot", 60, size=2048)
    counting = CountingStore(store)
    writer = CheckpointWriter(counting, job, attempt=write_fence(store, job), job_uid="u",  # type: ignore[arg-type]
                              reuse_window_seconds=0, upload_workers=1, hash_workers=1)
    seen, cancelled = [0], threading.Event()

    class TimedOut(Exception):
        pass

    def stop_check() -> None:
        seen[0] += 1
        if seen[0] > 5:
            cancelled.set()
        if cancelled.is_set():
            raise TimedOut("request timed out")
    with pytest.raises(TimedOut):
        writer.take_checkpoint(tmp_path / "hot", batch_id=1, stop_check=stop_check)
    assert writer.hash_cache.misses < 20, "hashing went on after the request timed out"
    assert counting.calls.get("put_file", 0) == 0
    assert list_checkpoint_ids(store, job) == []
