"""Property (issue 39): an upsert sink's attempts branch, and every restorable point keeps and reads
exactly its own history (docs/design.md §6, §7).

A model keeps, per attempt, whose history it continues, after which batch, and the rows of the
batches it ran; a view (attempt, limit) is folded from that alone, independently of the sink's
code. Steps: batches, checkpoints, savepoints, retention, restores to any retained checkpoint or
savepoint (recorded as the runtime records them: the parent is the attempt that took the point),
local recovery, fresh starts, a job deleted (gc.onDelete: delete, savepoints kept) and created
again, snapshots and output GC passes. After every step the reader's table
is the newest attempt's history; after every retention or GC step a restore of every point left,
made in a copy of the store, reads exactly that point's history, and no batch marker is left that
neither the table nor a point nor the running attempt can reach. Directory stores.
"""

from __future__ import annotations

import re
import shutil
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path

from hypothesis import example, given, settings
from hypothesis import strategies as st

from sparkpoint.operator.store.view import delete_checkpoints
from sparkpoint.runtime.checkpoint import create_savepoint, gc_pass, list_checkpoint_ids, write_fence
from sparkpoint.runtime.sink.compaction import CompactionSettings
from sparkpoint.runtime.sink.output_gc import output_gc_pass
from sparkpoint.runtime.sink.upsert import UpsertSink, read_upserted
from sparkpoint.runtime.sink.upsert_snapshot import restorable_points
from sparkpoint.runtime.store import JobRef, open_store

from .test_sink import FakeBatch, fake_write_files
from .test_upsert_snapshot import write_point

UNBOUNDED = 1 << 40
_MARKER = re.compile(r"/upserts/batch-(\d+)-a(\d+)\.json$")
_RESTORE = re.compile(r"/upserts/_restores/a(\d+)\.json$")
_SNAPSHOT = re.compile(r"/upserts/_snapshots/snap-\d+-a(\d+)-[0-9a-f]+\.json$")


def later() -> float:
    return time.time() + 5  # every object is past a zero grace


@dataclass
class Lineage:
    parent: int | None
    after: int
    batches: dict[int, list[dict]] = field(default_factory=dict)


@dataclass
class Model:
    root: Path
    job: JobRef = field(default_factory=lambda: JobRef("default", "tree"))
    attempts: dict[int, Lineage] = field(default_factory=dict)
    batch: int = -1
    checkpoints: int = 0
    savepoints: int = 0
    sink: UpsertSink | None = None

    def __post_init__(self) -> None:
        self.store = open_store(f"file://{self.root}/store")
        self.start(None, None)

    # --- the model -------------------------------------------------------------------------------
    def sources(self, attempt: int | None, limit: int) -> dict[int, int]:
        """batch -> the attempt whose run of it the view (attempt, limit) reads."""
        if attempt is None or limit < 0:
            return {}
        lineage = self.attempts[attempt]
        out = self.sources(lineage.parent, min(limit, lineage.after))
        out.update({b: attempt for b in lineage.batches if b <= limit})
        return out

    def expected(self, attempt: int | None, limit: int = UNBOUNDED) -> dict:
        table: dict = {}
        for b, a in sorted(self.sources(attempt, limit).items()):
            for row in self.attempts[a].batches[b]:
                table[str(row["k"])] = row["v"]
        return table

    # --- the system ------------------------------------------------------------------------------
    def start(self, parent: int | None, after: int | None) -> None:
        attempt = write_fence(self.store, self.job)
        self.sink = UpsertSink(self.store, self.job, path="agg", key_columns=["k"], attempt=attempt,
                               staging_dir=self.root / f"staging-{attempt}", write_files=fake_write_files,
                               compaction=CompactionSettings(interval_seconds=0, min_files=1))
        self.sink.resume(None, None, batch=after, parent=parent)
        self.attempts[attempt] = Lineage(None if after is None else parent, -1 if after is None else after)
        self.batch = -1 if after is None else after

    def step(self, action: str, arg: int) -> None:
        assert self.sink is not None
        attempt = self.sink.attempt
        if action == "batch":
            b = self.batch + 1
            # keys 0-3 in every history, and one only this attempt's run of b produces
            rows = [{"k": (arg + i) % 4, "v": f"{attempt}/{b}/{i}"} for i in range(arg % 3)]
            rows.append({"k": 100 * attempt + b, "v": f"{attempt}/{b}/only"})
            self.sink.write_batch(FakeBatch(rows, columns=["k", "v"]), b)
            self.attempts[attempt].batches[b] = rows
            self.batch = b
        elif action == "checkpoint" and self.batch >= 0:
            self.checkpoints += 1
            write_point(self.store, self.job, f"chk-{self.checkpoints:06d}", attempt, self.batch)
        elif action == "savepoint" and (ids := list_checkpoint_ids(self.store, self.job)):
            self.savepoints += 1
            create_savepoint(self.store, self.job, f"sp-{self.savepoints}", ids[arg % len(ids)])
        elif action == "restore" and (points := self.points()):
            self.start(*points[arg % len(points)])
        elif action == "local":
            self.start(attempt, self.batch)
        elif action == "fresh":
            self.start(None, None)
        elif action == "recreate":  # the job is deleted (gc.onDelete: delete, savepoints kept) and created again
            delete_checkpoints(self.store, self.job)
            for lineage in self.attempts.values():
                lineage.batches.clear()  # its output went with it: a kept savepoint restores a new history
            self.start(None, None)
        elif action == "retain":
            gc_pass(self.store, self.job, retain=1 + arg % 3, grace_seconds=0, clock=later)
            self.check_points()
        elif action == "snapshot":
            self.sink.compact()
        elif action == "gc":
            output_gc_pass(self.store, self.job, grace_seconds=0, clock=later)
            self.check_points()
            self.check_nothing_unreachable()

    def points(self) -> list[tuple[int, int]]:
        """(attempt, batch) of every checkpoint manifest and savepoint."""
        return sorted({(a, int(b)) for a, b in restorable_points(self.store, self.job) if b is not None})

    def table(self, store) -> dict:
        return {str(k): row["v"] for k, row in
                ((r["k"], r) for r in read_upserted(store, self.job, "agg", ["k"]).values())}

    def check_points(self) -> None:
        """A restore of every point left (in a copy of the store) reads exactly that point's history."""
        for attempt, batch in self.points():
            shutil.rmtree(self.root / "copy", ignore_errors=True)
            shutil.copytree(self.root / "store", self.root / "copy")
            copy = open_store(f"file://{self.root}/copy")
            UpsertSink(copy, self.job, path="agg", key_columns=["k"], attempt=write_fence(copy, self.job),
                       staging_dir=self.root / "restore-staging").resume(None, None, batch=batch, parent=attempt)
            assert self.table(copy) == self.expected(attempt, batch), f"a restore of ({attempt}, {batch})"

    def check_nothing_unreachable(self) -> None:
        assert self.sink is not None
        reachable = {(b, a) for view in [(self.sink.attempt, UNBOUNDED), *self.points()]
                     for b, a in self.sources(*view).items()}
        listed = list(self.store.list(f"{self.job.root}/outputs/agg/upserts/"))
        for info in listed:
            if m := _MARKER.search(info.key):
                b, a = int(m[1]), int(m[2])
                assert (b, a) in reachable or a == self.sink.attempt, f"kept but unreachable: {info.key}"
        # restore records: those of an attempt some view's chain passes (the table's, a point's, a
        # snapshot writer's), or the running attempt's
        writers = [(int(m[1]), UNBOUNDED) for o in listed if (m := _SNAPSHOT.search(o.key))]
        chains = {a for view in [(self.sink.attempt, UNBOUNDED), *self.points(), *writers] for a in self.chain(*view)}
        for info in listed:
            if m := _RESTORE.search(info.key):
                a = int(m[1])
                assert a in chains or a >= self.sink.attempt, f"kept but unreachable: {info.key}"

    def chain(self, attempt: int | None, limit: int) -> set[int]:
        """The attempts the view (attempt, limit) passes: its own, then its parent's below its restore."""
        out: set[int] = set()
        while attempt is not None and limit >= 0 and attempt not in out and attempt in self.attempts:
            out.add(attempt)
            limit = min(limit, self.attempts[attempt].after)
            attempt = self.attempts[attempt].parent
        return out


