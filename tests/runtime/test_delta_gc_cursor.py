"""Output GC of a delta sink's path from its cursor (runtime/sink/delta_cursor.py, gc_cursor_pass.py):
a steady pass reads the Delta log's commits since the last pass, not every commit of the retention
window, and lists no settled data file, so it costs the same at any age; a pass killed after any
delete leaves a store the next pass finishes, and readers (the project's and delta-rs) read exactly
the retained versions."""

from __future__ import annotations

import contextlib
import json
import sys
import tempfile
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from sparkpoint.runtime.checkpoint import gc_pass
from sparkpoint.runtime.sink import delta_log_read
from sparkpoint.runtime.sink.delta_vacuum import removed_paths
from sparkpoint.runtime.sink.gc_cursor import cursor_key, read_cursor
from sparkpoint.runtime.sink.output_gc import output_gc_pass
from sparkpoint.runtime.sink.reader import read_committed
from sparkpoint.runtime.store import JobRef, ObjectStore, open_store
from sparkpoint.runtime.store.base import ObjectNotFoundError

from .test_delta_vacuum import ACTIONS, HOUR, DeltaGcModel, _rows, later, run_steps
from .test_history_snapshots import CountingStore, aged_store
from .test_output_gc_cursor import KillAfter, Killed

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "bench"))
from age_stores import add_delta_log  # noqa: E402


def aged_delta_store(root: Path, n: int) -> tuple[CountingStore, JobRef]:
    """A delta sink's store aged `n` checkpoints of 10 s: its entries (snapshotted every 20) and the
    Delta log the sink writes beside them, every commit inside the Delta retention."""
    store, job = aged_store(root, n, 20)
    add_delta_log(root / job.root / "outputs" / "default", [
        f"{job.root}/outputs/default/staging/attempt-1/batch-{i:09d}-0a0a0a0a0a0a/part-00000.json"
        for i in range(n)], job.root)
    return store, job


def steady_pass(store: CountingStore, job: JobRef) -> tuple[int, int]:
    """(GETs, keys listed) of a steady pass, as `gc --once` runs it: a new process (no cache)."""
    output_gc_pass(store, job, grace_seconds=0, clock=later)  # the first pass: full, writes the cursor
    delta_log_read._MEMOS.clear()
    store.gets.clear()
    store.listed = 0
    result = output_gc_pass(store, job, grace_seconds=0, clock=later)
    assert not result.skipped_paths and result.deleted_files == 0 and not result.deleted_entries
    return len(store.gets), store.listed


def test_a_steady_delta_pass_costs_the_same_at_any_age(tmp_path):
    n = 100
    young_gets, young_listed = steady_pass(*aged_delta_store(tmp_path / "young", n))
    old_gets, old_listed = steady_pass(*aged_delta_store(tmp_path / "old", 4 * n))
    # before the cursor covered delta paths: every commit of the retention read (N GETs) and every
    # data file and log file listed (3N keys), on every pass
    assert old_gets <= young_gets + 3 * n // 20, (young_gets, old_gets)  # a GET per snapshot segment at most
    assert old_listed <= young_listed + 10, (young_listed, old_listed)
    assert read_cursor(open_store(f"file://{tmp_path / 'old'}"), JobRef("default", "aged"), "default").delta


def test_a_delta_pass_from_the_cursor_reads_only_new_commits(store, job, tmp_path):
    """After the full pass, a pass reads the commits published since (not the older ones), and a
    superseded history's files stay for the Delta retention, then go, on both backends."""
    model = DeltaGcModel(store=store, job=job, root=tmp_path)
    run_steps(model, [("batch", 2), ("checkpoint", 0), ("batch", 2), ("checkpoint", 0)])
    output_gc_pass(store, job, grace_seconds=0, clock=later, delta_retention_seconds=HOUR)
    assert read_cursor(store, job, "default").delta is not None
    run_steps(model, [("restore", 0), ("batch", 1), ("checkpoint", 0)])  # chk-2's files leave the table
    gc_pass(store, job, retain=1, grace_seconds=0, clock=later)
    reads: list[str] = []
    real_get = store.get_bytes

    def get(key: str) -> bytes:
        reads.append(key)
        return real_get(key)

    store.get_bytes = get  # type: ignore[method-assign]
    delta_log_read._MEMOS.clear()
    kept = output_gc_pass(store, job, grace_seconds=0, clock=later, delta_retention_seconds=HOUR)
    del store.get_bytes
    logs = sorted(k.rsplit("/", 1)[1] for k in reads if "/_delta_log/" in k)
    assert logs == ["00000000000000000002.json", "00000000000000000003.json"], logs  # the return, chk-3
    assert kept.kept_for_table == 2 and kept.deleted_files == 0
    gone = output_gc_pass(store, job, grace_seconds=0, clock=later, delta_retention_seconds=0)
    assert gone.deleted_files == 2 and gone.kept_for_table == 0
    assert full_would_delete(store, job, 0) == set()
    assert _rows(store, job) == ([0, 1, 2],) * 2
    assert [r["v"] for r in read_committed(store, job)] == [0, 1, 2]


