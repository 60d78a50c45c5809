"""Property: whatever the history of publishes, crashes, restores to older points and batch boundaries,
a reader of the transactional sink sees exactly the rows of the history the running job continues.

A model job emits the values 0, 1, 2, ... in order; every history cuts them into batches at random
boundaries, so the rows of any history up to a checkpoint at position p are exactly 0..p-1. After
every step the reader must return exactly 0..H-1, where H is the position of the last point the
running history made durable (its last published checkpoint, or the checkpoint it restored).
A job may also be deleted with gc.onDelete: delete and re-created under the same name (a new uid,
whose checkpoint ids start at chk-000001 again): then only the new job's rows may be seen.
"""

from __future__ import annotations

import tempfile
from dataclasses import dataclass, field
from pathlib import Path

from hypothesis import given, settings
from hypothesis import strategies as st

from sparkpoint.operator.store_view import delete_checkpoints
from sparkpoint.runtime.checkpoint import write_fence
from sparkpoint.runtime.sink.journal import SinkJournal
from sparkpoint.runtime.sink.transactional import TransactionalSink, read_committed
from sparkpoint.runtime.store import JobRef, open_store

from .test_sink import FakeBatch, fake_write_files

ACTIONS = st.one_of(
    st.tuples(st.just("batch"), st.integers(0, 3)),  # a batch of 0-3 values (0: an empty batch)
    st.tuples(st.just("checkpoint"), st.booleans()),  # True: crash between manifest and commit entry
    st.tuples(st.just("restore"), st.integers(0, 50)),  # a new pod restores some checkpoint (or savepoint)
    st.tuples(st.just("restart_local"), st.just(0)),  # the container restarts, hot dir and journal kept
    st.tuples(st.just("recreate"), st.just(0)),  # deleted (gc.onDelete: delete) and created again
)


@dataclass
class Checkpoint:
    id: str
    pos: int
    extra: dict


@dataclass
class Model:
    store: object
    job: JobRef
    root: Path
    checkpoints: list[Checkpoint] = field(default_factory=list)
    pods: int = 0
    sink: TransactionalSink | None = None
    batch: int = -1  # last committed batch of the running history
    pos: int = 0  # next value the running history emits
    durable: int = 0  # H: what a reader must see, 0..H-1
    last_own: Checkpoint | None = None  # the running work dir's newest checkpoint
    uid: int = 0  # the StreamingJob's uid (incarnation)

    def new_attempt(self, journal: SinkJournal) -> TransactionalSink:
        return TransactionalSink(self.store, self.job, attempt=write_fence(self.store, self.job),
                                 path="default", journal=journal, incarnation=f"uid-{self.uid}",
                                 write_files=fake_write_files)

    def restore(self, pick: int) -> None:
        self.pods += 1
        journal = SinkJournal(self.root / f"pod-{self.pods}")
        self.sink = self.new_attempt(journal)
        if self.checkpoints:
            c = self.checkpoints[pick % len(self.checkpoints)]
            self.sink.resume(c.id, c.extra)
            self.batch, self.pos, self.durable = c.extra["sink"]["upToBatch"], c.pos, c.pos
        else:
            self.sink.resume(None, None)
            self.batch, self.pos, self.durable = -1, 0, 0
        self.last_own = None

    def restart_local(self) -> None:
        latest = self.checkpoints[-1] if self.checkpoints else None
        self.sink = self.new_attempt(self.sink.journal)
        self.sink.resume(latest and latest.id, latest and latest.extra, local=True)
        if latest is not None and latest is self.last_own:
            self.durable = latest.pos  # its entry, lost in a crash, is published now

    def step(self, action: str, arg: int) -> None:
        if self.sink is None:
            self.restore(0)
        if action == "batch":
            self.batch += 1
            self.sink.write_batch(FakeBatch([{"v": v} for v in range(self.pos, self.pos + arg)]), self.batch)
            self.pos += arg
        elif action == "checkpoint":
            extra = self.sink.manifest_extra(self.batch)
            self.sink.upload_staged(extra)
            c = Checkpoint(f"chk-{len(self.checkpoints) + 1:06d}", self.pos, extra)
            self.checkpoints.append(c)  # the manifest exists
            self.last_own = c
            if arg:
                self.restart_local()
            else:
                self.sink.publish(c.id, extra)
                self.durable = c.pos
        elif action == "restore":
            self.restore(arg)
        elif action == "recreate":
            delete_checkpoints(self.store, self.job)  # the finalizer; the model holds the manifests
            self.checkpoints, self.uid = [], self.uid + 1
            self.restore(0)
        else:
            self.restart_local()


@settings(max_examples=60, deadline=None)
@given(st.lists(ACTIONS, min_size=1, max_size=30))
def test_reader_sees_exactly_the_running_history(actions):
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp)
        model = Model(store=open_store(f"file://{root}/store"), job=JobRef("default", "prop"), root=root)
        for action, arg in actions:
            model.step(action, arg)
            seen = [r["v"] for r in read_committed(model.store, model.job)]
            assert seen == list(range(model.durable)), (action, arg)
