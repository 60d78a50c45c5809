"""The GC sidecar as a delta table's vacuum (runtime/sink/delta_vacuum.py, output_gc.py): it never
removes what a restore, the table's current version or a version inside the Delta retention needs.

Examples run on both store backends (MinIO and a directory); the property test drives random
publish / crash / restore / savepoint / GC interleavings on a directory store and, after every GC
pass, restores every retained checkpoint and savepoint in a copy of the job's store and reads the
table with delta-rs and polars. The same model runs a shorter time on MinIO.
"""

from __future__ import annotations

import json
import tempfile
import time
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import TypeVar

import polars as pl
import pytest
from deltalake import DeltaTable
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from sparkpoint.runtime.checkpoint import gc_pass, list_checkpoint_ids, write_fence
from sparkpoint.runtime.sink.delta import DeltaSink
from sparkpoint.runtime.sink.delta_table import delta_location
from sparkpoint.runtime.sink.delta_vacuum import removed_paths
from sparkpoint.runtime.sink.journal import SinkJournal
from sparkpoint.runtime.sink.keys import file_keys, sink_root, staging_prefix
from sparkpoint.runtime.sink.output_gc import output_gc_pass
from sparkpoint.runtime.store import DirectoryStore, JobRef, open_store

from .test_output_gc import Model, _chain
from .test_sink import fake_write_files

HOUR = 3600.0


def later() -> float:
    return time.time() + 5  # every file is past a zero grace and a zero retention


def _sink(store, job: JobRef, journal: SinkJournal) -> DeltaSink:
    return DeltaSink(store, job, attempt=write_fence(store, job), path="default", journal=journal,
                     write_files=fake_write_files, incarnation="uid-1")


def _rows(store, job: JobRef) -> tuple[list[int], list[int]]:
    """The table's current rows read with delta-rs and with polars ([] when there is no table)."""
    loc = delta_location(store, sink_root(job, "default"))
    if not DeltaTable.is_deltatable(loc.uri, storage_options=loc.storage_options):
        return [], []
    by_rs = sorted(DeltaTable(loc.uri, storage_options=loc.storage_options).to_pyarrow_table().column("v").to_pylist())
    by_pl = sorted(pl.read_delta(loc.uri, storage_options=loc.storage_options or None)["v"].to_list())
    return by_rs, by_pl


def _scratch_store(store):  # type: ignore[no-untyped-def]
    """An empty store beside `store`, on the same backend."""
    name = f"copy-{uuid.uuid4().hex[:12]}"
    if isinstance(store, DirectoryStore):
        return open_store(f"file://{store.root.parent / name}")
    return open_store(f"s3://{store.bucket}/{store.prefix}-{name}")


def test_removed_paths_reads_only_recent_removals() -> None:
    commit = "\n".join(json.dumps(a) for a in [
        {"commitInfo": {"timestamp": 5}},
        {"add": {"path": "staging/attempt-2/b/part-0.parquet"}},
        {"remove": {"path": "staging/attempt-1/old/part-0.parquet", "deletionTimestamp": 999}},
        {"remove": {"path": "staging/attempt-1/new%20x/part-0.parquet", "deletionTimestamp": 1000}},
        {"remove": {"path": "staging/attempt-1/unstamped/part-0.parquet"}},
    ]).encode()
    assert removed_paths(commit, 1000) == {"staging/attempt-1/new x/part-0.parquet",
                                           "staging/attempt-1/unstamped/part-0.parquet"}