def test_a_file_the_full_pass_kept_for_the_table_stays_for_the_retention_then_goes(tmp_path):
    """The full pass deletes a superseded history's entry and keeps its file for the Delta retention;
    the passes from the cursor then find that file by listing its folder, keep it as long, then take it."""
    store = open_store(f"file://{tmp_path}/store")
    job = JobRef("default", "kept")
    model = DeltaGcModel(store=store, job=job, root=tmp_path)
    run_steps(model, [("batch", 1), ("checkpoint", 0), ("batch", 1), ("checkpoint", 0), ("restore", 0),
                      ("batch", 1), ("checkpoint", 0)])
    gc_pass(store, job, retain=1, grace_seconds=0, clock=later)
    full = output_gc_pass(store, job, grace_seconds=0, clock=later, delta_retention_seconds=HOUR, incremental=False)
    assert full.deleted_entries and full.kept_for_table == 1 and read_cursor(store, job, "default") is not None
    again = output_gc_pass(store, job, grace_seconds=0, clock=later, delta_retention_seconds=HOUR)
    assert again.kept_for_table == 1 and again.deleted_files == 0
    gone = output_gc_pass(store, job, grace_seconds=0, clock=later, delta_retention_seconds=0)
    assert gone.deleted_files == 1
    assert full_would_delete(store, job, 0) == set()
    assert _rows(store, job) == (list(range(model.durable)),) * 2


def test_a_longer_retention_or_a_new_log_makes_the_pass_full(tmp_path):
    store = open_store(f"file://{tmp_path}/store")
    job = JobRef("default", "full")
    model = DeltaGcModel(store=store, job=job, root=tmp_path)
    run_steps(model, [("batch", 1), ("checkpoint", 0), ("batch", 1), ("checkpoint", 0), ("restore", 0),
                      ("batch", 1), ("checkpoint", 0)])
    gc_pass(store, job, retain=1, grace_seconds=0, clock=later)
    output_gc_pass(store, job, grace_seconds=0, clock=later, delta_retention_seconds=0)
    # chk-2's file is gone already; a longer retention later cannot bring it back, but must not
    # lean on a cursor that forgot the removals a shorter one let go
    cursor = read_cursor(store, job, "default")
    assert cursor is not None and cursor.delta["retention"] == 0
    output_gc_pass(store, job, grace_seconds=0, clock=later, delta_retention_seconds=HOUR)
    assert read_cursor(store, job, "default").delta["retention"] == HOUR
    assert full_would_delete(store, job, HOUR) == set()


def full_would_delete(store: ObjectStore, job: JobRef, retention: float) -> set[str]:
    """What a full dry-run pass would still delete: "files", "snapshots", and entries that name no
    file left in the store (an entry whose file the table keeps stays with it in a cursor's pass: it
    is how a later pass finds that file)."""
    dry = output_gc_pass(store, job, grace_seconds=0, dry_run=True, clock=later, incremental=False,
                         delta_retention_seconds=retention)
    left = {o.key for o in store.list(f"{job.root}/outputs/")}
    entries = set()
    for name in dry.deleted_entries:
        path, entry_id = name.split(":")
        try:
            doc = json.loads(store.get_bytes(f"{job.root}/outputs/{path}/_commits/{entry_id}.json"))
        except ObjectNotFoundError:
            entries.add(name)
            continue
        if not {k for f in doc.get("files", []) for k in f.get("keys", [])} & left:
            entries.add(name)
    return entries | ({"files"} if dry.deleted_files else set()) | ({"snapshots"} if dry.deleted_snapshots else set())


