"""Restore on start against a real store (a directory and MinIO): fallbacks past corrupt or missing
checkpoints, an explicit restoreFrom that is never replaced, an applied one never applied again (its
lineage record), and local state judged against the fence and the store's latest checkpoint (no
Spark: the hot dirs are Spark-shaped trees)."""

from __future__ import annotations

from pathlib import Path

import pytest

from sparkpoint.runtime.checkpoint import CheckpointWriter, write_fence
from sparkpoint.runtime.checkpoint.freeze import freeze, latest_committed_batch
from sparkpoint.runtime.checkpoint.gc import gc_pass
from sparkpoint.runtime.checkpoint.restore import RestoreError
from sparkpoint.runtime.checkpoint.savepoint import create_savepoint
from sparkpoint.runtime.service.hotdir import owner_of, update_owner
from sparkpoint.runtime.service.recovery import LineageUnknownError, restore_on_start
from sparkpoint.runtime.spec import RestoreFrom
from sparkpoint.runtime.store import StoreUnreachableError
from sparkpoint.runtime.store.layout import (
    checkpoint_key,
    lineage_prefix,
    lineage_record_key,
    object_key,
    savepoint_object_key,
)

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
    # exit 3 names every point that failed, so the operator blames exactly those (issue 25 case 3)
    assert err.value.points == (f"checkpoint:{c3.id}", f"checkpoint:{c2.id}", f"checkpoint:{c1.id}",
                                "savepoint:sp-one")


def test_explicit_restore_from_is_never_replaced(store, job, tmp_path):
    attempt = write_fence(store, job)
    c1 = checkpoint_of(store, job, tmp_path, 3, attempt)
    c2 = checkpoint_of(store, job, tmp_path, 5, attempt)
    store.delete(object_key(job, unique_sha(c1)))
    with pytest.raises(RestoreError, match=f"restoreFrom checkpoint:{c1.id} failed.*not falling back") as err:
        start(store, job, tmp_path / "pod", write_fence(store, job), restore_from=RestoreFrom(checkpoint=c1.id))
    assert err.value.points == (f"checkpoint:{c1.id}",)  # the point it was given, not the newest
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


def checkpoint_pod(store, job, pod: Path, attempt: int, committed: int, lineage: dict):  # type: ignore[no-untyped-def]
    """What the runner does at a checkpoint: the pod's hot dir (run on to `committed`) frozen and
    stored with the attempt's lineage, then the owner record updated."""
    make_hot_dir(pod / "hot", committed=committed, planned=committed, snapshots=set(), versions=committed + 1)
    freeze(pod / "hot", pod / f"frozen-{committed}")
    manifest = CheckpointWriter(store, job, attempt=attempt, job_uid="u").take_checkpoint(
        pod / f"frozen-{committed}", batch_id=committed, extra=lineage).manifest
    update_owner(pod, checkpoint=manifest.id)
    return manifest


def test_applied_fresh_point_is_not_applied_again_when_the_newest_manifest_is_unreadable(store, job, tmp_path):
    """Issue 25 case 1: a corrupt newest manifest must not restart a `fresh:` lineage empty (losing its
    state and output history) nor override the valid hot dir of that lineage."""
    checkpoint_of(store, job, tmp_path, 9, write_fence(store, job))  # the history before the upgrade
    fresh, pod1 = RestoreFrom(fresh="upgrade-3"), tmp_path / "pod1"
    first = write_fence(store, job)
    out = start(store, job, pod1, first, restore_from=fresh)
    assert out.source == "fresh"
    new1 = checkpoint_pod(store, job, pod1, first, 2, out.lineage)
    new2 = checkpoint_pod(store, job, pod1, first, 4, out.lineage)
    make_hot_dir(pod1 / "hot", committed=6, planned=6, snapshots=set(), versions=7)  # ran on past new2
    store.put_bytes(checkpoint_key(job, new2.id), b'{"truncated')
    # A container restart: the lineage's own hot dir is resumed, not wiped for a second fresh start.
    out = start(store, job, pod1, write_fence(store, job), restore_from=fresh)
    assert (out.source, out.batch_id, out.lineage) == ("local", 6, {"restoredFrom": "fresh:upgrade-3"})
    assert latest_committed_batch(pod1 / "hot") == 6
    # A new pod: the lineage's newest readable checkpoint, past the corrupt one (recorded as a fallback).
    out = start(store, job, tmp_path / "pod2", write_fence(store, job), restore_from=fresh)
    assert (out.source, out.manifest and out.manifest.id, out.batch_id) == ("remote", new1.id, 2)
    assert [f.reason for f in out.fallbacks] == ["corrupt_manifest"]
    assert out.lineage == {"restoredFrom": "fresh:upgrade-3"}


def test_applied_savepoint_is_not_restored_again_when_the_newest_manifest_is_unreadable(store, job, tmp_path):
    base = checkpoint_of(store, job, tmp_path, 3, write_fence(store, job))
    create_savepoint(store, job, "sp-one", base.id)
    sp, pod1 = RestoreFrom(savepoint="sp-one"), tmp_path / "pod1"
    first = write_fence(store, job)
    out = start(store, job, pod1, first, restore_from=sp)
    assert (out.source, out.manifest.id) == ("remote", "sp-one")
    c1 = checkpoint_pod(store, job, pod1, first, 5, out.lineage)
    c2 = checkpoint_pod(store, job, pod1, first, 7, out.lineage)
    store.put_bytes(checkpoint_key(job, c2.id), b"{not json")
    out = start(store, job, tmp_path / "pod2", write_fence(store, job), restore_from=sp)
    assert (out.manifest.id, out.batch_id) == (c1.id, 5)  # not a rewind to the savepoint's batch 3
    assert [f.to_json().get("checkpoint") for f in out.fallbacks] == [c2.id]


