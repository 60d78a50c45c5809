"""Upsert snapshots (runtime/sink/upsert_snapshot.py, docs/design.md §7): the choice of S, the fold,
and a snapshot + GC cycle on both store backends (MinIO: the `store` fixture's second backend)."""

from __future__ import annotations

from dataclasses import replace
from datetime import UTC
from pathlib import Path

import pytest

from sparkpoint.runtime.checkpoint import write_fence
from sparkpoint.runtime.sink.compaction import CompactionSettings
from sparkpoint.runtime.sink.keys import sink_root
from sparkpoint.runtime.sink.output_gc import output_gc_pass
from sparkpoint.runtime.sink.upsert import UpsertSink, read_upserted
from sparkpoint.runtime.sink.upsert_snapshot import (
    Fold,
    low_restores,
    restorable_points,
    safe_batch,
    upsert_needs,
)
from sparkpoint.runtime.store import JobRef, Manifest
from sparkpoint.runtime.store.layout import checkpoint_key
from sparkpoint.runtime.store.manifest import Totals, utcnow

from .test_sink import FakeBatch, fake_write_files

LATER = 4e9  # every object is past the grace


def write_point(store, job: JobRef, cid: str, attempt: int, batch: int) -> None:
    """A checkpoint manifest as far as the upsert sink cares: its attempt and batch."""
    now = utcnow()
    m = Manifest(id=cid, namespace=job.namespace, job=job.name, job_uid="uid", attempt=attempt, batch_id=batch,
                 trigger_time=now, completion_time=now, base_checkpoint=None, spark_version=None,
                 state_provider=None, files=[], totals=Totals(files=0, bytes=0, new_bytes=0, reused_bytes=0))
    store.put_bytes(checkpoint_key(job, cid), m.to_json())


def upsert_sink(store, job, tmp_path: Path, attempt: int, fmt: str = "parquet") -> UpsertSink:
    return UpsertSink(store, job, path="agg", key_columns=["k"], attempt=attempt, fmt=fmt,
                      staging_dir=tmp_path / f"up-{attempt}", write_files=fake_write_files,
                      compaction=CompactionSettings(interval_seconds=0, min_files=2))


def upserts(store, job) -> list[str]:
    return sorted(o.key for o in store.list(f"{sink_root(job, 'agg')}/upserts/"))


# --- the choice of S (pure) --------------------------------------------------------------------------

def test_s_is_at_or_below_every_restorable_point_and_what_the_newest_attempt_committed():
    restores = [(1, -1), (2, 5)]
    assert safe_batch([(1, 9), (1, 12)], 2, restores) == 5  # attempt 2 restored to 5, no checkpoint of its own yet
    assert safe_batch([(1, 9), (2, 20)], 2, restores) == 9  # an old checkpoint (or savepoint) at 9
    assert safe_batch([(2, 20), (2, 30)], 2, restores) == 20
    assert safe_batch([], 2, restores) == 5
    assert safe_batch([(2, 20)], 3, restores) is None  # attempt 3 has not recorded its start yet
    assert safe_batch([(1, None)], 2, restores) is None  # a point whose batch is unknown
    assert safe_batch([], 1, [(1, -1)]) is None  # a fresh start without checkpoints: nothing is safe
    assert safe_batch([(3, 40)], 2, restores) is None  # a newer attempt's checkpoint than the fence read


def test_a_snapshot_depends_only_on_restores_below_its_batch():
    assert low_restores([(3, 10), (1, -1), (2, 4)], 5) == ((1, -1), (2, 4))
    assert low_restores([(3, 10)], 10) == ()  # a restore to S supersedes only batches after S


def test_the_fold_keeps_the_last_row_per_key_in_first_seen_order(tmp_path):
    fold = Fold(tmp_path)
    for key, row in [("b", "1"), ("a", "2"), ("b", "3"), ("c", "4"), ("a", "5")]:
        fold.add(key, row)
    assert list(fold.rows()) == ["3", "5", "4"]
    table: dict[str, str] = {}
    for key, row in [("b", "1"), ("a", "2"), ("b", "3"), ("c", "4"), ("a", "5")]:
        table[key] = row
    assert list(fold.rows()) == list(table.values())  # what read_upserted's dict gives
    fold.close()
    assert not any(tmp_path.iterdir())


