"""A delta table's state read from its log in bounded memory (runtime/sink/delta_log_read.py), for the
full output GC pass: the live files equal delta-rs's on tables the delta sink writes (appends,
compactions that remove files, restores that return the table, Delta checkpoints between), what
cannot be read exactly makes the path unreadable (kept whole), and the pass's memory does not grow with
the table's age."""

from __future__ import annotations

import os
import sys
import time
import tracemalloc
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from deltalake import DeltaTable
from hypothesis import given, settings
from hypothesis import strategies as st

from sparkpoint.runtime.sink import delta_log_read, gc_full_pass
from sparkpoint.runtime.sink.delta_log_read import TableUnreadableError, read_log
from sparkpoint.runtime.sink.delta_table import delta_location, open_table, table_paths
from sparkpoint.runtime.sink.gc_spill import Spill
from sparkpoint.runtime.sink.keys import sink_root
from sparkpoint.runtime.sink.output_gc import output_gc_pass
from sparkpoint.runtime.store import JobRef, directory, open_store

from .test_delta_compaction import ACTIONS as COMPACTION_ACTIONS
from .test_delta_compaction import CompactingModel
from .test_delta_vacuum import DeltaGcModel, later, property_model, run_steps
from .test_history_snapshots import aged_store

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "bench"))
from age_stores import add_delta_log  # noqa: E402

WEEK = 7 * 24 * 3600.0


def streamed(store, job: JobRef) -> tuple[set[str], int]:  # type: ignore[no-untyped-def]
    with Spill() as spill:
        log = read_log(store, spill, f"{sink_root(job, 'default')}/_delta_log/", retention=WEEK, now=time.time())
        return set(log.live), log.version


def by_delta_rs(store, job: JobRef) -> tuple[set[str], int]:  # type: ignore[no-untyped-def]
    table = open_table(delta_location(store, sink_root(job, "default")))
    return (set(), -1) if table is None else (table_paths(table), table.version())


def _table_dir(model: DeltaGcModel) -> str:
    return str(model.root / "store" / model.job.root / "outputs" / "default")


class CheckpointingModel(CompactingModel):
    """The compaction model plus `delta_checkpoint`: a Delta checkpoint of the table's current version
    (delta-rs writes one every 100 commits; here any commit may be followed by one)."""

    def step(self, action: str, arg: int) -> None:
        if action == "delta_checkpoint":
            if os.path.isdir(_table_dir(self) + "/_delta_log"):
                DeltaTable(_table_dir(self)).create_checkpoint()
            return
        super().step(action, arg)


ACTIONS = st.one_of(COMPACTION_ACTIONS, st.just(("delta_checkpoint", 0)))


@settings(max_examples=25, deadline=None)
@given(st.lists(ACTIONS, min_size=8, max_size=30))
def test_the_streamed_live_files_are_delta_rs_files(actions):
    with property_model(CheckpointingModel, on_minio=False) as model:
        for action, arg in actions:
            model.step(action, arg)
            assert streamed(model.store, model.job) == by_delta_rs(model.store, model.job), (action, arg)


def test_a_multi_part_checkpoint_and_the_commits_after_it(store, job, tmp_path):
    """A checkpoint in two parts (as Spark writes them) reads as the single one, on both backends."""
    model = DeltaGcModel(store=store, job=job, root=tmp_path)
    run_steps(model, [("batch", 2), ("checkpoint", 0), ("batch", 2), ("checkpoint", 0), ("restore", 0)])
    local = tmp_path / "cp"
    local.mkdir()
    loc = delta_location(store, sink_root(job, "default"))
    DeltaTable(loc.uri, storage_options=loc.storage_options).create_checkpoint()
    prefix = f"{sink_root(job, 'default')}/_delta_log/"
    single = next(o.key for o in store.list(prefix) if o.key.endswith(".checkpoint.parquet"))
    store.get_file(single, str(local / "single.parquet"))
    rows = pq.read_table(local / "single.parquet")
    half = rows.num_rows // 2
    for i, part in enumerate((rows.slice(0, half), rows.slice(half)), start=1):
        pq.write_table(part, local / f"part-{i}.parquet")
        store.put_file(single.replace(".checkpoint.parquet", f".checkpoint.{i:010d}.0000000002.parquet"),
                       str(local / f"part-{i}.parquet"))
    store.delete(single)
    run_steps(model, [("batch", 1), ("checkpoint", 0)])
    assert streamed(store, job) == by_delta_rs(store, job)
    assert streamed(store, job)[0]


