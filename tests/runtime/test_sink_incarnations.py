"""A job re-created with the same name (a new StreamingJob uid, an "incarnation") never mixes its
output with the earlier job's (issue 25, case 2), for either gc.onDelete policy, on both backends.

Each incarnation runs the real CheckpointWriter (so checkpoint ids are numbered as in a pod: above
every id the earlier job used, also once its checkpoints are deleted) beside a TransactionalSink.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from sparkpoint.operator.store.view import delete_checkpoints
from sparkpoint.runtime.checkpoint import (
    CheckpointWriter,
    create_savepoint,
    latest_checkpoint,
    load_savepoint,
    write_fence,
)
from sparkpoint.runtime.sink.journal import SinkJournal
from sparkpoint.runtime.sink.transactional import (
    CommitEntryConflict,
    TransactionalSink,
    commit_key,
    committed_entries,
    read_committed,
)
from sparkpoint.runtime.store.layout import (
    checkpoints_prefix,
    fence_key,
    objects_prefix,
    outputs_prefix,
    pending_prefix,
    savepoints_prefix,
)

from .test_sink import FakeBatch, fake_write_files


class Incarnation:
    """One StreamingJob (uid) of the name: a new attempt with its writer and sink, as a pod has."""

    def __init__(self, store, job, tmp_path: Path, uid: str):
        self.store, self.job, self.uid = store, job, uid
        attempt = write_fence(store, job, incarnation=uid)
        self.hot = tmp_path / f"hot-{uid}-{attempt}"
        self.hot.mkdir()
        self.writer = CheckpointWriter(store, job, attempt=attempt, job_uid=uid, reuse_window_seconds=0)
        self.sink = TransactionalSink(store, job, attempt=attempt, path="default", incarnation=uid,
                                      journal=SinkJournal(tmp_path / f"journal-{uid}-{attempt}"),
                                      write_files=fake_write_files)

    def start(self, restore: str = "latest") -> None:
        """restore: 'latest' (the runtime's default), 'fresh' (restoreFrom.fresh) or a savepoint name."""
        if restore == "fresh":
            self.sink.resume(None, None)
            return
        m = latest_checkpoint(self.store, self.job) if restore == "latest" else load_savepoint(
            self.store, self.job, restore)
        self.sink.resume(m and (m.source_checkpoint or m.id), m.extra if m else None)

    def run(self, batches: list[int]) -> str:
        """Run the batches (one row each, naming the incarnation), then checkpoint: the checkpoint's id."""
        for b in batches:
            self.sink.write_batch(FakeBatch([{"by": self.uid, "batch": b}]), b)
        (self.hot / "state").write_text(f"{self.uid} {batches}")
        extra = self.sink.manifest_extra(batches[-1])
        self.sink.upload_staged(extra)  # before the manifest, as the pipeline's async phase does
        result = self.writer.take_checkpoint(self.hot, batch_id=batches[-1], extra=extra)
        self.sink.publish(result.id, result.manifest.extra)
        return result.id


def _rows(store, job) -> list[tuple[str, int]]:
    return [(r["by"], r["batch"]) for r in read_committed(store, job)]


def _first_job(store, job, tmp_path) -> Incarnation:
    a = Incarnation(store, job, tmp_path, "uid-a")
    a.start()
    assert [a.run([0]), a.run([1]), a.run([2])] == ["chk-000001", "chk-000002", "chk-000003"]
    return a


def test_delete_policy_removes_the_output_so_a_new_job_of_the_name_sees_only_its_rows(store, job, tmp_path):
    _first_job(store, job, tmp_path)
    delete_checkpoints(store, job)  # gc.onDelete: delete, as the operator's finalizer runs it
    assert not list(store.list(outputs_prefix(job)))
    b = Incarnation(store, job, tmp_path, "uid-b")
    b.start()
    assert b.run([0, 1]) == "chk-000004"  # never an id the first job used (id_floor.py)
    # Before: B's entry chk-000001 "already existed", so its rows were dropped.
    assert _rows(store, job) == [("uid-b", 0), ("uid-b", 1)]
    assert [e["incarnation"] for e in committed_entries(store, job, "default")] == ["uid-b"]


def test_output_left_behind_by_an_earlier_job_fails_the_publish_loudly(store, job, tmp_path):
    """The earlier job's checkpoints were deleted but not its output (an operator before this fix,
    or by hand): the new job's publish meets an entry it did not write and must not pass."""
    _first_job(store, job, tmp_path)
    for prefix in (checkpoints_prefix(job), pending_prefix(job), objects_prefix(job)):
        for info in list(store.list(prefix)):
            store.delete(info.key)
    b = Incarnation(store, job, tmp_path, "uid-b")
    b.start()
    with pytest.raises(CommitEntryConflict, match="incarnation uid-a.*this is incarnation uid-b"):
        b.run([0])
    assert json.loads(store.get_bytes(commit_key(job, "default", "chk-000001")))["incarnation"] == "uid-a"
    # Nothing is dropped: the rows stay staged and the next checkpoint names them again.
    assert [f["batch"] for f in b.sink.manifest_extra(0)["sink"]["files"]] == [0]


def test_retain_policy_continues_the_history_and_entries_name_their_job(store, job, tmp_path):
    _first_job(store, job, tmp_path)
    b = Incarnation(store, job, tmp_path, "uid-b")
    b.start()  # ResumingExistingCheckpoints: the newest retained checkpoint, chk-000003
    assert b.run([3]) == "chk-000004"
    assert _rows(store, job) == [("uid-a", 0), ("uid-a", 1), ("uid-a", 2), ("uid-b", 3)]
    entries = committed_entries(store, job, "default")
    assert [(e["checkpoint"], e["incarnation"]) for e in entries] == [
        ("chk-000001", "uid-a"), ("chk-000002", "uid-a"), ("chk-000003", "uid-a"), ("chk-000004", "uid-b")]


def test_a_fresh_start_over_retained_output_takes_new_ids_and_hides_the_old_rows(store, job, tmp_path):
    _first_job(store, job, tmp_path)
    b = Incarnation(store, job, tmp_path, "uid-b")
    b.start("fresh")  # restoreFrom.fresh over the retained checkpoints
    assert b.run([0]) == "chk-000004"
    assert _rows(store, job) == [("uid-b", 0)]
    old = json.loads(store.get_bytes(commit_key(job, "default", "chk-000001")))
    assert old["incarnation"] == "uid-a"  # the earlier job's entries stay readable, apart


def test_a_savepoint_restored_after_the_delete_policy_starts_a_new_output_history(store, job, tmp_path):
    a = _first_job(store, job, tmp_path)
    create_savepoint(store, job, "keep", "chk-000002")
    a.run([3])
    delete_checkpoints(store, job)
    assert list(store.list(savepoints_prefix(job)))  # savepoints are kept
    b = Incarnation(store, job, tmp_path, "uid-b")
    b.start("keep")  # its output history was deleted with the job: nothing to re-publish
    assert _rows(store, job) == []
    assert b.run([2, 3]) == "chk-000005"
    assert _rows(store, job) == [("uid-b", 2), ("uid-b", 3)]


def test_publish_accepts_only_the_entry_it_would_write(store, job, tmp_path):
    """A re-publish of the same checkpoint (a retry, or a later attempt after a crash between
    manifest and entry) passes; another entry under the id raises, whoever wrote it."""
    a = Incarnation(store, job, tmp_path, "uid-a")
    a.start()
    a.sink.write_batch(FakeBatch([{"v": 1}]), 0)
    extra = a.sink.manifest_extra(0)
    a.sink.upload_staged(extra)
    assert extra["sink"]["incarnation"] == "uid-a"
    assert a.sink.publish("chk-000001", extra) is True
    assert a.sink.publish("chk-000001", json.loads(json.dumps(extra))) is False  # as read from the manifest
    later = Incarnation(store, job, tmp_path, "uid-a")  # the same job's next attempt restores it
    later.sink.resume("chk-000001", extra)
    assert later.sink.publish("chk-000001", extra) is False
    other = {"sink": {**extra["sink"], "files": [], "upToBatch": 5}}  # same incarnation, other content
    with pytest.raises(CommitEntryConflict):
        later.sink.publish("chk-000001", other)
    stranger = {"sink": {**extra["sink"], "incarnation": "uid-b"}}
    with pytest.raises(CommitEntryConflict, match="uid-b"):
        later.sink.publish("chk-000001", stranger)
    assert [r["v"] for r in read_committed(store, job)] == [1]


def test_delete_policy_function_removes_outputs_and_keeps_savepoints_and_the_fence(store, job):
    root = job.root
    keys = {f"{root}/outputs/default/_commits/chk-000001.json", f"{root}/outputs/default/staging/a/b.jsonl",
            f"{root}/outputs/agg/upserts/batch-000000001-a000001.jsonl", f"{root}/checkpoints/chk-000001.json",
            f"{root}/pending/chk-000002.json", f"{root}/objects/aa/{'a' * 64}",
            f"{root}/lineage/000001.savepoint.keep.json", f"{root}/savepoints/keep/manifest.json",
            fence_key(job)}
    for key in keys:
        store.put_bytes(key, b"{}")
    assert delete_checkpoints(store, job) == 7
    assert {o.key for o in store.list(f"{root}/")} == {f"{root}/savepoints/keep/manifest.json", fence_key(job),
                                                       f"{root}/checkpoint-ids.json"}
    assert json.loads(store.get_bytes(f"{root}/checkpoint-ids.json")) == {"highest": 2}  # the pending chk-000002


def test_upsert_restore_records_name_the_incarnation(store, job, tmp_path):
    from sparkpoint.runtime.sink.transactional import sink_root
    from sparkpoint.runtime.sink.upsert import UpsertSink

    sink = UpsertSink(store, job, path="agg", key_columns=["k"], attempt=write_fence(store, job),
                      incarnation="uid-a", staging_dir=tmp_path / "upsert-staging")
    sink.resume(None, None)
    doc = json.loads(store.get_bytes(f"{sink_root(job, 'agg')}/upserts/_restores/a{sink.attempt:06d}.json"))
    assert doc == {"attempt": sink.attempt, "afterBatch": -1, "incarnation": "uid-a"}


# Issue 39, cases 2 and 3: a savepoint kept from an earlier job of the name (gc.onDelete: delete).


def _kept_savepoint_then_new_job(store, job, tmp_path, checkpoints: int = 5) -> Incarnation:
    a = Incarnation(store, job, tmp_path, "uid-a")
    a.start()
    for b in range(checkpoints):
        a.run([b])
    create_savepoint(store, job, "keep", f"chk-{checkpoints:06d}")  # previous: chk-<checkpoints - 1>
    delete_checkpoints(store, job)
    b = Incarnation(store, job, tmp_path, "uid-b")
    b.start()
    return b


def test_checkpoint_ids_continue_above_a_deleted_job_of_the_name(store, job, tmp_path):
    """Before: the new job numbered from chk-000001 again, so its entries took ids a kept savepoint names."""
    b = _kept_savepoint_then_new_job(store, job, tmp_path)
    assert b.run([0]) == "chk-000006"
    assert json.loads(store.get_bytes(f"{job.root}/checkpoint-ids.json")) == {"highest": 5}


def test_ids_continue_above_a_savepoint_in_a_store_deleted_before_the_record(store, job, tmp_path):
    """A store deleted by an operator before checkpoint-ids.json: the kept savepoint alone sets the floor."""
    b = _kept_savepoint_then_new_job(store, job, tmp_path, checkpoints=3)
    store.delete(f"{job.root}/checkpoint-ids.json")
    c = Incarnation(store, job, tmp_path, "uid-b")  # the next start of the new job, before its first checkpoint
    c.start()
    assert c.run([0]) == "chk-000004"
    assert b.writer is not c.writer


def test_output_gc_is_not_blocked_by_a_savepoint_of_a_deleted_job(store, job, tmp_path):
    """Before: `_needed` raised OutputLineageError (the savepoint's predecessor entry is gone with its
    job) and the path was skipped on every pass, until the new job's ids reached that entry's."""
    from sparkpoint.runtime.checkpoint import gc_pass
    from sparkpoint.runtime.sink.output_gc import output_gc_pass

    b = _kept_savepoint_then_new_job(store, job, tmp_path)
    superseded = [b.run([0]), b.run([1])]
    b2 = Incarnation(store, job, tmp_path, "uid-b")
    b2.start("fresh")  # leaves b's history superseded: garbage once no point needs it
    b2.run([0])
    gc_pass(store, job, retain=1, grace_seconds=0, clock=lambda: 4e9)  # b's checkpoints leave retention
    result = output_gc_pass(store, job, grace_seconds=0, clock=lambda: 4e9)
    assert result.skipped_paths == []
    assert set(result.deleted_entries) >= {f"default:{cid}" for cid in superseded}
    assert _rows(store, job) == [("uid-b", 0)]


def test_restoring_a_savepoint_of_a_deleted_job_starts_a_new_history_after_the_new_job_ran(store, job, tmp_path):
    """Before: once the new job's ids reached the savepoint's, its restore met the new job's entry
    under its source id and the start failed with CommitEntryConflict."""
    b = _kept_savepoint_then_new_job(store, job, tmp_path, checkpoints=2)
    for batch in range(3):
        b.run([batch])
    c = Incarnation(store, job, tmp_path, "uid-b")
    c.start("keep")
    assert _rows(store, job) == []
    c.run([2, 3])
    assert _rows(store, job) == [("uid-b", 2), ("uid-b", 3)]


def test_a_store_whose_ids_already_repeated_restores_the_savepoint_as_a_new_history(store, job, tmp_path):
    """A store from before the fix: the new job re-used the savepoint's source id for its own entry."""
    b = _kept_savepoint_then_new_job(store, job, tmp_path, checkpoints=2)
    store.delete(f"{job.root}/checkpoint-ids.json")
    for cid in ("chk-000001", "chk-000002"):  # what the old numbering gave the new job
        doc = {"checkpoint": cid, "afterBatch": -1, "upToBatch": 0, "files": [], "incarnation": "uid-b",
               "attempt": b.sink.attempt, "previous": None}
        store.put_bytes(commit_key(job, "default", cid), json.dumps(doc, sort_keys=True).encode())
    c = Incarnation(store, job, tmp_path, "uid-b")
    c.start("keep")  # before: CommitEntryConflict
    c.run([2])
    assert _rows(store, job) == [("uid-b", 2)]
