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
from dataclasses import dataclass
from pathlib import Path

from hypothesis import given, settings
from hypothesis import strategies as st

from sparkpoint.operator.store.view import delete_checkpoints
from sparkpoint.runtime.checkpoint import write_fence
from sparkpoint.runtime.sink.journal import SinkJournal
from sparkpoint.runtime.sink.transactional import TransactionalSink, read_committed
from sparkpoint.runtime.store import JobRef, open_store

from .test_output_gc import Model as SinkHistoryModel
from .test_sink import fake_write_files

ACTIONS = st.one_of(
    st.tuples(st.just("batch"), st.integers(0, 3)),  # a batch of 0-3 values (0: an empty batch)
    st.tuples(st.just("checkpoint"), st.booleans()),  # True: crash between manifest and commit entry
    st.tuples(st.just("restore"), st.integers(0, 50)),  # a new pod restores some checkpoint (or savepoint)
    st.tuples(st.just("restart_local"), st.just(0)),  # the container restarts, hot dir and journal kept
    st.tuples(st.just("recreate"), st.just(0)),  # deleted (gc.onDelete: delete) and created again
)


@dataclass
class Model(SinkHistoryModel):
    """test_output_gc's model of the sink's histories, and a job deleted and created again."""

    uid: int = 0  # the StreamingJob's uid (incarnation)

    def attempt(self, journal: SinkJournal) -> TransactionalSink:
        return TransactionalSink(self.store, self.job, attempt=write_fence(self.store, self.job),
                                 path="default", journal=journal, incarnation=f"uid-{self.uid}",
                                 write_files=fake_write_files)

    def step(self, action: str, arg: int) -> None:
        if action != "recreate":
            super().step(action, arg)
            return
        if self.sink is None:
            self.restore(0)
        delete_checkpoints(self.store, self.job)  # the finalizer: outputs, manifests, ... (not the fence)
        self.points, self.number, self.uid = {}, 0, self.uid + 1  # its checkpoint ids start again at chk-000001
        self.restore(0)


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
