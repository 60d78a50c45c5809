"""A delta sink's compaction (runtime/sink/compaction.py, DeltaSink.compact; docs/design.md §7).

The property test drives random interleavings of batches, checkpoints (clean and crashed), compactions,
restores to retained checkpoints and savepoints, crashed restores and GC passes (test_delta_vacuum's
model plus a `compact` action); after every GC pass every retained checkpoint and savepoint, restored
in a copy of the job's store, reads exactly the rows a failure-free run had at that point, with
delta-rs and with polars, and after every step the table and the entries' reader show the running
history's rows. On a directory store and on MinIO. The examples show compaction doing its job: fewer
files, the small ones collected once nothing needs them, and a crash between record and commit.
"""

from __future__ import annotations

import pytest
from deltalake import DeltaTable
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from sparkpoint.runtime.checkpoint import gc_pass
from sparkpoint.runtime.sink.compaction import (
    CompactionSettings,
    apply_records,
    common_prefix,
    compactions_prefix,
    plan_runs,
)
from sparkpoint.runtime.sink.delta import DeltaSink
from sparkpoint.runtime.sink.delta_table import COMPACTION_META
from sparkpoint.runtime.sink.journal import SinkJournal
from sparkpoint.runtime.sink.keys import staging_prefix
from sparkpoint.runtime.sink.output_gc import output_gc_pass
from sparkpoint.runtime.sink.reader import committed_files, read_committed

from .test_delta_vacuum import _ARGS, HOUR, DeltaGcModel, _rows, later, property_model, run_steps

SETTINGS = CompactionSettings(interval_seconds=0, target_bytes=1 << 20, min_files=2)


class CompactingModel(DeltaGcModel):
    """The vacuum model with compaction: `compact` runs the live attempt's compaction; arg 1 kills the
    runtime between its records and its Delta commit (the next attempt's compaction or sync repairs)."""

    compactions: int = 0

    def attempt(self, journal: SinkJournal) -> DeltaSink:  # type: ignore[override]
        sink = super().attempt(journal)
        sink.compaction = SETTINGS
        frozen, sink.frozen = sink.manifest_extra, []  # type: ignore[attr-defined]

        def manifest_extra(up_to_batch: int) -> dict:
            extra = frozen(up_to_batch)
            sink.frozen.append(extra)  # type: ignore[attr-defined]
            return extra
        sink.manifest_extra = manifest_extra  # type: ignore[method-assign]
        return sink

    def step(self, action: str, arg: int) -> None:
        if action != "compact":
            sink = self.sink
            super().step(action, arg)
            if action == "checkpoint" and sink is not None:  # it ended, as the pipeline tells the sink
                for extra in sink.frozen:  # type: ignore[attr-defined]
                    sink.release_checkpoint(extra)
                sink.frozen.clear()  # type: ignore[attr-defined]
            return
        if self.table_pos is not None:  # a crashed restore left no runtime: the operator starts one
            super().step("restore", 0)
        if self.sink is None:
            self.restore(0)
        if arg == 1:
            import sparkpoint.runtime.sink.delta as delta_module

            real = delta_module.sync_table

            def killed(*a, **kw):  # type: ignore[no-untyped-def]
                if kw.get("compaction"):
                    raise RuntimeError("killed between the records and the Delta commit")
                return real(*a, **kw)
            delta_module.sync_table = killed
            try:
                with pytest.raises(RuntimeError):
                    if self.sink.compact() is None:
                        raise RuntimeError("nothing to compact")  # the same outcome for the model
            finally:
                delta_module.sync_table = real
            self.restart_local()  # the container restarts in place: a new attempt on the same journal
        elif self.sink.compact() is not None:
            self.compactions += 1

    def check_reader(self) -> None:
        assert [r["v"] for r in read_committed(self.store, self.job)] == list(range(self.durable))


ACTIONS = st.sampled_from(["batch"] * 5 + ["checkpoint"] * 4 + ["compact"] * 3 + ["restore"] * 2
                          + ["restore_crash"] * 2 + ["gc"] * 3 + ["savepoint", "restart_local"]).flatmap(
    lambda kind: st.tuples(st.just(kind), {**_ARGS, "compact": st.sampled_from([0, 0, 0, 1])}.get(kind, st.just(0))))


