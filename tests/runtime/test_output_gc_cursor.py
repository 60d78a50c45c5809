"""Output GC from a cursor (runtime/sink/gc_cursor.py): a pass that lists and walks only what changed
since the last one leaves exactly what a full pass leaves, keeps what readers and every restore need,
and costs the same at any age. Killed passes, GC between a checkpoint's upload and its manifest,
restores to old points, savepoints and snapshots every two entries are in the property test (a
directory store); the cursor's listing with S3's start-after runs on MinIO too."""

from __future__ import annotations

import contextlib
import json
import tempfile
from pathlib import Path
from unittest import mock

from hypothesis import given, settings
from hypothesis import strategies as st

from sparkpoint.runtime.checkpoint import gc_pass
from sparkpoint.runtime.sink import transactional
from sparkpoint.runtime.sink.gc_cursor import cursor_key, read_cursor
from sparkpoint.runtime.sink.output_gc import output_gc_pass
from sparkpoint.runtime.sink.reader import read_committed
from sparkpoint.runtime.store import JobRef, ObjectStore, open_store

from .test_output_gc import ACTIONS, Model, later, staged_keys


class Killed(Exception):
    pass


class KillAfter:
    """Wraps a store: the n-th delete raises (the sidecar killed mid-pass), once."""

    def __init__(self, inner: ObjectStore, n: int):
        self.inner, self.n = inner, n

    def __getattr__(self, name: str):  # type: ignore[no-untyped-def]
        return getattr(self.inner, name)

    def delete(self, key: str) -> None:
        self.n -= 1
        if self.n == 0:
            raise Killed(key)
        self.inner.delete(key)


def full_would_delete(store: ObjectStore, job: JobRef) -> set[str]:
    """What a full pass (no cursor, a dry run) would still delete now: entries by id, "files" and
    "snapshots" if any."""
    dry = output_gc_pass(store, job, grace_seconds=0, dry_run=True, clock=later, incremental=False)
    return set(dry.deleted_entries) | ({"files"} if dry.deleted_files else set()) | (
        {"snapshots"} if dry.deleted_snapshots else set())


KILL = st.tuples(st.just("killed_gc"), st.integers(1, 6))


@settings(max_examples=70, deadline=None)
@given(st.lists(st.one_of(ACTIONS, KILL), min_size=1, max_size=45), st.booleans())
def test_a_pass_from_the_cursor_leaves_what_a_full_pass_leaves(actions, snapshots):
    """After every GC pass from a cursor (also after one killed part-way), a full pass finds nothing
    more to collect; readers see exactly the durable rows and every kept point its own history
    (Model.check_restorable). With `snapshots`, the history is snapshotted every two entries."""
    with tempfile.TemporaryDirectory() as tmp, mock.patch.object(transactional, "SEGMENT", 2 if snapshots else 1000):
        root = Path(tmp)
        model = Model(store=open_store(f"file://{root}/store"), job=JobRef("default", "cur"), root=root)
        for action, arg in actions:
            if action == "killed_gc":
                if model.sink is None:
                    continue
                gc_pass(model.store, model.job, retain=1 + arg % 3, grace_seconds=0, clock=later)
                with contextlib.suppress(Killed):
                    output_gc_pass(KillAfter(model.store, arg), model.job, grace_seconds=0, clock=later)  # type: ignore[arg-type]
                model.check_restorable()
            else:
                model.step(action, arg)
            if action == "gc":  # (a checkpoint with a pass inside publishes after it: new garbage then)
                assert full_would_delete(model.store, model.job) == set(), (action, arg)
            assert [r["v"] for r in read_committed(model.store, model.job)] == list(range(model.durable)), (action, arg)
        # and a last pass from whatever cursor is left collects what a full pass would
        gc_pass(model.store, model.job, retain=1, grace_seconds=0, clock=later)
        if model.sink is not None:
            output_gc_pass(model.store, model.job, grace_seconds=0, clock=later)
            assert full_would_delete(model.store, model.job) == set()
            model.check_restorable()


def test_the_steady_pass_lists_only_the_newest_uploads_on_both_backends(store, job, tmp_path):
    """A job of many checkpoints: after the first (full) pass, a pass lists the newest folder from its
    cursor (S3 start-after on MinIO), collects a crashed upload of an older attempt, and leaves a
    cursor that a full pass agrees with."""
    model = Model(store=store, job=job, root=tmp_path)
    for _ in range(12):
        model.step("batch", 1)
        model.step("checkpoint", 0)
    model.step("gc", 0)  # full: writes the cursor
    cursor = read_cursor(store, job, "default")
    assert cursor is not None and cursor.objects >= 10
    listed: list[str] = []
    real_list, real_after = store.list, store.list_after
    with mock.patch.object(store, "list", lambda p: (listed.append(o.key) or o for o in real_list(p))), \
            mock.patch.object(store, "list_after", lambda p, a: (listed.append(o.key) or o for o in real_after(p, a))):
        model.step("batch", 1)
        model.step("checkpoint", 0)
        listed.clear()
        output_gc_pass(store, job, grace_seconds=0, clock=later)
    staged = [k for k in listed if "/staging/" in k]
    assert 1 <= len(staged) <= 3, staged  # the new upload and the retained window, not all 13
    # an older attempt's upload that never got an entry (the pod died before the manifest)
    model.step("batch", 2)
    model.step("checkpoint", 2)  # uploaded, then a new attempt restores the newest checkpoint
    orphans = {k for k in staged_keys(store, job) if f"/attempt-{model.sink.attempt - 1}/" in k} - {
        k for e in _entries(store, job) for f in e.get("files", []) for k in f["keys"]}
    assert orphans
    result = output_gc_pass(store, job, grace_seconds=0, clock=later)
    assert result.deleted_files == len(orphans) and not (orphans & staged_keys(store, job))
    assert full_would_delete(store, job) == set()
    assert [r["v"] for r in read_committed(store, job)] == list(range(model.durable))