# --- a snapshot and a GC pass ------------------------------------------------------------------------

@pytest.mark.parametrize("fmt", ["parquet", "jsonl"])
def test_a_snapshot_lets_gc_collect_the_batches_it_holds_and_readers_see_the_same(store, job, tmp_path, fmt):
    sink = upsert_sink(store, job, tmp_path, write_fence(store, job), fmt)
    sink.resume(None, None, batch=None)
    for b in range(6):
        sink.write_batch(FakeBatch([{"k": b % 3, "n": b, "ts": f"2026-01-0{b + 1}"}, {"k": 9, "n": b}]), b)
    assert sink.compact() is None  # no checkpoint yet: a fresh start's batches are not safe
    write_point(store, job, "chk-000001", sink.attempt, 3)
    before = read_upserted(store, job, "agg", ["k"])
    done = sink.compact()
    assert done == {"files": 4, "upToBatch": 3, "rows": 4}
    assert list(read_upserted(store, job, "agg", ["k"]).items()) == list(before.items())  # same, same order

    dry = output_gc_pass(store, job, grace_seconds=0, dry_run=True, clock=lambda: LATER)
    assert dry.deleted_folded_files == dry.deleted_files == 4 * 3  # 4 batches, each a marker and 2 parts
    assert len(upserts(store, job)) == 6 * 3 + 1 + 2  # 6 batches (marker, 2 parts), restore, snapshot
    result = output_gc_pass(store, job, grace_seconds=0, clock=lambda: LATER)
    assert result.deleted_folded_files == result.deleted_files == 4 * 3
    assert not [k for k in upserts(store, job) if "/batch-00000000" in k and int(k.split("batch-")[1][:9]) <= 3]
    assert list(read_upserted(store, job, "agg", ["k"]).items()) == list(before.items())

    # a later snapshot builds on the first; the first goes once the second is past the grace
    write_point(store, job, "chk-000002", sink.attempt, 5)
    assert sink.compact() is None  # chk-000001 (batch 3) is still restorable
    store.delete(checkpoint_key(job, "chk-000001"))  # retention took it
    assert sink.compact() == {"files": 2, "upToBatch": 5, "rows": 4}
    # while the newest snapshot is inside the grace, readers may still be on the older one and its
    # batches after it: those stay (the listing's times stand for a pass at LATER)
    listed = [replace(o, last_modified=LATER - (10 if "snap-000000005" in o.key else 7200))
              for o in store.list(f"{sink_root(job, 'agg')}/upserts/")]
    needs = upsert_needs(store, listed, points=restorable_points(store, job), newest_attempt=sink.attempt,
                         now=LATER, grace_seconds=3600)
    assert needs.folded_up_to == -1 and not needs.released
    assert {k for k in needs.needed if "/_snapshots/" in k} == {k for k in upserts(store, job) if "/_snapshots/" in k}
    assert {k for k in upserts(store, job) if "/batch-000000004" in k} <= needs.needed
    output_gc_pass(store, job, grace_seconds=0, clock=lambda: LATER)
    snaps = [k for k in upserts(store, job) if "/_snapshots/" in k]
    assert len(snaps) == 2 and all("snap-000000005" in k for k in snaps)
    assert list(read_upserted(store, job, "agg", ["k"]).items()) == list(before.items())


def test_a_restore_to_a_checkpoint_after_s_reads_the_same_as_without_snapshot(store, job, tmp_path):
    first = upsert_sink(store, job, tmp_path, write_fence(store, job))
    first.resume(None, None, batch=None)
    for b in range(8):
        first.write_batch(FakeBatch([{"k": b % 4, "n": b}]), b)
    write_point(store, job, "chk-000001", first.attempt, 3)
    write_point(store, job, "chk-000002", first.attempt, 6)
    assert first.compact()["upToBatch"] == 3
    output_gc_pass(store, job, grace_seconds=0, clock=lambda: LATER)
    second = upsert_sink(store, job, tmp_path, write_fence(store, job))
    second.resume("chk-000001", {}, batch=3)  # batches 4..7 of attempt 1 are superseded
    assert read_upserted(store, job, "agg", ["k"]) == {"[0]": {"k": 0, "n": 0}, "[1]": {"k": 1, "n": 1},
                                                      "[2]": {"k": 2, "n": 2}, "[3]": {"k": 3, "n": 3}}
    second.write_batch(FakeBatch([{"k": 0, "n": 40}]), 4)
    assert read_upserted(store, job, "agg", ["k"])["[0]"] == {"k": 0, "n": 40}
    third = upsert_sink(store, job, tmp_path, write_fence(store, job))
    third.resume(None, None, batch=None)  # a fresh start: the snapshot no longer applies
    third.write_batch(FakeBatch([{"k": 7, "n": 0}]), 0)
    assert read_upserted(store, job, "agg", ["k"]) == {"[7]": {"k": 7, "n": 0}}