def _run(model: CompactingModel, actions) -> None:  # type: ignore[no-untyped-def]
    for action, arg in actions:
        model.step(action, arg)
        assert _rows(model.store, model.job) == (list(range(model.expected_table())),) * 2, (action, arg)
        model.check_reader()
    model.step("gc", 4)  # a last pass (an hour's Delta retention), with every restore checked
    model.step("gc", 0)  # and one without retention: the small files compaction replaced may go


@pytest.mark.slow  # a store copy per retained point after every GC pass
@pytest.mark.ci_sample
@settings(max_examples=40, deadline=None)
@given(st.lists(ACTIONS, min_size=10, max_size=30))
def test_restores_read_the_failure_free_table_with_compaction(actions):
    with property_model(CompactingModel, on_minio=False) as model:
        _run(model, actions)


@pytest.mark.slow
@settings(max_examples=15, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])  # env only
@given(actions=st.lists(ACTIONS, min_size=10, max_size=30))
def test_restores_read_the_failure_free_table_with_compaction_on_minio(minio_env, actions):
    with property_model(CompactingModel, on_minio=True) as model:
        _run(model, actions)


def _table_files(model: CompactingModel) -> set[str]:
    loc = model.sink.location
    return set(DeltaTable(loc.uri, storage_options=loc.storage_options).file_uris())


def test_compaction_merges_shared_batches_and_gc_collects_the_small_files(store, job, tmp_path):
    model = CompactingModel(store=store, job=job, root=tmp_path)
    run_steps(model, [step for n in range(6) for step in (("batch", 1), ("checkpoint", 0))])  # chk-1..6
    gc_pass(store, job, retain=2, grace_seconds=0, clock=later)  # chk-5 and chk-6 stay
    files_before = _table_files(model)
    done = model.sink.compact()
    # chk-5's history (batches 0..4) is what both kept points share: 5 files become one
    assert done is not None and done["files"] == 5 and len(done["records"]) == 1
    assert len(_table_files(model)) == len(files_before) - 4
    assert _rows(store, job) == ([0, 1, 2, 3, 4, 5],) * 2
    assert [r["v"] for r in read_committed(store, job)] == [0, 1, 2, 3, 4, 5]
    listed = committed_files(store, job, "default")
    assert [(f["batch"], f.get("lastBatch"), f.get("batches")) for f in listed] == [(0, 4, 5), (5, None, None)]
    loc = model.sink.location
    history = DeltaTable(loc.uri, storage_options=loc.storage_options).history(1)[0]
    assert history[COMPACTION_META] == done["records"][0] and history["sparkpoint.checkpoint"] == "chk-000006"
    staged = {o.key for o in store.list(staging_prefix(job, "default"))}
    # inside the Delta retention the small files stay (time travel), after it they go
    assert output_gc_pass(store, job, grace_seconds=0, clock=later, delta_retention_seconds=HOUR).kept_for_table == 5
    gone = output_gc_pass(store, job, grace_seconds=0, clock=later, delta_retention_seconds=0)
    assert gone.deleted_files == 5 and len(staged) - len({o.key for o in store.list(staging_prefix(job, "default"))}) == 5
    model.check_every_restore()  # chk-5 and chk-6 restored in copies: exactly their rows
    model.step("restore", 0)  # the oldest kept point, chk-5: the table returns to it, compacted
    assert _rows(store, job) == ([0, 1, 2, 3, 4],) * 2
    run_steps(model, [("batch", 1), ("checkpoint", 0)])  # the new history goes on from it
    assert _rows(store, job) == ([0, 1, 2, 3, 4, 5],) * 2 and model.check_reader() is None


