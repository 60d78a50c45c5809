"""The upsert and console sinks with executor-written batches (docs/design.md §6), on both store backends.

The batches are FakeBatch objects without collect(): the sinks get their rows only through the files
fake_write_files (the stand-in for Spark's executors) writes, so a sink that collected a batch on the
driver would fail here. Real Spark: tests/runtime/test_runtime_spark.py (upsert) and
tests/runtime/test_sink_scale_others_spark.py (a batch far larger than the driver's heap)."""

from __future__ import annotations

import io
import json
from pathlib import Path

import pytest

from sparkpoint.runtime.checkpoint import write_fence
from sparkpoint.runtime.sink.keys import sink_root
from sparkpoint.runtime.sink.output_gc import output_gc_pass
from sparkpoint.runtime.sink.rows import encode_rows
from sparkpoint.runtime.sink.upsert import UpsertSink, read_upserted
from sparkpoint.runtime.store.base import StoreError

from .test_sink import FakeBatch, fake_write_files


def _upsert(store, job, tmp_path: Path, attempt: int = 0, fmt: str = "parquet", staging: str = "up") -> UpsertSink:
    return UpsertSink(store, job, path="agg", key_columns=["k"], attempt=attempt, fmt=fmt,
                      staging_dir=tmp_path / staging, write_files=fake_write_files)


def _table(store, job) -> list[tuple]:
    return sorted((r["k"], r["n"]) for r in read_upserted(store, job, "agg", ["k"]).values())


@pytest.mark.parametrize("fmt", ["parquet", "jsonl"])
def test_reader_keeps_last_row_per_key_from_executor_written_parts(store, job, tmp_path, fmt):
    sink = _upsert(store, job, tmp_path, fmt=fmt)
    assert sink.write_batch(FakeBatch([{"k": 1, "n": 1}, {"k": 2, "n": 1}, {"k": 3, "n": 1}]), 0) == 3
    assert sink.write_batch(FakeBatch([{"k": 1, "n": 2}, {"k": 1, "n": 3}]), 1) == 2  # last in part order wins
    assert sink.write_batch(FakeBatch([{"k": 1, "n": 3}]), 1) == 1  # a replayed batch replaces itself
    assert _table(store, job) == [(1, 3), (2, 1), (3, 1)]
    marker = json.loads(store.get_bytes(f"{sink_root(job, 'agg')}/upserts/batch-000000000-a000000.json"))
    assert marker["rows"] == 3 and marker["format"] == fmt and len(marker["keys"]) == 2  # two parts
    assert all(store.exists(k) for k in marker["keys"])
    assert not any((tmp_path / "up").iterdir())  # local files go once the batch is stored
    with pytest.raises(ValueError, match="key columns"):
        sink.write_batch(FakeBatch([{"other": 1}]), 2)


def test_a_batch_without_rows_writes_nothing(store, job, tmp_path):
    sink = _upsert(store, job, tmp_path)
    assert sink.write_batch(FakeBatch([], columns=["k", "n"]), 0) == 0
    assert list(store.list(f"{sink_root(job, 'agg')}/upserts/")) == []


class MarkerFails:
    """A store whose put of upsert markers fails (a crash after the parts were uploaded)."""

    def __init__(self, store):
        self.inner = store

    def __getattr__(self, name):
        return getattr(self.inner, name)

    def put_bytes(self, key, data):
        if "/upserts/batch-" in key:
            raise StoreError("injected: the runtime dies before the marker")
        return self.inner.put_bytes(key, data)


def test_parts_without_their_marker_are_invisible(store, job, tmp_path):
    sink = _upsert(store, job, tmp_path)
    sink.write_batch(FakeBatch([{"k": 1, "n": 1}]), 0)
    sink.store = MarkerFails(store)
    with pytest.raises(StoreError):
        sink.write_batch(FakeBatch([{"k": 1, "n": 2}, {"k": 2, "n": 2}]), 1)
    parts = [o.key for o in store.list(f"{sink_root(job, 'agg')}/upserts/") if "/part-" in o.key]
    assert len(parts) == 3  # batch 0's two parts... and batch 1's uploaded parts, but no marker
    assert _table(store, job) == [(1, 1)]


