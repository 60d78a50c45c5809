"""Restore on start against a real store (a directory and MinIO): fallbacks past corrupt or missing
checkpoints, an explicit restoreFrom that is never replaced, and local state judged against the
fence and the store's latest checkpoint (no Spark: the hot dirs are Spark-shaped trees)."""

from __future__ import annotations

from pathlib import Path

import pytest

from sparkpoint.runtime.checkpoint import CheckpointWriter, write_fence
from sparkpoint.runtime.checkpoint.freeze import freeze
from sparkpoint.runtime.checkpoint.restore import RestoreError
from sparkpoint.runtime.checkpoint.savepoint import create_savepoint
from sparkpoint.runtime.config import RestoreFrom
from sparkpoint.runtime.service.hotdir import owner_of
from sparkpoint.runtime.service.recovery import restore_on_start
from sparkpoint.runtime.store.layout import checkpoint_key, object_key, savepoint_object_key

from .test_freeze import _write, make_hot_dir


def checkpoint_of(store, job, tmp: Path, committed: int, attempt: int):  # type: ignore[no-untyped-def]
    """A checkpoint of a Spark-shaped hot dir at `committed`, with one file unique to it."""
    hot = tmp / f"hot-{committed}"
    make_hot_dir(hot, committed=committed, planned=committed, snapshots=set(), versions=committed + 1)
    _write(hot / "sources" / "0" / "0", f"unique to batch {committed}")
    freeze(hot, tmp / f"frozen-{committed}")
    writer = CheckpointWriter(store, job, attempt=attempt, job_uid="u")
    return writer.take_checkpoint(tmp / f"frozen-{committed}", batch_id=committed).manifest


def unique_sha(manifest) -> str:  # type: ignore[no-untyped-def]
    return next(f.sha256 for f in manifest.files if f.path == "sources/0/0")


def start(store, job, work: Path, attempt: int, restore_from=None, local_recovery=True):  # type: ignore[no-untyped-def]
    return restore_on_start(store=store, job=job, store_url=store.url, work_dir=work, hot_dir=work / "hot",
                            restore_from=restore_from, local_recovery=local_recovery, attempt=attempt)


def test_falls_back_newest_first_then_savepoints_and_fails_only_when_nothing_restores(store, job, tmp_path):
    attempt = write_fence(store, job)
    c1 = checkpoint_of(store, job, tmp_path, 3, attempt)
    create_savepoint(store, job, "sp-one", c1.id)
    c2 = checkpoint_of(store, job, tmp_path, 5, attempt)
    c3 = checkpoint_of(store, job, tmp_path, 7, attempt)
    bad = unique_sha(c3)  # same size, wrong bytes
    store.put_bytes(object_key(job, bad), b"\0" * next(f.size for f in c3.files if f.sha256 == bad))
    store.delete(object_key(job, unique_sha(c2)))
    out = start(store, job, tmp_path / "pod1", write_fence(store, job))
    assert (out.source, out.manifest.id, out.batch_id) == ("remote", c1.id, 3)
    assert [f.to_json()["checkpoint"] for f in out.fallbacks] == [c3.id, c2.id]
    assert [f.reason for f in out.fallbacks] == ["corrupt_object", "missing_object"]
    assert "corrupt" in out.fallbacks[0].error and "missing" in out.fallbacks[1].error
    assert (tmp_path / "pod1" / "hot" / "sources" / "0" / "0").read_text() == "unique to batch 3"
    assert owner_of(tmp_path / "pod1")["checkpoint"] == c1.id
    # The oldest manifest corrupt too: the savepoint (self-contained copies) is the last resort.
    store.put_bytes(checkpoint_key(job, c1.id), b"{not json")
    out = start(store, job, tmp_path / "pod2", write_fence(store, job))
    assert (out.source, out.manifest.id, out.batch_id) == ("remote", "sp-one", 3)
    assert out.fallbacks[-1].to_json() == {"checkpoint": c1.id, "error": out.fallbacks[-1].error}
    assert out.fallbacks[-1].reason == "corrupt_manifest"
    store.delete(savepoint_object_key(job, "sp-one", unique_sha(c1)))
    with pytest.raises(RestoreError, match="no restorable checkpoint or savepoint") as err:
        start(store, job, tmp_path / "pod3", write_fence(store, job))
    assert c3.id in str(err.value) and "sp-one" in str(err.value)
    assert not (tmp_path / "pod3" / "hot").exists()  # nothing half-restored


