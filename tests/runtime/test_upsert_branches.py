"""Issue 39 case 1: an upsert sink's attempts form a tree. A restore to a point of a branch a later
attempt left (attempt 1's batch-8 point, after attempt 2 restored batch 5 and re-ran 6-8 otherwise)
reads that branch's history only, and output GC keeps every retained point's own history."""

from __future__ import annotations

from pathlib import Path

from sparkpoint.runtime.checkpoint import CheckpointWriter, gc_pass, latest_checkpoint, write_fence
from sparkpoint.runtime.sink.output_gc import output_gc_pass
from sparkpoint.runtime.sink.upsert import UpsertSink, read_upserted
from sparkpoint.runtime.sink.upsert_files import visible_entries
from sparkpoint.runtime.sink.upsert_history import PREVIOUS, tree_of
from sparkpoint.runtime.sink.upsert_snapshot import safe_batch

from .test_sink import FakeBatch, fake_write_files

LATER = 4e9  # every object is older than the grace


class Attempt:
    """One attempt of the job: its fence claim, its upsert sink and a checkpoint writer (manifests
    name the attempt that took them, as the runtime's do)."""

    def __init__(self, store, job, tmp_path: Path):
        self.store, self.job = store, job
        self.number = write_fence(store, job)
        self.hot = tmp_path / f"hot-{self.number}"
        self.hot.mkdir()
        self.sink = UpsertSink(store, job, path="agg", key_columns=["k"], attempt=self.number,
                               staging_dir=tmp_path / f"staging-{self.number}", write_files=fake_write_files)
        self.writer = CheckpointWriter(store, job, attempt=self.number, job_uid="uid", reuse_window_seconds=0)

    def run(self, batch: int, rows: list[dict]) -> None:
        self.sink.write_batch(FakeBatch(rows), batch)

    def checkpoint(self, batch: int) -> str:
        (self.hot / "state").write_text(f"{self.number} {batch}")
        return self.writer.take_checkpoint(self.hot, batch_id=batch, extra={}).id


def _table(store, job) -> dict[int, int]:
    return {r["k"]: r["n"] for r in read_upserted(store, job, "agg", ["k"]).values()}


def _branches(store, job, tmp_path) -> tuple[Attempt, str]:
    """Attempt 1: batches 0-8 (n=1), points at 5 and 8. Attempt 2: restores 5, re-runs 6-8 with
    other logic (n=2, and keys 106-108 only it produces). Returns attempt 2 and the batch-8 point."""
    first = Attempt(store, job, tmp_path)
    first.sink.resume(None, None)
    for b in range(9):
        first.run(b, [{"k": b, "n": 1}])
        if b == 5:
            first.checkpoint(5)
    point8 = first.checkpoint(8)
    second = Attempt(store, job, tmp_path)
    second.sink.resume("chk-000001", {}, batch=5, parent=first.number)
    for b in range(6, 9):
        second.run(b, [{"k": b, "n": 2}, {"k": 100 + b, "n": 2}])
    second.checkpoint(8)
    return second, point8


ATTEMPT_1 = {b: 1 for b in range(9)}
ATTEMPT_2 = {**{b: 1 for b in range(6)}, **{b: 2 for b in range(6, 9)}, 106: 2, 107: 2, 108: 2}


def test_a_restore_to_a_superseded_branch_reads_that_branch_only(store, job, tmp_path):
    second, point8 = _branches(store, job, tmp_path)
    assert _table(store, job) == ATTEMPT_2
    third = Attempt(store, job, tmp_path)
    third.sink.resume(point8, {}, batch=8, parent=second.number - 1)  # attempt 1 took the point
    # Before: attempt 2's rows of 6-8 (and its keys 106-108) over attempt 1's state.
    assert _table(store, job) == ATTEMPT_1
    third.run(9, [{"k": 9, "n": 3}])
    assert _table(store, job) == {**ATTEMPT_1, 9: 3}