class KilledDeltaModel(DeltaGcModel):
    """The vacuum property's model, with GC passes from the cursor killed after the n-th delete."""

    # commits of the log up to this version may have lost their removed files to a pass with no retention
    released_up_to = -1

    def step(self, action: str, arg: int) -> None:
        if action != "killed_gc":
            super().step(action, arg)
            if action == "gc":
                retention = HOUR if arg >= 4 else 0
                assert full_would_delete(self.store, self.job, retention) == set(), (action, arg)
                if retention:
                    self.check_time_travel()
                else:
                    self.released_up_to = self.log_version()
            return
        if self.sink is None and self.table_pos is None:
            return
        gc_pass(self.store, self.job, retain=1 + arg % 3, grace_seconds=0, clock=later)
        with contextlib.suppress(Killed):
            output_gc_pass(KillAfter(self.store, arg), self.job, grace_seconds=0, clock=later,  # type: ignore[arg-type]
                           delta_retention_seconds=HOUR if arg % 2 else 0)
        if not arg % 2:
            self.released_up_to = self.log_version()
        self.check_every_restore()

    def log_version(self) -> int:
        root = f"{self.job.root}/outputs/default"
        return max((int(o.key.rsplit("/", 1)[1][:20]) for o in self.store.list(f"{root}/_delta_log/")
                    if o.key.endswith(".json") and "/_delta_log/0" in o.key), default=-1)

    def check_time_travel(self) -> None:
        """Inside an hour's retention (every commit here) every version of the table reads whole: no
        file a commit removed is gone, except a commit's that a pass with no retention already saw
        (that pass may delete its removed files; a longer retention later cannot bring them back)."""
        root = f"{self.job.root}/outputs/default"
        for info in self.store.list(f"{root}/_delta_log/"):
            if info.key.endswith(".json") and "/_delta_log/0" in info.key:
                if int(info.key.rsplit("/", 1)[1][:20]) <= self.released_up_to:
                    continue
                for path in removed_paths(self.store.get_bytes(info.key), 0):
                    assert self.store.exists(f"{root}/{path}"), f"{path}, removed by {info.key}, is gone"


KILL = st.tuples(st.just("killed_gc"), st.integers(1, 6))


@pytest.mark.slow  # a store copy per retained point after every pass
@settings(max_examples=40, deadline=None)
@given(st.lists(st.one_of(ACTIONS, KILL), min_size=8, max_size=30))
def test_delta_passes_from_the_cursor_killed_anywhere_keep_every_version_readers_need(actions):
    """After every pass (also one killed after any delete) every retained point restores to exactly
    its rows (delta-rs and polars), the table reads its current version, the project's reader reads
    the committed history, every version inside an hour's retention reads whole after a pass with
    it, and a full pass with the same retention finds nothing more to collect."""
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp)
        model = KilledDeltaModel(store=open_store(f"file://{root}/store"), job=JobRef("default", "kd"), root=root)
        model.row_per_checkpoint = True
        for action, arg in actions:
            model.step(action, arg)
            assert _rows(model.store, model.job) == (list(range(model.expected_table())),) * 2, (action, arg)
            assert [r["v"] for r in read_committed(model.store, model.job)] == list(range(model.durable)), (action, arg)
        gc_pass(model.store, model.job, retain=1, grace_seconds=0, clock=later)
        output_gc_pass(model.store, model.job, grace_seconds=0, clock=later, delta_retention_seconds=0)
        assert full_would_delete(model.store, model.job, 0) == set()
        model.check_every_restore()


def test_a_cursor_without_the_logs_state_means_one_full_pass_then_a_delta_cursor(tmp_path):
    """A cursor written for the path when it held no Delta log (or by an earlier sidecar) has no
    `delta`: the pass is full, and writes one that has it."""
    store = open_store(f"file://{tmp_path}/store")
    job = JobRef("default", "old")
    model = DeltaGcModel(store=store, job=job, root=tmp_path)
    run_steps(model, [("batch", 1), ("checkpoint", 0), ("batch", 1), ("checkpoint", 0)])
    output_gc_pass(store, job, grace_seconds=0, clock=later)
    doc = json.loads(store.get_bytes(cursor_key(job)))
    del doc["paths"]["default"]["delta"]
    store.put_bytes(cursor_key(job), json.dumps(doc).encode())
    run_steps(model, [("batch", 1), ("checkpoint", 2)])  # an upload no entry names, of a dead attempt
    result = output_gc_pass(store, job, grace_seconds=0, clock=later)
    assert result.deleted_files == 1 and read_cursor(store, job, "default").delta is not None
    assert full_would_delete(store, job, 0) == set()
    assert _rows(store, job) == (list(range(model.durable)),) * 2