def test_batches_a_kept_point_does_not_share_are_not_compacted(store, job, tmp_path):
    model = CompactingModel(store=store, job=job, root=tmp_path)
    # history A: chk-1..3; restore chk-1; history B: chk-4..6 (batches 1.. re-run with other rows)
    run_steps(model, [("batch", 1), ("checkpoint", 0), ("batch", 1), ("checkpoint", 0), ("batch", 1), ("checkpoint", 0),
                   ("restore", 0), ("batch", 2), ("checkpoint", 0), ("batch", 1), ("checkpoint", 0),
                   ("batch", 1), ("checkpoint", 0)])
    # chk-2 and chk-3 (history A) are kept: only chk-1's batch is shared, one file: nothing to compact
    assert model.sink.compact() is None
    gc_pass(store, job, retain=3, grace_seconds=0, clock=later)  # chk-4..6 of history B stay
    assert model.sink.compact()["files"] == 3  # chk-1's batch and chk-4's batches (0..2 of B's history)
    model.check_every_restore()


def test_a_compaction_killed_before_its_commit_is_finished_by_the_next(store, job, tmp_path):
    model = CompactingModel(store=store, job=job, root=tmp_path)
    run_steps(model, [step for n in range(4) for step in (("batch", 1), ("checkpoint", 0))])
    gc_pass(store, job, retain=1, grace_seconds=0, clock=later)
    model.step("compact", 1)  # records and compacted file written, no Delta commit; local restart
    assert [o.key for o in store.list(compactions_prefix(job, "default"))]
    assert _rows(store, job) == ([0, 1, 2, 3],) * 2
    before = len(_table_files(model))
    # the readers and a restore already apply the record; the table catches up at the next compaction
    assert [r["v"] for r in read_committed(store, job)] == [0, 1, 2, 3]
    model.sink.compact()
    assert len(_table_files(model)) == before - 3 and _rows(store, job) == ([0, 1, 2, 3],) * 2
    model.check_every_restore()


def test_apply_records_replaces_only_whole_contiguous_runs():
    items = [{"batch": b, "rows": 1, "format": "parquet", "keys": [f"k{b}"]} for b in range(5)]
    record = {"id": "cmp-000001-000001", "replaces": [["k1"], ["k2"], ["k3"]], "key": "c1", "batch": 1,
              "lastBatch": 3, "batches": 3, "rows": 3, "size": 10}
    applied: set[str] = set()
    out = apply_records(items, [record], applied)
    assert [i["keys"] for i in out] == [["k0"], ["c1"], ["k4"]] and applied == {"cmp-000001-000001"}
    assert apply_records(items[:3], [record]) == items[:3]  # a history holding part of the run keeps its files
    assert apply_records([items[1], items[3], items[2]], [record]) == [items[1], items[3], items[2]]
    nested = {**record, "id": "cmp-000001-000002", "replaces": [["k0"], ["c1"]], "key": "c2", "batch": 0, "batches": 4}
    applied.clear()
    out = apply_records(items, [record, nested], applied)
    assert [i["keys"] for i in out] == [["c2"], ["k4"]] and applied == {record["id"], nested["id"]}


def test_plan_runs_and_common_prefix():
    def item(b, size, parts=1):
        return {"batch": b, "rows": 1, "format": "parquet", "keys": [f"k{b}-{i}" for i in range(parts)],
                "parts": [{"size": size // parts, "rows": 1}] * parts}
    items = [item(0, 10), item(1, 10), item(2, 100), item(3, 10), item(4, 10, parts=2), item(5, 10)]
    runs = plan_runs(items, up_to_batch=4, target_bytes=50, min_files=2)
    assert [[i["batch"] for i in r] for r in runs] == [[0, 1], [3, 4]]  # 2 is too big, 5 is not shared
    assert plan_runs(items, up_to_batch=4, target_bytes=50, min_files=4) == []
    # batch 5 shared now, but 3 + 4 + 5 exceed 25 bytes: it alone is one file, left as it is
    assert plan_runs(items, up_to_batch=5, target_bytes=25, min_files=2) == [items[0:2], items[3:5]]
    assert plan_runs(items, up_to_batch=5, target_bytes=15, min_files=2) == [[items[4]]]  # two parts, one batch
    assert common_prefix([["a", "b", "c"], ["a", "b"], ["a", "b", "d"]]) == ["a", "b"]
    assert common_prefix([["a"], ["b"]]) == [] and common_prefix([]) == []