def test_a_savepoint_applied_again_does_not_resume_the_history_of_its_earlier_application(store, job, tmp_path):
    """Found by the machine model: a savepoint restored a second time (the user named it again after
    the history moved on) must not make a new pod resume a checkpoint its first application wrote;
    that checkpoint carries the same lineage tag but is the abandoned timeline."""
    base = checkpoint_of(store, job, tmp_path, 3, write_fence(store, job))
    create_savepoint(store, job, "sp-one", base.id)
    sp = RestoreFrom(savepoint="sp-one")
    first = write_fence(store, job)
    out = start(store, job, tmp_path / "pod1", first, restore_from=sp)
    old_run = checkpoint_pod(store, job, tmp_path / "pod1", first, 5, out.lineage)  # first application's
    other = RestoreFrom(checkpoint=base.id)  # the history moves on from another point
    moved = write_fence(store, job)
    out = start(store, job, tmp_path / "pod2", moved, restore_from=other)
    checkpoint_pod(store, job, tmp_path / "pod2", moved, 7, out.lineage)
    again = write_fence(store, job)  # sp-one named again: applied anew, no checkpoint of it yet
    out = start(store, job, tmp_path / "pod3", again, restore_from=sp)
    assert (out.source, out.manifest.id, out.batch_id) == ("remote", "sp-one", 3)
    out = start(store, job, tmp_path / "pod4", write_fence(store, job), restore_from=sp)  # its pod is lost
    assert (out.source, out.manifest.id, out.batch_id) == ("remote", "sp-one", 3), \
        f"resumed {out.manifest.id}, a checkpoint of the first application ({old_run.id})"

def test_a_job_created_again_applies_its_restore_from_though_an_earlier_job_of_the_name_did(store, job, tmp_path):
    """Found by the machine model: with gc.onDelete retain, a StreamingJob created again under its name
    with restoreFrom naming a savepoint the earlier job once applied must apply it, not take the
    earlier job's lineage record as 'applied already' and resume that job's newest checkpoint."""
    base = checkpoint_of(store, job, tmp_path, 3, write_fence(store, job))
    create_savepoint(store, job, "sp-one", base.id)
    sp, first = RestoreFrom(savepoint="sp-one"), write_fence(store, job)
    out = restore_on_start(store=store, job=job, store_url=store.url, work_dir=tmp_path / "pod1",
                           hot_dir=tmp_path / "pod1" / "hot", restore_from=sp, local_recovery=True, attempt=first,
                           incarnation="uid-old")
    checkpoint_pod(store, job, tmp_path / "pod1", first, 8, out.lineage)  # the earlier job ran on
    out = restore_on_start(store=store, job=job, store_url=store.url, work_dir=tmp_path / "pod2",
                           hot_dir=tmp_path / "pod2" / "hot", restore_from=sp, local_recovery=True,
                           attempt=write_fence(store, job), incarnation="uid-new")
    assert (out.source, out.manifest.id, out.batch_id) == ("remote", "sp-one", 3)
    # ...and the new job's next pod keeps to its own application (its record names its incarnation)
    out = restore_on_start(store=store, job=job, store_url=store.url, work_dir=tmp_path / "pod3",
                           hot_dir=tmp_path / "pod3" / "hot", restore_from=sp, local_recovery=True,
                           attempt=write_fence(store, job), incarnation="uid-new")
    assert (out.source, out.manifest.id) == ("remote", "sp-one")

class LineageRecordsDown:
    """The job's store, except that listing the lineage records fails (an outage of that one call)."""

    def __init__(self, store, job):  # type: ignore[no-untyped-def]
        self._store, self._prefix = store, lineage_prefix(job)

    def __getattr__(self, name: str):  # type: ignore[no-untyped-def]
        return getattr(self._store, name)

    def list(self, prefix: str):  # type: ignore[no-untyped-def]
        if prefix.startswith(self._prefix):
            raise StoreUnreachableError(f"list {prefix}: connection reset")
        return self._store.list(prefix)


def test_lineage_record_outlives_gc_and_an_unreadable_one_fails_the_start(store, job, tmp_path):
    checkpoint_of(store, job, tmp_path, 9, write_fence(store, job))  # the history before the upgrade
    fresh, pod1 = RestoreFrom(fresh="upgrade-3"), tmp_path / "pod1"
    first = write_fence(store, job)
    out = start(store, job, pod1, first, restore_from=fresh)
    record = lineage_record_key(job, first, "fresh:upgrade-3")
    assert store.exists(record) and owner_of(pod1)["restoredFrom"] == "fresh:upgrade-3"
    new1 = checkpoint_pod(store, job, pod1, first, 2, out.lineage)
    assert gc_pass(store, job, retain=1, grace_seconds=10**6).deleted_manifests  # the old history's
    assert store.exists(record)
    store.put_bytes(checkpoint_key(job, new1.id), b"{")  # the lineage's only checkpoint unreadable
    # Neither the records nor any manifest can tell: the start fails (a store error: retried), the
    # hot dir untouched, rather than apply the fresh point again.
    with pytest.raises(LineageUnknownError, match="cannot tell whether restoreFrom fresh:upgrade-3"):
        start(LineageRecordsDown(store, job), job, tmp_path / "pod2", write_fence(store, job), restore_from=fresh)
    # Records readable: applied, and nothing of its history restores, so it starts where that history
    # began, loudly (the fallback listed), in the same lineage.
    out = start(store, job, tmp_path / "pod2", write_fence(store, job), restore_from=fresh)
    assert (out.source, out.lineage) == ("fresh", {"restoredFrom": "fresh:upgrade-3"})
    assert [(f.point.id, f.reason) for f in out.fallbacks] == [(new1.id, "corrupt_manifest")]