def test_a_fresh_history_makes_the_pass_full_and_then_a_new_cursor(store, job, tmp_path):
    """A start without a checkpoint begins a new history beside the old one: no entry is on every kept
    point's chain, so passes are full (the cursor is removed) until the old points are gone; then the
    old history is collected whole and a cursor on the new one is written."""
    model = Model(store=store, job=job, root=tmp_path)
    for _ in range(4):
        model.step("batch", 1)
        model.step("checkpoint", 0)
    model.step("gc", 2)  # retain 3
    assert read_cursor(store, job, "default") is not None
    for cid in list(model.points):  # the job's checkpoints are deleted (not its output): a fresh start
        store.delete(f"{job.root}/checkpoints/{cid}.json")
    model.restore(0)
    model.step("batch", 1)
    model.step("checkpoint", 0)
    old = {k for k in staged_keys(store, job) if "/attempt-1/" in k}
    assert old
    result = output_gc_pass(store, job, grace_seconds=0, clock=later)
    assert not (old & staged_keys(store, job)) and result.deleted_files >= len(old)
    assert read_cursor(store, job, "default") is not None
    assert [r["v"] for r in read_committed(store, job)] == list(range(model.durable))
    assert full_would_delete(store, job) == set()


def test_an_unreadable_cursor_means_a_full_pass(store, job, tmp_path):
    model = Model(store=store, job=job, root=tmp_path)
    for _ in range(3):
        model.step("batch", 1)
        model.step("checkpoint", 0)
    store.put_bytes(cursor_key(job), b"{not json")
    assert read_cursor(store, job, "default") is None
    model.step("batch", 1)
    model.step("checkpoint", 2)  # orphans of a dead attempt
    output_gc_pass(store, job, grace_seconds=0, clock=later)
    assert read_cursor(store, job, "default") is not None
    assert full_would_delete(store, job) == set()


def test_a_store_that_refuses_the_cursor_keeps_full_passes_working(store, job, tmp_path, caplog):
    """A GC credential whose policy predates the cursor: the put is refused, the pass still collects
    (a full pass) and says what to allow."""
    from sparkpoint.runtime.store.base import StoreAuthError

    model = Model(store=store, job=job, root=tmp_path)
    for _ in range(3):
        model.step("batch", 1)
        model.step("checkpoint", 0)
    model.step("batch", 1)
    model.step("checkpoint", 2)  # orphans of a dead attempt
    real_put = store.put_bytes

    def put(key: str, data: bytes) -> None:
        if key == cursor_key(job):
            raise StoreAuthError("credentials rejected by the store (AccessDenied) during put")
        real_put(key, data)

    with mock.patch.object(store, "put_bytes", put):
        result = output_gc_pass(store, job, grace_seconds=0, clock=later)
    assert result.deleted_files > 0 and read_cursor(store, job, "default") is None
    assert "cannot write its cursor" in caplog.text
    assert full_would_delete(store, job) == set()


def test_the_sidecars_output_metrics_from_a_cursor_equal_a_full_passs(tmp_path):
    """What the sidecar reports of the committed output (objects, bytes, live data files) is the
    same whether the pass listed everything or started from a cursor (which counts what it passed)."""
    from .test_history_snapshots import aged_store

    store, job = aged_store(tmp_path / "s", 400, 20)
    output_gc_pass(store, job, grace_seconds=0, clock=later)  # full: deletes the snapshot-held entries
    full = output_gc_pass(store, job, grace_seconds=0, clock=later, incremental=False)  # writes the cursor
    cursor = output_gc_pass(store, job, grace_seconds=0, clock=later)
    assert read_cursor(store, job, "default") is not None
    for name in ("committed_objects", "committed_bytes", "staged_objects", "live_files", "live_bytes"):
        assert getattr(cursor, name) == getattr(full, name), name


def _entries(store: ObjectStore, job: JobRef) -> list[dict]:
    return [json.loads(store.get_bytes(o.key)) for o in store.list(f"{job.root}/outputs/default/_commits/")
            if o.key.endswith(".json")]


def test_a_pass_lists_the_snapshots_after_its_settled_one_by_their_shared_digits_past_chk_999999(tmp_path):
    """Past chk-999999 ids are 7 digits wide and sort among the 6-digit ones: a listing after S alone
    took every older 6-digit snapshot with larger leading digits, each pass (at a year, ~600 keys)."""
    from types import SimpleNamespace

    from sparkpoint.runtime.sink.gc_cursor_pass import _snapshot_listing
    from sparkpoint.runtime.sink.history import snapshot_key

    from .test_history_snapshots import CountingStore

    store, job = CountingStore(tmp_path), JobRef("default", "wide")
    numbers = [*range(1000, 1_000_000, 1000), *range(1_000_000, 3_152_000, 1000)]
    for n in numbers:
        store.put_bytes(snapshot_key(job, "default", f"chk-{n:06d}"), b"{}")
    ctx = SimpleNamespace(store=store, job=job)
    listed = {o.key.rsplit("/", 1)[1] for o in _snapshot_listing(ctx, "default", 3_149_000, ["chk-3151857", "continue-a3"])}
    assert {"chk-3149000.json", "chk-3150000.json", "chk-3151000.json"} <= listed
    assert len(listed) <= 3 + 10  # and the 6-digit chk-31x000 the digits chk-31 hold; before: 688
    # while an id is wider than S (the crossing), the listing is whole
    assert len(list(_snapshot_listing(ctx, "default", 999_000, ["chk-1000500"]))) == len(numbers)