class DeltaGcModel(Model):
    """test_output_gc's model with a delta sink. Extra action: `restore_crash`, a pod that returns the
    table to a point off the readers' history (if there is one) and dies before its continuation
    entry; the next pod's sidecar runs a pass that lets that point go before its runtime restores.
    The table then holds files no retained checkpoint needs. GC passes take a random Delta
    retention: 0 or an hour."""

    table_pos: int | None = None  # what the table shows while no attempt runs after a restore_crash
    row_per_checkpoint: bool = False  # the property's: every point then has a file of its own

    def attempt(self, journal: SinkJournal) -> DeltaSink:  # type: ignore[override]
        return _sink(self.store, self.job, journal)

    def step(self, action: str, arg: int) -> None:
        if action != "gc" and self.table_pos is not None:  # the operator starts a new attempt first
            self.table_pos = None
            if action == "restore":
                self.restore(arg)
                return
            self.restore(0)
        if action == "restore_crash":
            head = {e["checkpoint"] for e in _chain(self.store, self.job)}
            off_head = [p for p, _ in self.restorable() if p not in head]
            if not off_head:
                return
            cid = off_head[arg % len(off_head)]
            self.pods += 1
            sink = self.attempt(SinkJournal(self.root / f"pod-{self.pods}"))
            returned = sink._history_resumed

            def crash() -> None:
                returned()
                raise RuntimeError("killed before the continuation entry")
            sink._history_resumed = crash  # type: ignore[method-assign]
            with pytest.raises(RuntimeError):
                sink.resume(cid, self.points[cid][1])
            self.table_pos, self.sink = self.points[cid][0], None
            # The next pod's sidecar runs a pass before its runtime restores, with the retain count
            # that just lets the point go (the harshest case) and no Delta retention.
            ids = list_checkpoint_ids(self.store, self.job)
            retain = max(1, len(ids) - 1 - ids.index(cid)) if cid in ids else 1
            gc_pass(self.store, self.job, retain=retain, grace_seconds=0, clock=later)
            output_gc_pass(self.store, self.job, grace_seconds=0, clock=later, delta_retention_seconds=0)
            self.check_every_restore()
        elif action == "checkpoint" and self.row_per_checkpoint:
            super().step("batch", 1)
            super().step(action, arg)
        elif action == "gc":
            gc_pass(self.store, self.job, retain=1 + arg % 3, grace_seconds=0, clock=later)
            output_gc_pass(self.store, self.job, grace_seconds=0, clock=later,
                           delta_retention_seconds=HOUR if arg >= 4 else 0)
            self.check_every_restore()
        else:
            super().step(action, arg)

    def expected_table(self) -> int:
        return self.durable if self.table_pos is None else self.table_pos

    def check_every_restore(self) -> None:
        """Every retained checkpoint and savepoint, restored in a copy of the job's store, shows
        exactly the rows of its point, read with delta-rs and polars."""
        for cid, _ in self.restorable():
            pos, extra = self.points[cid]
            copy = _scratch_store(self.store)  # entries name whole keys: the copy keeps the job's name
            for info in self.store.list(f"{self.job.root}/"):
                copy.put_bytes(info.key, self.store.get_bytes(info.key))
            self.pods += 1
            _sink(copy, self.job, SinkJournal(self.root / f"pod-{self.pods}")).resume(cid, extra)
            assert _rows(copy, self.job) == (list(range(pos)),) * 2, f"restore of {cid} after gc"


# Weighted so that most examples build two histories (a restore to an older point after several
# checkpoints) and then run GC passes around restores and crashed restores.
_ARGS = {"batch": st.integers(1, 3),
         # 0 clean, 1 crash before the entry, 2 crash before the manifest, 3 failed, 4 gc mid-checkpoint
         "checkpoint": st.sampled_from([0, 0, 0, 1, 2, 3, 4]),
         "restore": st.sampled_from([0, 0, 1, 50]),  # 0: the oldest kept point, a new history branches
         "restore_crash": st.integers(0, 50), "savepoint": st.integers(0, 50),
         "gc": st.sampled_from([0, 0, 1, 2, 4, 5])}  # retain 1 + arg % 3; arg >= 4: an hour's Delta retention
ACTIONS = st.sampled_from(["batch"] * 5 + ["checkpoint"] * 4 + ["restore"] * 3 + ["restore_crash"] * 3
                          + ["gc"] * 3 + ["savepoint", "restart_local"]).flatmap(
    lambda kind: st.tuples(st.just(kind), _ARGS.get(kind, st.just(0))))


def _run(model: DeltaGcModel, actions) -> None:  # type: ignore[no-untyped-def]
    for action, arg in actions:
        model.step(action, arg)
        assert _rows(model.store, model.job) == (list(range(model.expected_table())),) * 2, (action, arg)


M = TypeVar("M", bound=DeltaGcModel)


@contextmanager
def property_model(model_class: type[M], *, on_minio: bool) -> Iterator[M]:
    """A property example's model (a file of its own per checkpoint) on a fresh store: a directory in
    its temporary root, or a fresh prefix of MinIO's test bucket."""
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp)
        store = open_store(f"s3://sparkpoint-test/t-{uuid.uuid4().hex[:12]}" if on_minio else f"file://{root}/store")
        model = model_class(store=store, job=JobRef("default", "prop"), root=root)
        model.row_per_checkpoint = True
        yield model


@pytest.mark.slow  # about a minute on two busy cores (a store copy per retained point after every pass)
@pytest.mark.ci_sample
@settings(max_examples=60, deadline=None)
@given(st.lists(ACTIONS, min_size=8, max_size=30))
def test_vacuum_never_takes_what_a_restore_or_the_table_needs(actions):
    with property_model(DeltaGcModel, on_minio=False) as model:
        _run(model, actions)


@pytest.mark.slow
@settings(max_examples=20, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])  # env only
@given(actions=st.lists(ACTIONS, min_size=8, max_size=30))
def test_vacuum_property_on_minio(minio_env, actions):
    with property_model(DeltaGcModel, on_minio=True) as model:
        _run(model, actions)


def run_steps(model: DeltaGcModel, steps) -> None:  # type: ignore[no-untyped-def]
    for action, arg in steps:
        model.step(action, arg)


