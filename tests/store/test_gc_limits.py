"""GC refuses a grace period that the writers' reuse window makes unsafe (issue 8 item 4)."""

from __future__ import annotations

import pytest

from sparkpoint.runtime.checkpoint import CheckpointWriter, GcError, gc_pass, write_fence
from sparkpoint.runtime.checkpoint.catalog import list_checkpoint_ids, load_manifest
from sparkpoint.runtime.spec import job as config
from sparkpoint.runtime.spec import parse_duration
from sparkpoint.runtime.store.layout import objects_prefix, pending_prefix

from .clirun import sparkpoint, sparkpoint_json
from .trees import change_files, write_tree


def test_gc_refuses_grace_shorter_than_twice_the_recorded_reuse_window(store, job, tmp_path) -> None:  # type: ignore[no-untyped-def]
    paths = write_tree(tmp_path / "hot", 6)
    writer = CheckpointWriter(store, job, attempt=write_fence(store, job), job_uid="u", reuse_window_seconds=300)
    first = writer.take_checkpoint(tmp_path / "hot", batch_id=1)
    assert load_manifest(store, job, first.id).reuse_window_seconds == 300
    change_files(paths, 2)
    writer.take_checkpoint(tmp_path / "hot", batch_id=2)
    before = {i.key for i in store.list(objects_prefix(job))}
    for grace in (0, 599.0):
        with pytest.raises(GcError, match="grace") as err:
            gc_pass(store, job, retain=1, grace_seconds=grace)
        assert "600" in str(err.value) or "10m" in str(err.value)
    assert {i.key for i in store.list(objects_prefix(job))} == before, "a refused pass deleted objects"
    assert len(list_checkpoint_ids(store, job)) == 2, "a refused pass deleted manifests"
    assert gc_pass(store, job, retain=1, grace_seconds=600).deleted_objects == 0  # 2 x window: allowed


def test_gc_sees_the_window_of_an_in_flight_checkpoint(store, job, tmp_path) -> None:  # type: ignore[no-untyped-def]
    write_tree(tmp_path / "hot", 3)
    writer = CheckpointWriter(store, job, attempt=write_fence(store, job), job_uid="u", reuse_window_seconds=120)
    op = writer.begin(tmp_path / "hot", batch_id=1)  # only the pending marker records the window
    with pytest.raises(GcError, match="grace"):
        gc_pass(store, job, retain=1, grace_seconds=60)
    op.abort()


def test_runtime_writer_lets_gc_delete_orphans_as_soon_as_they_are_unreferenced(store, job, tmp_path) -> None:  # type: ignore[no-untyped-def]
    """The runtime's writer records no reuse window, so the default grace (which only covers clock
    skew) is accepted and a pass leaves just the retained checkpoints' objects; a failed checkpoint's
    uploads stay (its marker is kept) until the next checkpoint reuses them and drops the marker."""
    spec = config.parse_spec({"job": {"entrypoint": "a:b"}})
    assert parse_duration(spec.gc.grace) == 60
    hot = tmp_path / "hot"
    paths = write_tree(hot, 3)
    writer = CheckpointWriter(store, job, attempt=write_fence(store, job), job_uid="u",
                              reuse_window_seconds=0, carry_failed=True)
    for seed in range(3):
        change_files(paths, 1, seed=seed)
        writer.take_checkpoint(hot)
    change_files(paths, 1, seed=7)
    failed = writer.begin(hot, batch_id=9)
    (hot / "new-file").write_bytes(b"x" * 4096)  # not in the failed one's set: only the next has it
    failed.plan()
    failed.upload_all()
    failed.abort()
    result = gc_pass(store, job, retain=1, grace_seconds=0)
    live = load_manifest(store, job, list_checkpoint_ids(store, job)[-1]).shas() | set(failed.sources)
    held = {k.key.rsplit("/", 1)[-1] for k in store.list(objects_prefix(job))}
    assert result.deleted_objects > 0 and held == live  # orphans of dropped checkpoints: gone at once
    assert result.live_pending == [failed.id]
    nxt = writer.take_checkpoint(hot)
    assert nxt.uploaded_objects == 1  # only new-file: what the failed checkpoint uploaded is reused
    assert list(store.list(pending_prefix(job))) == []
    writer.begin(hot, batch_id=10).abort()
    writer.close()  # a clean stop drops kept markers: nothing will reuse them
    assert gc_pass(store, job, retain=1, grace_seconds=0).live_pending == []


def test_cli_reuse_window_flag_and_gc_refusal(store_url, job, tmp_path) -> None:  # type: ignore[no-untyped-def]
    common = ["--store", store_url, "--job", str(job)]
    write_tree(tmp_path / "hot", 4)
    sparkpoint_json("checkpoints", "create", "--from", str(tmp_path / "hot"), *common)  # default 5m
    refused = sparkpoint("gc", "--retain", "1", "--grace", "0s", "--once", *common, check=False)
    assert refused.returncode != 0
    assert "--grace" in refused.stderr and "reuse window" in refused.stderr and "10m" in refused.stderr
    assert sparkpoint_json("gc", "--retain", "1", "--grace", "10m", "--once", *common)["deleted_objects"] == 0

    other = ["--store", store_url, "--job", f"{job.namespace}/{job.name}-zero"]
    made = sparkpoint_json("checkpoints", "create", "--from", str(tmp_path / "hot"), "--reuse-window", "0s",
                           *other)
    assert made["id"] == "chk-000001"
    assert sparkpoint_json("gc", "--retain", "1", "--grace", "0s", "--once", *other)["deleted_objects"] == 0
    bad = sparkpoint("checkpoints", "create", "--from", str(tmp_path / "hot"), "--reuse-window", "soon",
                     *other, check=False)
    assert bad.returncode == 2 and "--reuse-window" in bad.stderr
