"""The transactional sink's commit protocol, on both store backends (the upsert sink: test_sink_upsert.py)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from sparkpoint.runtime.checkpoint import FencedError, write_fence
from sparkpoint.runtime.sink.journal import SinkJournal
from sparkpoint.runtime.sink.rows import decode_rows, encode_rows
from sparkpoint.runtime.sink.transactional import TransactionalSink, commit_key, read_committed, sink_root


class FakeBatch:
    """Just enough of a DataFrame for the sinks: columns, and rows for fake_write_files (the sinks'
    stand-in for Spark's executors). No collect(): a sink that collects a batch on the driver fails."""

    def __init__(self, rows, columns=None):
        self.rows, self.columns = rows, columns or sorted({k for r in rows for k in r})


def fake_write_files(df: FakeBatch, directory: Path, fmt: str) -> int:
    """What Spark's executors do for the sinks (batch_files.py), without Spark: part
    files under `directory` plus Spark's _SUCCESS marker; two parts when there are rows to split."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    directory.mkdir(parents=True)
    (directory / "_SUCCESS").write_bytes(b"")
    half = (len(df.rows) + 1) // 2
    for i, rows in enumerate(r for r in (df.rows[:half], df.rows[half:]) if r):
        name = f"part-{i:05d}-0f0f-c000"
        if fmt == "parquet":
            pq.write_table(pa.Table.from_pylist(rows), directory / f"{name}.snappy.parquet")
        else:
            (directory / f"{name}.json").write_bytes(encode_rows(rows))
    return len(df.rows)


def _sink(store, job, tmp_path: Path, attempt: int) -> TransactionalSink:
    return TransactionalSink(store, job, attempt=attempt, path="default", write_files=fake_write_files,
                             journal=SinkJournal(tmp_path / f"journal-{attempt}"))


def _checkpoint(sink: TransactionalSink, checkpoint_id: str, up_to_batch: int) -> dict:
    """What a checkpoint does for the sink: note the files (sync), upload them, publish the entry."""
    extra = sink.manifest_extra(up_to_batch)
    sink.upload_staged(extra)
    sink.publish(checkpoint_id, extra)
    return extra


def test_staged_rows_are_invisible_until_published(store, job, tmp_path):
    attempt = write_fence(store, job)
    sink = _sink(store, job, tmp_path, attempt)
    for b in range(4):
        sink.write_batch(FakeBatch([{"k": b, "v": b * 10}]), b)
    assert read_committed(store, job) == []
    extra = sink.manifest_extra(up_to_batch=2)
    assert [f["batch"] for f in extra["sink"]["files"]] == [0, 1, 2]
    assert not any(store.exists(k) for k in extra["sink"]["files"][0]["keys"])  # staged on local disk only
    sink.upload_staged(extra)
    assert sink.publish("chk-000001", extra) is True
    assert sink.publish("chk-000001", extra) is False  # idempotent re-publish after a crash
    assert [r["k"] for r in read_committed(store, job)] == [0, 1, 2]
    extra2 = sink.manifest_extra(up_to_batch=3)
    assert [f["batch"] for f in extra2["sink"]["files"]] == [3]
    sink.upload_staged(extra2)
    sink.publish("chk-000002", extra2)
    assert [r["k"] for r in read_committed(store, job)] == [0, 1, 2, 3]


def test_rerun_batch_replaces_journal_entry_and_zombie_cannot_publish(store, job, tmp_path):
    old = write_fence(store, job)
    zombie = _sink(store, job, tmp_path, old)
    zombie.write_batch(FakeBatch([{"k": "first"}]), 0)
    extra = zombie.manifest_extra(0)
    zombie.upload_staged(extra)
    new = write_fence(store, job)  # a newer attempt starts: the old one is fenced off
    with pytest.raises(FencedError):
        zombie.publish("chk-000001", extra)
    assert not store.exists(commit_key(job, "default", "chk-000001"))
    fresh = _sink(store, job, tmp_path, new)
    fresh.journal = zombie.journal  # same pod: local recovery keeps the journal
    fresh.write_batch(FakeBatch([{"k": "rerun"}]), 0)  # Spark re-ran batch 0
    _checkpoint(fresh, "chk-000001", 0)
    assert read_committed(store, job) == [{"k": "rerun"}]


def test_overlapping_commit_entries_do_not_duplicate(store, job, tmp_path):
    sink = _sink(store, job, tmp_path, write_fence(store, job))
    for b in range(3):
        sink.write_batch(FakeBatch([{"b": b}]), b)
    first = sink.manifest_extra(1)  # two checkpoints frozen while neither had published
    second = sink.manifest_extra(2)
    sink.upload_staged(second)
    sink.publish("chk-000002", second)
    sink.upload_staged(first)  # its files were forgotten locally: already in the store
    sink.publish("chk-000001", first)
    assert sorted(r["b"] for r in read_committed(store, job)) == [0, 1, 2]


def test_rows_round_trip():
    import datetime

    rows = [{"b": 2, "a": datetime.datetime(2026, 1, 1, 0, 0, 10), "w": {"start": "x"}}]
    data = encode_rows(rows)
    assert json.loads(data.decode().splitlines()[0])["a"] == "2026-01-01T00:00:10"
    assert decode_rows(data)[0]["w"] == {"start": "x"}


# --- lineage across restores (issue 8, item 1) ------------------------------------------------------
def _stage(sink: TransactionalSink, batches: dict[int, list[int]]) -> None:
    for b, values in batches.items():
        sink.write_batch(FakeBatch([{"v": v} for v in values]), b)


def _resume(sink: TransactionalSink, checkpoint_id: str, extra: dict) -> None:
    """What the runtime does after restoring the manifest of `checkpoint_id` (or a savepoint of it)."""
    sink.resume(checkpoint_id, extra)


def test_restore_to_an_older_checkpoint_with_new_batch_boundaries(store, job, tmp_path):
    first = _sink(store, job, tmp_path, write_fence(store, job))
    _stage(first, {0: [1, 2], 1: [3, 4]})
    chk1 = _checkpoint(first, "chk-000001", 1)
    _stage(first, {2: [5, 6], 3: [7, 8]})
    _checkpoint(first, "chk-000002", 3)
    assert [r["v"] for r in read_committed(store, job)] == list(range(1, 9))

    # restore chk-1 (restoreFrom, a savepoint or a fallback) and re-run with other boundaries
    second = _sink(store, job, tmp_path, write_fence(store, job))
    _resume(second, "chk-000001", chk1)
    # until the new run publishes, readers see the history it continues: rows 5..8 are superseded
    assert [r["v"] for r in read_committed(store, job)] == [1, 2, 3, 4]
    _stage(second, {2: [5, 6, 7], 3: [8, 9], 4: [10]})
    _checkpoint(second, "chk-000003", 4)
    assert [r["v"] for r in read_committed(store, job)] == list(range(1, 11))


def test_commit_entries_sort_numerically(store, job, tmp_path):
    from sparkpoint.runtime.sink.transactional import committed_entries

    sink = _sink(store, job, tmp_path, write_fence(store, job))
    _stage(sink, {0: [1]})
    _checkpoint(sink, "chk-999999", 0)
    _stage(sink, {1: [2]})
    _checkpoint(sink, "chk-1000000", 1)
    assert [e["checkpoint"] for e in committed_entries(store, job, "default")] == ["chk-999999", "chk-1000000"]
    assert [r["v"] for r in read_committed(store, job)] == [1, 2]


def test_rerun_batch_without_rows_drops_the_stale_journal_entry(store, job, tmp_path):
    old = _sink(store, job, tmp_path, write_fence(store, job))
    _stage(old, {0: [1], 1: [2]})  # staged, never published: the container restarts
    new = _sink(store, job, tmp_path, write_fence(store, job))
    new.journal = old.journal  # same pod: local recovery keeps the journal
    _stage(new, {1: []})  # Spark re-runs batch 1; this time it emits nothing
    _checkpoint(new, "chk-000001", 1)
    assert [r["v"] for r in read_committed(store, job)] == [1]


def test_entries_from_before_lineage_are_read_as_a_linear_history(store, job, tmp_path):
    """A job upgraded from a version without lineage: its old entries (no `previous`, possibly
    overlapping) read as before, and the new entries chain onto them."""
    legacy = []
    for n, (after, up) in enumerate([(-1, 0), (-1, 1), (1, 2)], start=1):  # entries 1 and 2 overlap
        files = []
        for b in range(after + 1, up + 1):
            key = f"{sink_root(job, 'default')}/staging/attempt-1/batch-{b:09d}.jsonl"
            store.put_bytes(key, encode_rows([{"v": b}]))
            files.append({"batch": b, "key": key, "rows": 1})
        extra = {"sink": {"kind": "transactional", "path": "default", "afterBatch": after, "upToBatch": up,
                          "files": files}}
        legacy.append(extra)
        store.put_if_absent(commit_key(job, "default", f"chk-{n:06d}"), json.dumps(
            {"checkpoint": f"chk-{n:06d}", **{k: extra["sink"][k] for k in ("afterBatch", "upToBatch", "files")}}
        ).encode())
    assert [r["v"] for r in read_committed(store, job)] == [0, 1, 2]
    sink = _sink(store, job, tmp_path, write_fence(store, job))
    _resume(sink, "chk-000003", legacy[-1])  # the new version restores the latest (old) manifest
    _stage(sink, {3: [3]})
    _checkpoint(sink, "chk-000004", 3)
    assert [r["v"] for r in read_committed(store, job)] == [0, 1, 2, 3]


def test_restoring_a_manifest_without_sink_info_keeps_the_visible_history(store, job, tmp_path):
    """A checkpoint taken outside the runtime (`sparkpoint checkpoints create`) records no output:
    restoring it must not hide what readers see."""
    first = _sink(store, job, tmp_path, write_fence(store, job))
    _stage(first, {0: [1], 1: [2]})
    _checkpoint(first, "chk-000001", 1)
    second = _sink(store, job, tmp_path, write_fence(store, job))
    _resume(second, "chk-000002", {})
    assert [r["v"] for r in read_committed(store, job)] == [1, 2]
    _stage(second, {2: [3]})
    _checkpoint(second, "chk-000003", 2)
    assert [r["v"] for r in read_committed(store, job)] == [1, 2, 3]
