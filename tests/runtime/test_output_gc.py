"""Output GC (runtime/sink/output_gc.py): what it collects, and a property test that it never takes
what readers or a restore need. Directory store (the pass is the same code on MinIO; the example
test runs on both backends)."""

from __future__ import annotations

import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path

from hypothesis import given, settings
from hypothesis import strategies as st

from sparkpoint.runtime.checkpoint import create_savepoint, gc_pass, list_checkpoint_ids, write_fence
from sparkpoint.runtime.checkpoint.savepoint import list_savepoints
from sparkpoint.runtime.sink.history import SegmentReader
from sparkpoint.runtime.sink.journal import SinkJournal
from sparkpoint.runtime.sink.keys import file_keys, staging_prefix
from sparkpoint.runtime.sink.lineage import follow_chain
from sparkpoint.runtime.sink.output_gc import output_gc_pass
from sparkpoint.runtime.sink.reader import _entry_ids, _loader, read_committed
from sparkpoint.runtime.sink.transactional import TransactionalSink
from sparkpoint.runtime.store import JobRef, Manifest, open_store
from sparkpoint.runtime.store.layout import checkpoint_key
from sparkpoint.runtime.store.manifest import Totals, utcnow

from .test_sink import FakeBatch, fake_write_files


def later() -> float:
    return time.time() + 5  # every file is past a zero grace


def write_manifest(store, job: JobRef, cid: str, attempt: int, extra: dict) -> None:
    now = utcnow()
    m = Manifest(id=cid, namespace=job.namespace, job=job.name, job_uid="uid", attempt=attempt, batch_id=None,
                 trigger_time=now, completion_time=now, base_checkpoint=None, spark_version=None,
                 state_provider=None, files=[], totals=Totals(files=0, bytes=0, new_bytes=0, reused_bytes=0),
                 extra=extra)
    assert store.put_if_absent(checkpoint_key(job, cid), m.to_json())


def staged_keys(store, job: JobRef) -> set[str]:
    return {o.key for o in store.list(staging_prefix(job, "default"))}


@dataclass
class Model:
    store: object
    job: JobRef
    root: Path
    points: dict[str, tuple[int, dict]] = field(default_factory=dict)  # checkpoint id -> (pos, extra)
    pods: int = 0
    number: int = 0
    sink: TransactionalSink | None = None
    batch: int = -1
    pos: int = 0
    durable: int = 0  # the oracle: a reader sees values 0..durable-1
    last_own: str | None = None
    savepoints: int = 0

    def attempt(self, journal: SinkJournal) -> TransactionalSink:
        return TransactionalSink(self.store, self.job, attempt=write_fence(self.store, self.job), path="default",
                                 journal=journal, write_files=fake_write_files)

    def restorable(self) -> list[tuple[str, str]]:
        """(point id as the runtime resumes it, checkpoint id of its pos) of every kept point."""
        out = [(c, c) for c in list_checkpoint_ids(self.store, self.job)]
        return out + [(s.source_checkpoint, s.source_checkpoint) for s in list_savepoints(self.store, self.job)]

    def restore(self, pick: int) -> None:
        self.pods += 1
        self.sink = self.attempt(SinkJournal(self.root / f"pod-{self.pods}"))
        points = self.restorable()
        if points:
            cid = points[pick % len(points)][0]
            pos, extra = self.points[cid]
            self.sink.resume(cid, extra)
            self.batch, self.pos, self.durable = extra["sink"]["upToBatch"], pos, pos
        else:
            self.sink.resume(None, None)
            self.batch, self.pos, self.durable = -1, 0, 0
        self.last_own = None

    def restart_local(self) -> None:
        ids = list_checkpoint_ids(self.store, self.job)
        latest = ids[-1] if ids else None
        self.sink = self.attempt(self.sink.journal)
        self.sink.resume(latest, self.points[latest][1] if latest else None, local=True)
        if latest is not None and latest == self.last_own:
            self.durable = self.points[latest][0]

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
            if arg == 2:  # the pod dies after uploading, before the manifest: orphaned staged files
                self.restore(0)
                return
            if arg == 3:  # the checkpoint fails after uploading (a store error): the next one covers it
                return
            if arg == 4:  # the sidecar's pass runs while the checkpoint is between upload and manifest
                self.step("gc", 0)
            self.number += 1
            cid = f"chk-{self.number:06d}"
            write_manifest(self.store, self.job, cid, self.sink.attempt, extra)
            self.points[cid], self.last_own = (self.pos, extra), cid
            if arg == 1:  # crash between the manifest and the commit entry
                self.restart_local()
            else:
                self.sink.publish(cid, extra)
                self.durable = self.pos
        elif action == "restore":
            self.restore(arg)
        elif action == "restart_local":
            self.restart_local()
        elif action == "savepoint":
            ids = list_checkpoint_ids(self.store, self.job)
            if ids:
                self.savepoints += 1
                create_savepoint(self.store, self.job, f"sp-{self.savepoints}", ids[arg % len(ids)])
        elif action == "gc":
            gc_pass(self.store, self.job, retain=1 + arg % 3, grace_seconds=0, clock=later)
            output_gc_pass(self.store, self.job, grace_seconds=0, clock=later)
            self.check_restorable()

    def check_restorable(self) -> None:
        """Every kept point's own files and the chain it continues are all still there."""
        ids, load = _entry_ids(self.store, self.job, "default"), _loader(self.store, self.job, "default")
        present = staged_keys(self.store, self.job)
        for cid, _ in self.restorable():
            sink = self.points[cid][1]["sink"]
            needed = [k for f in sink["files"] for k in file_keys(f)]
            if sink["previous"] is not None:
                chain = follow_chain(load(sink["previous"]), ids, load, SegmentReader(self.store, self.job, "default"))
                needed += [k for e in chain for f in e["files"] for k in file_keys(f)]
            assert set(needed) <= present, f"gc deleted output that {cid} needs"


