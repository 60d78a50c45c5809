"""take_checkpoint / restore / savepoints / fencing against both backends."""

from __future__ import annotations

import json
import os
import shutil
from pathlib import Path

import pytest

from sparkpoint.runtime.checkpoint import (
    CheckpointWriter,
    FencedError,
    HashCache,
    RestoreError,
    create_savepoint,
    delete_savepoint,
    gc_pass,
    latest_checkpoint,
    list_checkpoint_ids,
    list_savepoints,
    load_manifest,
    restore,
    verify,
    write_fence,
)
from sparkpoint.runtime.store import JobRef, ObjectStore
from sparkpoint.runtime.store.layout import checkpoint_key, object_key, objects_prefix, pending_prefix

from .trees import change_files, tree_digest, write_tree


def new_writer(store: ObjectStore, job: JobRef, **kw) -> CheckpointWriter:  # type: ignore[no-untyped-def]
    return CheckpointWriter(store, job, attempt=write_fence(store, job), job_uid="uid-1", **kw)


def object_keys(store: ObjectStore, job: JobRef) -> set[str]:
    return {i.key for i in store.list(objects_prefix(job))}


@pytest.mark.parametrize("k", [0, 1, 7])
def test_next_checkpoint_uploads_exactly_the_k_changed_files(store, job, tmp_path, k) -> None:  # type: ignore[no-untyped-def]
    paths = write_tree(tmp_path / "hot", 24)
    writer = new_writer(store, job)
    first = writer.take_checkpoint(tmp_path / "hot", batch_id=1)
    assert first.uploaded_objects == 24 and first.reused_bytes == 0
    before = object_keys(store, job)
    changed = change_files(paths, k)
    second = writer.take_checkpoint(tmp_path / "hot", batch_id=2)
    assert second.uploaded_objects == k
    assert second.new_bytes == sum(p.stat().st_size for p in changed)
    assert second.reused_bytes == second.bytes - second.new_bytes
    assert len(object_keys(store, job) - before) == k
    assert second.manifest.base_checkpoint == first.id
    assert list_checkpoint_ids(store, job) == [first.id, second.id]


def test_full_upload_baseline_uploads_every_file_each_time(store, job, tmp_path) -> None:  # type: ignore[no-untyped-def]
    """The benchmarks' non-incremental baseline: nothing is reused, the manifests are the same."""
    write_tree(tmp_path / "hot", 12)
    writer = new_writer(store, job, full_upload=True)
    first = writer.take_checkpoint(tmp_path / "hot", batch_id=1)
    second = writer.take_checkpoint(tmp_path / "hot", batch_id=2)
    assert second.uploaded_objects == 12 and second.new_bytes == second.bytes == first.bytes
    assert second.reused_bytes == 0
    assert [e.sha256 for e in second.manifest.files] == [e.sha256 for e in first.manifest.files]
    assert new_writer(store, job).take_checkpoint(tmp_path / "hot", batch_id=3).uploaded_objects == 0


def test_unchanged_files_are_not_rehashed_and_cache_persists(store, job, tmp_path) -> None:  # type: ignore[no-untyped-def]
    write_tree(tmp_path / "hot", 10)
    cache = HashCache(tmp_path / "cache.json")
    writer = new_writer(store, job, hash_cache=cache)
    writer.take_checkpoint(tmp_path / "hot")
    assert (cache.hits, cache.misses) == (0, 10)
    writer.take_checkpoint(tmp_path / "hot")
    assert (cache.hits, cache.misses) == (10, 10)
    reloaded = HashCache(tmp_path / "cache.json")
    assert len(reloaded) == 10


def test_round_trip_is_byte_identical_and_manifest_has_contract_fields(store, job, tmp_path) -> None:  # type: ignore[no-untyped-def]
    hot = tmp_path / "hot"
    write_tree(hot, 13, size=3000)
    (hot / "metadata").write_text('{"id":"q"}')
    (hot / "empty").write_bytes(b"")
    (hot / "dup").write_bytes((hot / "metadata").read_bytes())  # same content twice: one object
    res = new_writer(store, job).take_checkpoint(hot, batch_id=42, spark_version="4.3.0",
                                                 state_provider="rocksdb", extra={"sink": ["a"]})
    doc = json.loads(store.get_bytes(checkpoint_key(job, res.id)))
    for field in ("id", "job_uid", "attempt", "batch_id", "trigger_time", "completion_time", "base_checkpoint",
                  "spark_version", "state_provider", "files", "totals", "extra"):
        assert field in doc
    assert doc["batch_id"] == 42 and doc["extra"] == {"sink": ["a"]}
    assert set(doc["files"][0]) == {"path", "size", "sha256", "crc32"}  # crc32: format 3
    assert doc["totals"]["files"] == 16
    rr = restore(store, job, tmp_path / "out")
    assert rr.manifest.id == res.id and rr.files == 16
    assert tree_digest(tmp_path / "out") == tree_digest(hot)