def test_explicit_restore_from_is_never_replaced(store, job, tmp_path):
    attempt = write_fence(store, job)
    c1 = checkpoint_of(store, job, tmp_path, 3, attempt)
    c2 = checkpoint_of(store, job, tmp_path, 5, attempt)
    store.delete(object_key(job, unique_sha(c1)))
    with pytest.raises(RestoreError, match=f"restoreFrom checkpoint:{c1.id} failed.*not falling back"):
        start(store, job, tmp_path / "pod", write_fence(store, job), restore_from=RestoreFrom(checkpoint=c1.id))
    with pytest.raises(RestoreError, match="savepoint 'nope'.*not found"):
        start(store, job, tmp_path / "pod", write_fence(store, job), restore_from=RestoreFrom(savepoint="nope"))
    out = start(store, job, tmp_path / "pod", write_fence(store, job), restore_from=RestoreFrom(checkpoint=c2.id))
    assert out.manifest.id == c2.id and out.lineage == {"restoredFrom": f"checkpoint:{c2.id}"}


def test_old_pod_hot_dir_is_not_trusted_after_a_newer_attempt(store, job, tmp_path):
    """Item 6: pod A's hot dir is valid and even ahead by batch number, but attempt B took over."""
    a = write_fence(store, job)
    c1 = checkpoint_of(store, job, tmp_path, 3, a)
    pod_a = tmp_path / "pod-a"
    assert start(store, job, pod_a, a).manifest.id == c1.id  # A restores c1 and runs on to batch 9
    make_hot_dir(pod_a / "hot", committed=9, planned=9, snapshots=set(), versions=10)
    # A plain container restart of A continues locally.
    a2 = write_fence(store, job)
    assert start(store, job, pod_a, a2).source == "local"
    # Pod B takes over (attempt a2+1) but writes no checkpoint yet; then A's container restarts.
    b = write_fence(store, job)
    assert start(store, job, tmp_path / "pod-b", b).source == "remote"
    out = start(store, job, pod_a, write_fence(store, job))
    assert (out.source, out.manifest.id) == ("remote", c1.id)
    assert "another attempt claimed the fence" in out.reason
    # Same when B has written a newer checkpoint: A's higher local batch numbers do not make its hot
    # dir the store's history.
    make_hot_dir(pod_a / "hot", committed=9, planned=9, snapshots=set(), versions=10)
    b2 = write_fence(store, job)
    c2 = checkpoint_of(store, job, tmp_path, 5, b2)
    out = start(store, job, pod_a, write_fence(store, job))
    assert (out.source, out.manifest.id, out.batch_id) == ("remote", c2.id, 5)


def test_corrupt_newest_manifest_falls_back_and_checkpoints_go_on(store, job, tmp_path):
    attempt = write_fence(store, job)
    c1 = checkpoint_of(store, job, tmp_path, 3, attempt)
    c2 = checkpoint_of(store, job, tmp_path, 5, attempt)
    store.put_bytes(checkpoint_key(job, c2.id), b'{"truncated')
    out = start(store, job, tmp_path / "pod", write_fence(store, job))
    assert (out.manifest.id, [f.reason for f in out.fallbacks]) == (c1.id, ["corrupt_manifest"])
    # The next checkpoint of this attempt is not blocked by the unreadable newest manifest.
    c3 = checkpoint_of(store, job, tmp_path, 7, write_fence(store, job))
    assert c3.base_checkpoint == c1.id and c3.id > c2.id


def test_restore_from_fresh_starts_empty_then_keeps_to_its_own_history(store, job, tmp_path):
    """upgradeMode stateless: checkpoints of the old history exist, yet the start is empty; once a
    checkpoint of the new history exists, a later start (new pod) restores it, never an older one."""
    attempt = write_fence(store, job)
    checkpoint_of(store, job, tmp_path, 9, attempt)
    fresh = RestoreFrom(fresh="upgrade-3")
    fresh_attempt = write_fence(store, job)
    out = start(store, job, tmp_path / "pod1", fresh_attempt, restore_from=fresh)
    assert (out.source, out.manifest, out.batch_id) == ("fresh", None, None)
    assert out.lineage == {"restoredFrom": "fresh:upgrade-3"}
    assert not (tmp_path / "pod1" / "hot").exists() or not any((tmp_path / "pod1" / "hot").iterdir())
    # The new history's first checkpoint carries the lineage (the runner passes out.lineage on).
    hot = tmp_path / "hot-new"
    make_hot_dir(hot, committed=2, planned=2, snapshots=set(), versions=3)
    freeze(hot, tmp_path / "frozen-new")
    new = CheckpointWriter(store, job, attempt=fresh_attempt, job_uid="u").take_checkpoint(
        tmp_path / "frozen-new", batch_id=2, extra=out.lineage).manifest
    again = start(store, job, tmp_path / "pod2", write_fence(store, job), restore_from=fresh)
    assert (again.source, again.manifest.id, again.batch_id) == ("remote", new.id, 2)