def test_what_cannot_be_read_exactly_keeps_the_path_whole(tmp_path):
    """A missing commit after the checkpoint, a checkpoint naming sidecars (v2), an add with a deletion
    vector: the path is skipped, nothing of it deleted."""
    store = open_store(f"file://{tmp_path}/store")
    job = JobRef("default", "gaps")
    model = DeltaGcModel(store=store, job=job, root=tmp_path)
    run_steps(model, [("batch", 1), ("checkpoint", 0), ("batch", 1), ("checkpoint", 0), ("restore", 0),
                      ("batch", 1), ("checkpoint", 0)])
    prefix = f"{sink_root(job, 'default')}/_delta_log/"
    assert streamed(store, job) == by_delta_rs(store, job)
    gap = f"{prefix}{1:020d}.json"
    kept = store.get_bytes(gap)
    store.delete(gap)
    with pytest.raises(TableUnreadableError, match="lacks version 1"):
        streamed(store, job)
    before = sorted(o.key for o in store.list(f"{sink_root(job, 'default')}/"))
    result = output_gc_pass(store, job, grace_seconds=0, clock=later, incremental=False)
    assert result.skipped_paths == ["default"]
    assert sorted(o.key for o in store.list(f"{sink_root(job, 'default')}/")) == before
    store.put_bytes(gap, kept)
    # a deletion vector on an add in a commit after the checkpoint
    last = f"{prefix}{3:020d}.json"
    dv = b'{"add":{"path":"x.parquet","partitionValues":{},"size":1,"modificationTime":0,"dataChange":true,' \
         b'"deletionVector":{"storageType":"i","pathOrInlineDv":"abc","sizeInBytes":1,"cardinality":1}}}\n'
    commit = store.get_bytes(last)
    store.put_bytes(last, commit.rstrip(b"\n") + b"\n" + dv)
    with pytest.raises(TableUnreadableError, match="deletion vector"):
        streamed(store, job)
    store.put_bytes(last, commit)
    # a checkpoint whose sidecar column names files
    DeltaTable(str(tmp_path / "store" / job.root / "outputs" / "default")).create_checkpoint()
    cp = next(o.key for o in store.list(prefix) if o.key.endswith(".checkpoint.parquet"))
    path = tmp_path / "cp.parquet"
    store.get_file(cp, str(path))
    rows = pq.read_table(path)
    sidecar = pa.struct([f.with_nullable(True) for f in rows.column("sidecar").type])
    one = pa.array([{"path": "s.parquet", "sizeInBytes": 1, "modificationTime": 0}], type=sidecar)
    filler = pa.nulls(rows.num_rows - 1, type=sidecar)
    rows = rows.set_column(rows.schema.get_field_index("sidecar"), "sidecar", pa.concat_arrays([one, filler]))
    pq.write_table(rows, path)
    store.put_file(cp, str(path))
    with pytest.raises(TableUnreadableError, match="sidecar"):
        streamed(store, job)


def aged_delta_store(root: Path, n: int):  # type: ignore[no-untyped-def]
    store, job = aged_store(root, n, 20)
    add_delta_log(root / job.root / "outputs" / "default", [
        f"{job.root}/outputs/default/staging/attempt-1/batch-{i:09d}-0a0a0a0a0a0a/part-00000.json"
        for i in range(n)], job.root)
    return store, job


def full_pass_peak(root: Path, n: int, monkeypatch) -> tuple[int, object]:  # type: ignore[no-untyped-def]
    """The traced peak of reading the table in a full pass, above what the pass held when it began
    (the rest of the pass is test_output_gc_full_memory's, and the directory store's walk leaves a
    varying amount in pathlib's interned names that would blur a whole pass's figure)."""
    _, job = aged_delta_store(root, n)
    store = open_store(f"file://{root}")  # (not the builder's CountingStore, which holds every key it read)
    delta_log_read._MEMOS.clear()  # as `gc --once` runs it: a new process
    real, peaks = gc_full_pass.read_table, []

    def measured(*args, **kwargs):  # type: ignore[no-untyped-def]
        before = tracemalloc.get_traced_memory()[0]
        tracemalloc.reset_peak()
        table = real(*args, **kwargs)
        peaks.append(tracemalloc.get_traced_memory()[1] - before)
        return table

    monkeypatch.setattr(gc_full_pass, "read_table", measured)
    tracemalloc.start()
    try:
        result = output_gc_pass(store, job, grace_seconds=0, clock=later, incremental=False)
    finally:
        tracemalloc.stop()
    return peaks[0], result


@pytest.mark.slow  # builds two aged stores of 2,000 and 8,000 checkpoints with their Delta logs
def test_a_delta_full_pass_reads_its_table_in_the_same_memory_at_four_times_the_age(tmp_path, monkeypatch) -> None:
    """The old pass held every live file's key, the whole log listing and every commit's removals: its
    table read grew 1,151 bytes per checkpoint here (and delta-rs's table state beside, which tracemalloc
    does not see); this one 42 (its batch of checkpoint rows filling up to 4,096; flat beyond), its sets
    in the spill."""
    monkeypatch.setattr(directory, "_NAMES_HELD", 256)  # (S3 pages 1,000 keys: a folder is never held)
    full_pass_peak(tmp_path / "warm", 50, monkeypatch)  # first-use costs (pyarrow's import) paid before measuring
    small, large = 2_000, 8_000
    peaks = {}
    for n in (small, large):
        peaks[n], result = full_pass_peak(tmp_path / f"n{n}", n, monkeypatch)
        assert result.skipped_paths == [] and result.deleted_files == 0
        assert result.live_files == n
    growth = (peaks[large] - peaks[small]) / (large - small)
    assert growth < 100, f"{growth:.0f} bytes per checkpoint ({peaks})"