@pytest.mark.parametrize("damage", ["flip", "truncate", "delete", "replace"])
def test_tampering_with_any_object_fails_restore_and_verify(store, job, tmp_path, damage) -> None:  # type: ignore[no-untyped-def]
    write_tree(tmp_path / "hot", 6)
    res = new_writer(store, job).take_checkpoint(tmp_path / "hot")
    victim = res.manifest.files[3]
    key = object_key(job, victim.sha256)
    data = store.get_bytes(key)
    if damage == "flip":
        store.put_bytes(key, data[:100] + bytes([data[100] ^ 1]) + data[101:])
    elif damage == "truncate":
        store.put_bytes(key, data[:-1])
    elif damage == "delete":
        store.delete(key)
    else:
        store.put_bytes(key, bytes(len(data)))
    with pytest.raises(RestoreError, match=victim.sha256):
        restore(store, job, tmp_path / "out")
    assert not (tmp_path / "out").exists()
    assert not [p for p in tmp_path.iterdir() if "sparkpoint-restore-" in p.name]  # staging cleaned up
    (tmp_path / "mnt").mkdir()  # an existing empty target (a mount point) stays empty on failure
    with pytest.raises(RestoreError):
        restore(store, job, tmp_path / "mnt")
    assert list((tmp_path / "mnt").iterdir()) == []
    result = verify(store, job, res.id)
    assert not result.ok and len(result.problems) == 1 and victim.sha256 in result.problems[0]


@pytest.mark.parametrize("bad_path", ["../escape", "/etc/passwd", "a/../../b", "a//b", "./a"])
def test_manifest_path_escaping_the_target_is_rejected(store, job, tmp_path, bad_path) -> None:  # type: ignore[no-untyped-def]
    write_tree(tmp_path / "hot", 2)
    res = new_writer(store, job).take_checkpoint(tmp_path / "hot")
    doc = json.loads(store.get_bytes(checkpoint_key(job, res.id)))
    doc["files"][0]["path"] = bad_path
    store.put_bytes(checkpoint_key(job, res.id), json.dumps(doc).encode())
    with pytest.raises(RestoreError, match="escapes"):
        restore(store, job, tmp_path / "out")
    assert not (tmp_path / "out").exists() and not (tmp_path / "escape").exists()


def test_restore_refuses_a_non_empty_target(store, job, tmp_path) -> None:  # type: ignore[no-untyped-def]
    write_tree(tmp_path / "hot", 2)
    new_writer(store, job).take_checkpoint(tmp_path / "hot")
    (tmp_path / "out").mkdir()
    (tmp_path / "out" / "keep").write_text("mine")
    with pytest.raises(RestoreError, match="not empty"):
        restore(store, job, tmp_path / "out")
    assert os.listdir(tmp_path / "out") == ["keep"]
    (tmp_path / "out" / "keep").unlink()
    (tmp_path / "out" / ".sparkpoint-restore-crashed").mkdir()  # debris of an interrupted restore
    (tmp_path / "out" / ".sparkpoint-restore-crashed" / "half").write_text("x")
    restore(store, job, tmp_path / "out")  # an existing empty directory is fine (a mount point)
    assert tree_digest(tmp_path / "out") == tree_digest(tmp_path / "hot")


def test_restore_of_an_older_checkpoint_and_missing_ones(store, job, tmp_path) -> None:  # type: ignore[no-untyped-def]
    paths = write_tree(tmp_path / "hot", 5)
    writer = new_writer(store, job)
    first = writer.take_checkpoint(tmp_path / "hot")
    snapshot = tree_digest(tmp_path / "hot")
    change_files(paths, 2)
    writer.take_checkpoint(tmp_path / "hot")
    restore(store, job, tmp_path / "old", checkpoint_id=first.id)
    assert tree_digest(tmp_path / "old") == snapshot
    with pytest.raises(RestoreError, match="not found"):
        restore(store, job, tmp_path / "x", checkpoint_id="chk-000099")
    with pytest.raises(RestoreError, match="no completed checkpoint"):
        restore(store, JobRef("default", "empty-job"), tmp_path / "y")