def test_a_snapshot_written_in_one_time_zone_reads_as_the_batches_do_in_another(store, job, tmp_path, monkeypatch):
    import time as time_module
    from datetime import datetime

    def zone(name: str) -> None:
        monkeypatch.setenv("TZ", name)
        time_module.tzset()

    at = datetime(2026, 3, 1, 12, 30, 0, 123456, tzinfo=UTC)
    sink = upsert_sink(store, job, tmp_path, write_fence(store, job))
    sink.resume(None, None, batch=None)
    for b in range(3):
        sink.write_batch(FakeBatch([{"k": b % 2, "at": at, "n": b}]), b)
    write_point(store, job, "chk-000001", sink.attempt, 2)
    try:
        zone("Asia/Tokyo")  # the runtime's zone
        assert sink.compact()["upToBatch"] == 2
        zone("America/New_York")  # a reader's
        rows = read_upserted(store, job, "agg", ["k"])
        assert rows["[0]"]["at"] == "2026-03-01T07:30:00.123456"  # local time, as the batches read
        output_gc_pass(store, job, grace_seconds=0, clock=lambda: LATER)
        assert read_upserted(store, job, "agg", ["k"]) == rows
        write_point(store, job, "chk-000002", sink.attempt, 4)
        store.delete(checkpoint_key(job, "chk-000001"))
        for b in (3, 4):
            sink.write_batch(FakeBatch([{"k": 2, "at": at, "n": b}]), b)
        zone("Asia/Tokyo")
        assert sink.compact()["upToBatch"] == 4  # builds on the first snapshot
        zone("America/New_York")
        assert read_upserted(store, job, "agg", ["k"]) == {**rows, "[2]": {"k": 2, "at": "2026-03-01T07:30:00.123456", "n": 4}}
    finally:
        monkeypatch.delenv("TZ")
        time_module.tzset()


def test_a_failed_snapshot_run_leaves_nothing_visible_and_its_parts_go_later(store, job, tmp_path):
    from sparkpoint.runtime.store.base import StoreError

    class MarkerFails:
        def __init__(self, inner):
            self.inner = inner

        def __getattr__(self, name):
            return getattr(self.inner, name)

        def put_bytes(self, key, data):
            if "/_snapshots/" in key and key.endswith(".json") and "/part-" not in key:
                raise StoreError("injected: the store fails the marker")
            return self.inner.put_bytes(key, data)

    sink = upsert_sink(store, job, tmp_path, write_fence(store, job))
    sink.resume(None, None, batch=None)
    for b in range(4):
        sink.write_batch(FakeBatch([{"k": b % 2, "n": b}]), b)
    write_point(store, job, "chk-000001", sink.attempt, 3)
    before = read_upserted(store, job, "agg", ["k"])
    sink.store = MarkerFails(store)
    with pytest.raises(StoreError):
        sink.compact()
    sink.store = store
    orphans = [k for k in upserts(store, job) if "/_snapshots/" in k]
    assert orphans and read_upserted(store, job, "agg", ["k"]) == before
    output_gc_pass(store, job, grace_seconds=0, clock=lambda: LATER)
    assert set(orphans) <= set(upserts(store, job))  # the newest attempt's: maybe in flight
    assert sink.compact()["upToBatch"] == 3
    output_gc_pass(store, job, grace_seconds=0, clock=lambda: LATER)
    assert not set(orphans) & set(upserts(store, job))  # older than the snapshot now in use: failed
    assert read_upserted(store, job, "agg", ["k"]) == before