ACTIONS = st.one_of(
    st.tuples(st.just("batch"), st.integers(0, 3)),
    # 0 clean, 1 crash before the entry, 2 crash before the manifest, 3 failed, 4 gc mid-checkpoint
    st.tuples(st.just("checkpoint"), st.integers(0, 4)),
    st.tuples(st.just("restore"), st.integers(0, 50)),
    st.tuples(st.just("restart_local"), st.just(0)),
    st.tuples(st.just("savepoint"), st.integers(0, 50)),
    st.tuples(st.just("gc"), st.integers(0, 5)),
)


@settings(max_examples=80, deadline=None)
@given(st.lists(ACTIONS, min_size=1, max_size=40))
def test_gc_never_takes_what_readers_or_a_restore_need(actions):
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp)
        model = Model(store=open_store(f"file://{root}/store"), job=JobRef("default", "prop"), root=root)
        for action, arg in actions:
            model.step(action, arg)
            assert [r["v"] for r in read_committed(model.store, model.job)] == list(range(model.durable)), (action, arg)


def test_gc_collects_crashed_uploads_and_a_superseded_history(store, job, tmp_path):
    model = Model(store=store, job=job, root=tmp_path)
    for action, arg in [("batch", 2), ("checkpoint", 0), ("batch", 2), ("checkpoint", 0),  # chk-1, chk-2
                        ("batch", 3), ("checkpoint", 2),  # uploaded, then the pod died: orphans
                        ("restore", 0),  # back to chk-1: chk-2's history is superseded
                        ("batch", 1), ("checkpoint", 0), ("batch", 1), ("checkpoint", 0)]:  # chk-3, chk-4
        model.step(action, arg)
    before = staged_keys(store, job)
    assert output_gc_pass(store, job, grace_seconds=3600).deleted_files == 0  # all inside the grace
    gc_pass(store, job, retain=1, grace_seconds=0, clock=later)  # only chk-4 is kept
    result = output_gc_pass(store, job, grace_seconds=0, clock=later)
    after = staged_keys(store, job)
    assert after < before and result.deleted_files == len(before - after)
    assert "default:chk-000002" in result.deleted_entries  # the superseded history's entry
    assert [r["v"] for r in read_committed(store, job)] == list(range(model.durable)) == [0, 1, 2, 3]
    newest = [k for k in after if f"/attempt-{model.sink.attempt}/" in k]
    assert after == set(newest) | {k for e in _chain(store, job) for f in e["files"] for k in file_keys(f)}
    dry = output_gc_pass(store, job, grace_seconds=0, dry_run=True, clock=later)
    assert dry.deleted_files == 0 and staged_keys(store, job) == after  # nothing left to collect


def _chain(store, job):
    ids, load = _entry_ids(store, job, "default"), _loader(store, job, "default")
    from sparkpoint.runtime.sink.lineage import head_entry

    return follow_chain(head_entry(ids, load), ids, load, SegmentReader(store, job, "default"))