def test_savepoint_survives_deletion_of_every_checkpoint(store, job, tmp_path) -> None:  # type: ignore[no-untyped-def]
    paths = write_tree(tmp_path / "hot", 8)
    writer = new_writer(store, job, reuse_window_seconds=0)  # GC below runs with no grace
    writer.take_checkpoint(tmp_path / "hot", batch_id=3)
    snapshot = tree_digest(tmp_path / "hot")
    sp = create_savepoint(store, job, "before-upgrade")
    assert sp.kind == "savepoint" and sp.source_checkpoint == "chk-000001" and sp.batch_id == 3
    with pytest.raises(Exception, match="already exists"):
        create_savepoint(store, job, "before-upgrade")
    change_files(paths, 8)
    writer.take_checkpoint(tmp_path / "hot")
    for cid in list_checkpoint_ids(store, job):  # every checkpoint gone, then GC with no grace
        store.delete(checkpoint_key(job, cid))
    gc = gc_pass(store, job, retain=1, grace_seconds=0)
    assert gc.deleted_objects == 16 and not object_keys(store, job)
    assert [m.id for m in list_savepoints(store, job)] == ["before-upgrade"]
    assert verify(store, job, savepoint="before-upgrade").ok
    restore(store, job, tmp_path / "out", savepoint="before-upgrade")
    assert tree_digest(tmp_path / "out") == snapshot
    delete_savepoint(store, job, "before-upgrade")
    assert list_savepoints(store, job) == [] and not list(store.list(f"{job.root}/savepoints/"))
    assert not list(store.list(pending_prefix(job)))


def test_zombie_writer_cannot_commit_after_a_new_attempt(store, job, tmp_path) -> None:  # type: ignore[no-untyped-def]
    paths = write_tree(tmp_path / "hot", 4)
    zombie = new_writer(store, job)
    zombie.take_checkpoint(tmp_path / "hot")
    in_flight = zombie.begin(tmp_path / "hot", batch_id=2)  # mid-checkpoint when the new pod starts
    in_flight.upload_all()
    successor = new_writer(store, job)
    assert successor.attempt == zombie.attempt + 1
    with pytest.raises(FencedError, match="fenced"):
        in_flight.commit()
    change_files(paths, 1)
    with pytest.raises(FencedError):
        zombie.take_checkpoint(tmp_path / "hot")
    assert list_checkpoint_ids(store, job) == ["chk-000001"]
    res = successor.take_checkpoint(tmp_path / "hot")
    assert load_manifest(store, job, res.id).attempt == successor.attempt
    assert latest_checkpoint(store, job).id == res.id  # type: ignore[union-attr]


def test_checkpoint_ids_never_collide_between_writers(store, job, tmp_path) -> None:  # type: ignore[no-untyped-def]
    write_tree(tmp_path / "hot", 2)
    a = new_writer(store, job)
    b = CheckpointWriter(store, job, attempt=a.attempt, job_uid="uid-1")
    op_a = a.begin(tmp_path / "hot", batch_id=1)
    op_b = b.begin(tmp_path / "hot", batch_id=1)
    assert op_a.id != op_b.id
    for op in (op_a, op_b):
        op.upload_all()
        op.commit()
    assert len(list_checkpoint_ids(store, job)) == 2


def test_checkpoint_of_a_missing_directory_is_a_clear_error(store, job, tmp_path) -> None:  # type: ignore[no-untyped-def]
    with pytest.raises(Exception, match="not a directory"):
        new_writer(store, job).take_checkpoint(Path(tmp_path / "nope"))


def test_two_in_flight_checkpoints_and_gc_keep_every_needed_object(store, job, tmp_path) -> None:  # type: ignore[no-untyped-def]
    """maxConcurrent=2: the slower operation reuses objects of a base that GC drops meanwhile."""
    paths = write_tree(tmp_path / "hot", 6)
    writer = new_writer(store, job, reuse_window_seconds=0)  # GC below runs with no grace
    writer.take_checkpoint(tmp_path / "hot")  # chk-000001
    shutil.copytree(tmp_path / "hot", tmp_path / "frozen-slow")
    slow = writer.begin(tmp_path / "frozen-slow", batch_id=2)
    slow.plan()
    assert slow.to_upload == []  # reuses everything from chk-000001
    change_files(paths, 6)
    writer.take_checkpoint(tmp_path / "hot", batch_id=3)  # the fast one commits first
    gc = gc_pass(store, job, retain=1, grace_seconds=0)
    assert gc.deleted_manifests == ["chk-000001"] and gc.deleted_objects == 0  # the pending marker protects
    result = slow.commit()
    assert result.manifest.base_checkpoint == "chk-000001"
    assert verify(store, job, result.id).ok
    assert writer.base.id == "chk-000003"  # type: ignore[union-attr]  # base never moves backwards
