"""Property: upsert snapshots and output GC never change what readers see (docs/design.md §7).

Two stores get the same batches and restores from two sinks of the same attempt: `main` also gets
checkpoints, savepoints, retention, snapshots (some killed part-way) and output GC passes (some
killed part-way); `shadow` gets none of them. After every step the reader's view of both is the
same, in the same order; after every GC pass a restore of every point left (every checkpoint
manifest and savepoint), made in copies of both stores, reads the same too. Directory stores."""

from __future__ import annotations

import contextlib
import shutil
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path

from hypothesis import example, given, settings
from hypothesis import strategies as st

from sparkpoint.runtime.checkpoint import create_savepoint, gc_pass, list_checkpoint_ids, write_fence
from sparkpoint.runtime.sink.compaction import CompactionSettings
from sparkpoint.runtime.sink.output_gc import output_gc_pass
from sparkpoint.runtime.sink.upsert import UpsertSink, read_upserted
from sparkpoint.runtime.sink.upsert_snapshot import restorable_points
from sparkpoint.runtime.store import JobRef, open_store
from sparkpoint.runtime.store.base import StoreError

from .test_sink import FakeBatch, fake_write_files
from .test_upsert_snapshot import write_point


class Dies:
    """A store that dies (raises) at its n-th write or delete: a pod killed in the middle."""

    def __init__(self, store, after: int):
        self.inner, self.left = store, after

    def __getattr__(self, name):
        return getattr(self.inner, name)

    def _tick(self) -> None:
        self.left -= 1
        if self.left < 0:
            raise StoreError("injected: killed")

    def put_bytes(self, key, data):
        self._tick()
        return self.inner.put_bytes(key, data)

    def put_file(self, key, path):
        self._tick()
        return self.inner.put_file(key, path)

    def delete(self, key):
        self._tick()
        return self.inner.delete(key)


def later() -> float:
    return time.time() + 5  # every object is past a zero grace


@dataclass
class Model:
    root: Path
    fmt: str
    job: JobRef = field(default_factory=lambda: JobRef("default", "prop"))
    sinks: tuple = ()
    batch: int = -1  # the last batch the running attempt committed
    checkpoints: int = 0
    savepoints: int = 0

    def __post_init__(self) -> None:
        self.main = open_store(f"file://{self.root}/main")
        self.shadow = open_store(f"file://{self.root}/shadow")
        self.start(None)

    def start(self, batch: int | None) -> None:
        attempt = write_fence(self.main, self.job)
        assert write_fence(self.shadow, self.job) == attempt
        self.sinks = tuple(UpsertSink(s, self.job, path="agg", key_columns=["k"], attempt=attempt, fmt=self.fmt,
                                      staging_dir=self.root / f"{name}-{attempt}", write_files=fake_write_files,
                                      compaction=CompactionSettings(interval_seconds=0, min_files=1))
                           for name, s in (("main", self.main), ("shadow", self.shadow)))
        for sink in self.sinks:
            sink.resume(None, None, batch=batch)
        self.batch = -1 if batch is None else batch

    def points(self) -> list[int]:
        return sorted({b for _, b in restorable_points(self.main, self.job)})

    def step(self, action: str, arg: int) -> None:
        if action == "batch":
            rows = [{"k": (arg + i) % 5, "v": f"{self.sinks[0].attempt}/{self.batch + 1}/{i}"} for i in range(arg % 4)]
            if arg == 9:  # killed after the parts, before the marker; the next start is local recovery
                self.sinks[0].store = Dies(self.main, 1)
                with contextlib.suppress(StoreError):
                    self.sinks[0].write_batch(FakeBatch(rows or [{"k": 0, "v": "x"}]), self.batch + 1)
                self.start(self.batch)
                return
            for sink in self.sinks:
                sink.write_batch(FakeBatch(rows, columns=["k", "v"]), self.batch + 1)
            self.batch += 1
        elif action == "checkpoint" and self.batch >= 0:
            self.checkpoints += 1
            write_point(self.main, self.job, f"chk-{self.checkpoints:06d}", self.sinks[0].attempt, self.batch)
        elif action == "restore" and (points := self.points()):
            self.start(points[arg % len(points)])
        elif action == "local":
            self.start(self.batch)
        elif action == "fresh":
            self.start(None)
        elif action == "savepoint" and (ids := list_checkpoint_ids(self.main, self.job)):
            self.savepoints += 1
            create_savepoint(self.main, self.job, f"sp-{self.savepoints}", ids[arg % len(ids)])
        elif action == "retain":
            gc_pass(self.main, self.job, retain=1 + arg % 3, grace_seconds=0, clock=later)
        elif action == "snapshot":
            sink = self.sinks[0]
            sink.store = Dies(self.main, arg) if arg else self.main
            with contextlib.suppress(StoreError):
                sink.compact()
            sink.store = self.main
        elif action == "gc":
            with contextlib.suppress(StoreError):
                output_gc_pass(Dies(self.main, arg) if arg else self.main, self.job, grace_seconds=0, clock=later)
            self.check_restores()

    def view(self, store) -> list:
        return list(read_upserted(store, self.job, "agg", ["k"]).items())

    def check_restores(self) -> None:
        """A restore of every point left reads the same with and without snapshots and GC."""
        for batch in self.points():
            copies = []
            for name in ("main", "shadow"):
                shutil.rmtree(self.root / f"{name}-copy", ignore_errors=True)
                shutil.copytree(self.root / name, self.root / f"{name}-copy")
                store = open_store(f"file://{self.root}/{name}-copy")
                attempt = write_fence(store, self.job)
                UpsertSink(store, self.job, path="agg", key_columns=["k"], attempt=attempt,
                           staging_dir=self.root / "restore-staging").resume(None, None, batch=batch)
                copies.append(self.view(store))
            assert copies[0] == copies[1], f"a restore to batch {batch} reads otherwise after GC"