BATCH = st.tuples(st.just("batch"), st.integers(0, 8))
ACTIONS = st.one_of(
    BATCH, BATCH, BATCH, st.tuples(st.just("checkpoint"), st.just(0)), st.tuples(st.just("checkpoint"), st.just(0)),
    st.tuples(st.just("restore"), st.integers(0, 20)),
    st.tuples(st.just("local"), st.just(0)) | st.tuples(st.just("fresh"), st.just(0))
    | st.tuples(st.just("recreate"), st.just(0)),
    st.tuples(st.just("savepoint"), st.integers(0, 20)),
    st.tuples(st.just("retain"), st.integers(0, 2)),
    st.tuples(st.just("snapshot"), st.just(0)),
    st.tuples(st.just("gc"), st.just(0)),
)

# The case: attempt 1 runs 0-8 with points at 5 and 8; attempt 2 restores 5 and re-runs 6-8;
# a snapshot and GC run; attempt 3 restores attempt 1's batch-8 point (restore index 1: (1, 8)).
BRANCH = [*[("batch", 1)] * 6, ("checkpoint", 0), *[("batch", 2)] * 3, ("checkpoint", 0),
          ("restore", 0), *[("batch", 4)] * 3, ("checkpoint", 0), ("snapshot", 0), ("gc", 0),
          ("restore", 1), ("batch", 5), ("gc", 0)]
# A job re-created under its name with a savepoint of the earlier one kept, restored after a snapshot.
RECREATED = [("batch", 1), ("batch", 1), ("checkpoint", 0), ("savepoint", 0), ("recreate", 0), ("batch", 2),
             ("batch", 2), ("checkpoint", 0), ("snapshot", 0), ("gc", 0), ("restore", 0), ("batch", 3), ("gc", 0)]


@settings(max_examples=25, deadline=None)
@example(BRANCH)
@example(RECREATED)
@given(st.lists(ACTIONS, min_size=10, max_size=40))
def test_every_restorable_point_reads_its_own_history_as_attempts_branch(actions):
    with tempfile.TemporaryDirectory() as tmp:
        model = Model(Path(tmp))
        for action, arg in actions:
            model.step(action, arg)
            assert model.sink is not None
            assert model.table(model.store) == model.expected(model.sink.attempt), (action, arg)