def test_output_gc_keeps_a_retained_points_branch_until_no_point_can_restore_it(store, job, tmp_path):
    second, point8 = _branches(store, job, tmp_path)
    output_gc_pass(store, job, grace_seconds=0, clock=lambda: LATER)
    assert _table(store, job) == ATTEMPT_2
    # Before: attempt 1's markers of 6-8 were hidden by attempt 2's restore, so GC took them.
    third = Attempt(store, job, tmp_path)
    third.sink.resume(point8, {}, batch=8, parent=second.number - 1)
    assert _table(store, job) == ATTEMPT_1
    # Once only attempt 3's history is restorable, attempt 2's branch is garbage.
    third.run(9, [{"k": 9, "n": 3}])
    third.checkpoint(9)
    gc_pass(store, job, retain=1, grace_seconds=0, clock=lambda: LATER)
    root = f"{job.root}/outputs/agg/upserts/"
    before = {o.key for o in store.list(root)}
    output_gc_pass(store, job, grace_seconds=0, clock=lambda: LATER)
    gone = before - {o.key for o in store.list(root)}
    # attempt 2's 6-8, and its restore record, which no view's chain reads any more
    assert gone == {k for k in before if "-a000002" in k or k.endswith("/_restores/a000002.json")}
    assert any("batch-000000006-a000002" in k for k in gone)
    assert _table(store, job) == {**ATTEMPT_1, 9: 3}


def test_the_reader_rule_follows_each_views_own_chain():
    files = [(b, 1, f"a1-{b}") for b in range(9)] + [(b, 2, f"a2-{b}") for b in range(6, 9)]
    restores = [(1, -1, None), (2, 5, 1), (3, 8, 1)]
    assert [k for _, k in visible_entries(files, restores)] == [f"a1-{b}" for b in range(9)]
    assert [k for _, k in visible_entries(files, restores, view=(2, 8))] == [
        *(f"a1-{b}" for b in range(6)), *(f"a2-{b}" for b in range(6, 9))]
    assert [k for _, k in visible_entries(files, restores, view=(1, 7))] == [f"a1-{b}" for b in range(8)]
    # records without a parent (before issue 39) read as the line they assumed: 3 continues 2
    legacy = [(1, -1, PREVIOUS), (2, 5, PREVIOUS), (3, 8, PREVIOUS)]
    assert [k for _, k in visible_entries(files, legacy)] == [
        *(f"a1-{b}" for b in range(6)), *(f"a2-{b}" for b in range(6, 9))]
    assert [k for _, k in visible_entries(files, [(1, -1), (2, 5)])] == [
        *(f"a1-{b}" for b in range(6)), *(f"a2-{b}" for b in range(6, 9))]


def test_a_snapshot_never_folds_past_where_a_retained_point_left_the_current_branch():
    files = [(b, 1, "") for b in range(9)] + [(b, 2, "") for b in range(6, 9)]
    restores = [(1, -1, None), (2, 5, 1)]
    # attempt 1's point at 8 and attempt 2's at 8; attempt 2's restore point (5) left retention
    assert safe_batch([(1, 8), (2, 8)], 2, restores) == 8  # the old bound: S=8 would hold attempt 2's 6-8
    assert safe_batch([(1, 8), (2, 8)], 2, restores, tree_of((a for _, a, _ in files), restores)) == 5


def test_a_point_whose_attempt_left_nothing_does_not_stop_snapshots():
    """A savepoint kept from a deleted job of the name: its attempt has no files or record here."""
    files = [(b, 9, "") for b in range(6)]
    restores = [(9, -1, None)]
    tree = tree_of((a for _, a, _ in files), restores)
    assert safe_batch([(9, 5), (4, 7)], 9, restores, tree) == 5


def test_a_start_records_the_attempt_whose_history_it_continues(store, job, tmp_path):
    """The runtime's start (make_sink): a restore names the attempt that took the point, local
    recovery the previous attempt, a fresh start nobody."""
    import json

    from sparkpoint.runtime.service.recovery import RestoreOutcome
    from sparkpoint.runtime.service.sink_setup import make_sink
    from sparkpoint.runtime.sink.keys import sink_root
    from sparkpoint.runtime.spec import SinkSpec

    first = Attempt(store, job, tmp_path)
    first.sink.resume(None, None)
    first.run(0, [{"k": 0, "n": 1}])
    first.checkpoint(0)
    manifest = latest_checkpoint(store, job)
    spec = SinkSpec(kind="upsert", path="agg", key_columns=["k"])
    cases = [(RestoreOutcome("remote", 0, manifest, 0.0, {}, ""), first.number),
             (RestoreOutcome("local", 0, manifest, 0.0, {}, ""), "previous"),
             (RestoreOutcome("fresh", None, None, 0.0, {}, ""), None)]
    for outcome, parent in cases:
        attempt = write_fence(store, job)
        make_sink(spec, store, job, attempt=attempt, incarnation="uid", work_dir=tmp_path / f"work-{attempt}",
                  restore=outcome)
        doc = json.loads(store.get_bytes(f"{sink_root(job, 'agg')}/upserts/_restores/a{attempt:06d}.json"))
        assert doc["parent"] == (attempt - 1 if parent == "previous" else parent), outcome.source