def test_files_of_older_runtimes_are_folded_with_new_batches(store, job, tmp_path):
    """A job upgraded from a runtime that wrote driver-encoded JSON lines keeps its table."""
    store.put_bytes(f"{sink_root(job, 'agg')}/upserts/batch-000000000-a000001.jsonl",
                    encode_rows([{"k": 1, "n": 1}, {"k": 2, "n": 1}]))
    sink = _upsert(store, job, tmp_path, attempt=2)
    sink.write_batch(FakeBatch([{"k": 1, "n": 2}]), 1)
    assert _table(store, job) == [(1, 2), (2, 1)]


def test_restore_to_an_older_point_supersedes_later_batches(store, job, tmp_path):
    first = _upsert(store, job, tmp_path, attempt=write_fence(store, job))
    first.resume(None, None, batch=None)
    first.write_batch(FakeBatch([{"k": 1, "n": 1}]), 0)
    first.write_batch(FakeBatch([{"k": 1, "n": 2}]), 1)
    first.write_batch(FakeBatch([{"k": 2, "n": 1}]), 2)  # a key only the abandoned history produced
    assert _table(store, job) == [(1, 2), (2, 1)]
    # restore the checkpoint of batch 0 and re-run with other boundaries: batch 1 now brings both rows
    second = _upsert(store, job, tmp_path, attempt=write_fence(store, job))
    second.resume("chk-000001", {}, batch=0)
    assert _table(store, job) == [(1, 1)]  # the state as of the restore point
    second.write_batch(FakeBatch([{"k": 1, "n": 2}, {"k": 2, "n": 1}]), 1)
    assert _table(store, job) == [(1, 2), (2, 1)]
    # a fresh start (no checkpoint) begins an empty table
    third = _upsert(store, job, tmp_path, attempt=write_fence(store, job))
    third.resume(None, None, batch=None)
    assert _table(store, job) == []


def test_output_gc_collects_superseded_batches_and_keeps_the_table(store, job, tmp_path):
    root = f"{sink_root(job, 'agg')}/upserts/"
    first = _upsert(store, job, tmp_path, attempt=write_fence(store, job))
    first.resume(None, None, batch=None)
    for b in range(3):
        first.write_batch(FakeBatch([{"k": b, "n": 1}, {"k": 10 + b, "n": 1}]), b)
    second = _upsert(store, job, tmp_path, attempt=write_fence(store, job))
    second.resume("chk-000001", {}, batch=0)
    second.write_batch(FakeBatch([{"k": 1, "n": 2}]), 1)  # batch 2 not re-run yet: hidden
    before = _table(store, job)
    keys_before = {o.key for o in store.list(root)}

    result = output_gc_pass(store, job, grace_seconds=0, clock=lambda: 4e9)
    after = {o.key for o in store.list(root)}
    assert _table(store, job) == before == [(0, 1), (1, 2), (10, 1)]
    gone = keys_before - after
    # attempt 1's batches 1 and 2 (markers and two parts each) went; its batch 0 and attempt 2's stay
    assert {k.rsplit("/upserts/", 1)[1].split("/")[0][:21] for k in gone} == {
        "batch-000000001-a0000", "batch-000000002-a0000"}
    assert len(gone) == 6 and result.deleted_files == 6
    assert any(k.endswith("batch-000000000-a000001.json") for k in after)
    assert sum("/part-" in k for k in after) == 3  # batch 0 (two parts) and attempt 2's batch 1 (one)


def test_console_prints_the_executors_lines_without_collecting(tmp_path):
    from sparkpoint.runtime.sink.console import ConsoleSink

    out = io.StringIO()
    sink = ConsoleSink(tmp_path / "console", out=out, write_files=fake_write_files)
    assert sink.write_batch(FakeBatch([{"k": 1, "n": "a"}, {"k": 2, "n": "b"}, {"k": 3, "n": None}]), 7) == 3
    assert sink.write_batch(FakeBatch([]), 8) == 0
    lines = out.getvalue().splitlines()
    assert lines[0] == "# batch 7: 3 rows" and lines[-1] == "# batch 8: 0 rows"
    assert [json.loads(line) for line in lines[1:4]] == [{"k": 1, "n": "a"}, {"k": 2, "n": "b"}, {"k": 3, "n": None}]
    assert not any((tmp_path / "console").iterdir())