def test_superseded_files_stay_for_the_retention_then_go(store, job, tmp_path):
    model = DeltaGcModel(store=store, job=job, root=tmp_path)
    # chk-1, chk-2; restore chk-1 (the table drops chk-2's file); chk-3, chk-4 on the new history
    run_steps(model, [("batch", 2), ("checkpoint", 0), ("batch", 2), ("checkpoint", 0), ("restore", 0),
                       ("batch", 1), ("checkpoint", 0), ("batch", 1), ("checkpoint", 0)])
    assert list_checkpoint_ids(store, job)[-1] == "chk-000004" and _rows(store, job)[0] == [0, 1, 2, 3]
    gc_pass(store, job, retain=1, grace_seconds=0, clock=later)  # nothing needs chk-2's file any more
    loc = model.sink.location
    old = DeltaTable(loc.uri, storage_options=loc.storage_options, version=1)  # the version chk-2 published
    only_chk2 = {k for f in model.points["chk-000002"][1]["sink"]["files"] for k in file_keys(f)}
    kept = output_gc_pass(store, job, grace_seconds=0, clock=later, delta_retention_seconds=HOUR)
    assert kept.kept_for_table == len(only_chk2) == 2 and kept.deleted_files == 0
    assert sorted(old.to_pyarrow_table().column("v").to_pylist()) == [0, 1, 2, 3]  # time travel works
    gone = output_gc_pass(store, job, grace_seconds=0, clock=later, delta_retention_seconds=0)
    assert gone.kept_for_table == 0 and gone.deleted_files == 2
    assert not only_chk2 & {o.key for o in store.list(staging_prefix(job, "default"))}
    with pytest.raises(Exception, match="part-0"):  # noqa: B017  # older versions: as after Delta's vacuum
        old.to_pyarrow_table()
    assert _rows(store, job) == ([0, 1, 2, 3],) * 2  # the current version is whole


def test_the_current_version_is_kept_when_no_checkpoint_needs_it(store, job, tmp_path):
    model = DeltaGcModel(store=store, job=job, root=tmp_path)
    # history A: chk-1, chk-2; restore chk-1, history B: chk-3; a pod returns the table to chk-2 and dies
    run_steps(model, [("batch", 1), ("checkpoint", 0), ("batch", 1), ("checkpoint", 0), ("restore", 0),
                       ("batch", 5), ("checkpoint", 0), ("restore_crash", 1)])
    assert _rows(store, job)[0] == [0, 1]  # chk-2's rows: value 1 is only in chk-2's file
    gc_pass(store, job, retain=1, grace_seconds=0, clock=later)  # chk-3 alone is kept
    before = {o.key for o in store.list(staging_prefix(job, "default"))}
    result = output_gc_pass(store, job, grace_seconds=0, clock=later, delta_retention_seconds=0)
    assert result.kept_for_table == 1 and {o.key for o in store.list(staging_prefix(job, "default"))} == before
    assert _rows(store, job) == ([0, 1],) * 2  # readers of the table still read it
    model.step("restore", 0)  # the next attempt restores chk-3: the table returns to its history
    assert _rows(store, job) == ([0, 1, 2, 3, 4, 5],) * 2
    assert output_gc_pass(store, job, grace_seconds=0, clock=later, delta_retention_seconds=0).deleted_files == 1
    assert _rows(store, job) == ([0, 1, 2, 3, 4, 5],) * 2


class CountingStore(DirectoryStore):
    """A real directory store that counts its reads."""

    reads: list[str] = []

    def get_bytes(self, key: str) -> bytes:
        self.reads.append(key)
        return super().get_bytes(key)


def test_each_commit_file_is_read_once_across_passes(tmp_path):
    from sparkpoint.runtime.sink.delta_vacuum import table_needs  # (a set: for this small table only)

    store = open_store(f"file://{tmp_path}/store")
    job = JobRef("default", "reads")
    model = DeltaGcModel(store=store, job=job, root=tmp_path)
    run_steps(model, [("batch", 1), ("checkpoint", 0), ("batch", 1), ("checkpoint", 0), ("restore", 0)])
    from deltalake import DeltaTable

    # The live files are read from the log's newest checkpoint and the commits after it (every pass reads
    # those, at most a checkpoint interval): a checkpoint at version 2 leaves only the removals to read.
    DeltaTable(str(tmp_path / "store" / job.root / "outputs" / "default")).create_checkpoint()
    counting = CountingStore(tmp_path / "store")
    counting.reads = []
    first = table_needs(counting, job, "default", retention_seconds=HOUR, now=time.time())
    commits = [k for k in counting.reads if "/_delta_log/" in k and k.endswith(".json")]
    assert len(commits) == 3 and len(set(commits)) == 3  # create, chk-2, the return to chk-1
    run_steps(model, [("batch", 1), ("checkpoint", 0)])
    counting.reads.clear()
    second = table_needs(counting, job, "default", retention_seconds=HOUR, now=time.time())
    # the new commit, and the one commit that removed files inside the retention (the return to chk-1)
    assert [k for k in counting.reads if "/_delta_log/" in k and k.endswith(".json")] == [
        commits[0].replace("00000.json", "00002.json"), commits[0].replace("00000.json", "00003.json")]
    assert first <= second  # chk-2's removed files are still inside the retention