BATCH = st.tuples(st.just("batch"), st.integers(0, 9))  # 9: killed before the marker
CHECKPOINT = st.tuples(st.just("checkpoint"), st.just(0))
ACTIONS = st.one_of(  # weighted towards batches and checkpoints, so snapshots have batches to fold
    BATCH, BATCH, BATCH, CHECKPOINT, CHECKPOINT,
    st.tuples(st.just("restore"), st.integers(0, 20)),
    st.tuples(st.just("local"), st.just(0)),
    st.tuples(st.just("fresh"), st.just(0)) | st.tuples(st.just("savepoint"), st.integers(0, 20)),
    st.tuples(st.just("retain"), st.integers(0, 2)),
    st.tuples(st.just("snapshot"), st.sampled_from([0, 0, 1, 2, 3])),  # n > 0: killed at its n-th write
    st.tuples(st.just("gc"), st.sampled_from([0, 0, 1, 2, 3, 5, 8])),  # n > 0: killed at its n-th delete
)


# Histories random draws rarely reach, each of which a wrong choice of S or a wrong usability check
# turns into a mismatch: an older attempt's checkpoint below the newest attempt's (S must not pass
# it), and a fresh start after a snapshot (the snapshot no longer applies).
OLDER_POINT = [("batch", 1), ("batch", 1), ("batch", 1), ("checkpoint", 0), ("local", 0), ("batch", 2),
               ("batch", 2), ("checkpoint", 0), ("snapshot", 0), ("gc", 0)]
FRESH = [("batch", 1), ("batch", 2), ("checkpoint", 0), ("snapshot", 0), ("gc", 0), ("fresh", 0),
         ("batch", 3), ("gc", 0)]


@settings(max_examples=60, deadline=None)
@example("jsonl", OLDER_POINT)
@example("parquet", FRESH)
@given(st.sampled_from(["parquet", "jsonl"]), st.lists(ACTIONS, min_size=20, max_size=60))
def test_snapshots_and_gc_never_change_what_readers_or_a_restore_see(fmt, actions):
    with tempfile.TemporaryDirectory() as tmp:
        model = Model(Path(tmp), fmt)
        for action, arg in actions:
            model.step(action, arg)
            assert model.view(model.main) == model.view(model.shadow), (action, arg)


def test_snapshots_and_gc_bound_a_constant_key_set(tmp_path):
    """The example the property generalises: with a checkpoint every 5 batches and retention of 2,
    the store keeps a snapshot and the batches since the older retained checkpoint."""
    model = Model(tmp_path, "parquet")
    for n in range(60):
        model.step("batch", 3)
        if n % 5 == 4:
            model.step("checkpoint", 0)
            model.step("retain", 1)
            model.step("snapshot", 0)
            model.step("gc", 0)
    assert model.view(model.main) == model.view(model.shadow)
    main = [o for o in model.main.list("") if "/upserts/batch-" in o.key and o.key.endswith(".json")]
    shadow = [o for o in model.shadow.list("") if "/upserts/batch-" in o.key and o.key.endswith(".json")]
    assert len(shadow) == 60 and len(main) <= 10, len(main)
