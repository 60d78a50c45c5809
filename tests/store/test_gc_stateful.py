"""GC safety as a stateful property test.

Hypothesis interleaves, step by step: checkpoint steps of up to two concurrent checkpoints
(begin+pending marker, plan, each upload, commit), GC steps (list pending, list checkpoints, delete manifests, list objects, each object
deletion, delete abandoned markers), crashes of either, time passing, pins, file churn (including
content reverting to old, already-collected versions), restores of the latest and of older retained
checkpoints, and new attempts started by several concurrent starters (the fence).

Invariants after every step:
 * every object of a retained checkpoint (newest `retain`) or a pinned one exists with its size;
 * every object an in-flight checkpoint has uploaded or decided to reuse still exists;
 * restoring the latest or any retained checkpoint reproduces the tree it was taken from;
 * concurrent starters get distinct attempts, the newest one holds the fence, and an operation of a
   fenced (zombie) writer never commits.
At the end (everything crashed, time past grace and pending timeout, two full passes): the store
holds exactly the objects of retained and pinned checkpoints, and no pending markers.

The protocol's timing assumptions are part of the model: a checkpoint is abandoned before it is
older than the pending timeout, and the writer's reuse window is shorter than the grace period.
Two writer configurations are modelled: reuse by age (a reuse window, the CLI's default) and the
runtime's (no reuse window, failed operations' markers kept for the next checkpoint to reuse, and a
GC grace of about nothing).
"""

from __future__ import annotations

import shutil
import tempfile
import threading
import time
from pathlib import Path

import pytest
from hypothesis import HealthCheck, settings
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, invariant, rule, run_state_machine_as_test

from sparkpoint.runtime.checkpoint import (
    CheckpointWriter,
    FencedError,
    GcPass,
    inline,
    read_fence,
    restore,
    write_fence,
)
from sparkpoint.runtime.checkpoint.catalog import list_checkpoint_ids, load_manifest
from sparkpoint.runtime.store import DirectoryStore, JobRef, ObjectStore
from sparkpoint.runtime.store.layout import object_key, objects_prefix, pending_prefix

from .timeshift import FakeClock, ShiftedStore
from .trees import tree_digest

RETAIN = 2
GRACE = 100.0
PENDING_TIMEOUT = 400.0
REUSE_WINDOW = 50.0
FILES = ["state/1.sst", "state/2.sst", "state/3.sst", "offsets/0", "commits/0", "metadata"]


def _content(name: str, version: int) -> str:
    """State files above the inline limit (objects), the logs below it (carried in the manifest),
    as in a Spark tree: the model covers both kinds."""
    return f"{name}={version}\n" * (300 if name.endswith(".sst") else 20)


class GcSafety(RuleBasedStateMachine):
    make_store: staticmethod  # set by the test function: () -> ObjectStore
    reuse_window, grace, carry_failed = REUSE_WINDOW, GRACE, False  # the writer configuration modelled

    def __init__(self) -> None:
        super().__init__()
        self.tmp = Path(tempfile.mkdtemp(prefix="gc-stateful-"))
        self.clock = FakeClock()
        self.store: ObjectStore = ShiftedStore(self.make_store(self.tmp), self.clock)
        self.job = JobRef("default", "gcprop")
        self.hot = self.tmp / "hot"
        for name in FILES:
            (self.hot / name).parent.mkdir(parents=True, exist_ok=True)
            (self.hot / name).write_text(_content(name, 0))
        self.writer = self._new_writer()
        self.ops: dict[int, dict] = {}  # slot -> in-flight operation (maxConcurrent = 2)
        self.gc: GcPass | None = None
        self.gc_steps: list = []
        self.pins: set[str] = set()
        self.trees: dict[str, dict[str, str]] = {}  # checkpoint id -> digest of its frozen tree
        self.freezes = 0

    def _new_writer(self, attempt: int | None = None) -> CheckpointWriter:
        attempt = write_fence(self.store, self.job) if attempt is None else attempt
        return CheckpointWriter(self.store, self.job, attempt=attempt, job_uid="u", upload_workers=1,
                                reuse_window_seconds=self.reuse_window, pending_timeout_seconds=PENDING_TIMEOUT,
                                clock=self.clock, carry_failed=self.carry_failed, inline_max=inline.RECOMMENDED_MAX_FILE)

    def teardown(self) -> None:
        try:
            self.ops, self.gc = {}, None
            self.clock.offset += PENDING_TIMEOUT + GRACE + REUSE_WINDOW + 1
            for _ in range(2):
                GcPass(self.store, self.job, retain=RETAIN, grace_seconds=self.grace, pins=self.pins,
                       pending_timeout_seconds=PENDING_TIMEOUT, clock=self.clock).run()
            expected = {object_key(self.job, sha) for m in self._protected() for sha in m.shas()}
            present = {i.key for i in self.store.list(objects_prefix(self.job))}
            assert present == expected, "unreferenced objects past the grace period survived GC"
            assert not list(self.store.list(pending_prefix(self.job))), "abandoned pending markers survived"
        finally:
            shutil.rmtree(self.tmp, ignore_errors=True)

    # --- model helpers -----------------------------------------------------------------------
    def _protected(self):  # type: ignore[no-untyped-def]
        ids = list_checkpoint_ids(self.store, self.job)
        keep = set(ids[-RETAIN:]) | (self.pins & set(ids))
        return [load_manifest(self.store, self.job, cid) for cid in ids if cid in keep]

    # --- churn and time ----------------------------------------------------------------------
    @rule(which=st.sets(st.sampled_from(FILES), min_size=1, max_size=3), version=st.integers(0, 3))
    def change_files(self, which: set[str], version: int) -> None:
        # Few versions per file: content often reverts to an object GC already collected.
        for name in which:
            tmp = self.hot / (name + ".tmp")
            tmp.write_text(_content(name, version))
            tmp.replace(self.hot / name)

    @rule(seconds=st.sampled_from([1.0, 30.0, 120.0, 250.0]))
    def time_passes(self, seconds: float) -> None:
        for slot, flight in list(self.ops.items()):
            if self.clock() + seconds - flight["started"] >= PENDING_TIMEOUT - 1:
                flight["op"].abort()  # the checkpoint timeout fires before the pending marker expires
                del self.ops[slot]
        self.clock.offset += seconds

    @rule(data=st.data())
    def pin_or_unpin(self, data: st.DataObject) -> None:
        ids = list_checkpoint_ids(self.store, self.job)
        if self.pins and data.draw(st.booleans()):
            self.pins.discard(data.draw(st.sampled_from(sorted(self.pins))))
        elif ids:
            self.pins.add(data.draw(st.sampled_from(ids)))

    # --- checkpointing -----------------------------------------------------------------------
    @rule(slot=st.sampled_from([0, 1]))
    def checkpoint_step(self, slot: int) -> None:
        flight = self.ops.get(slot)
        if flight is None:
            self.freezes += 1
            frozen = self.tmp / f"freeze-{self.freezes}"
            shutil.copytree(self.hot, frozen)  # the freeze: a private, immutable copy
            op = self.writer.begin(frozen, batch_id=self.freezes)
            self.ops[slot] = {"op": op, "started": self.clock(), "tree": tree_digest(frozen), "steps": ["plan"]}
            return
        op, step = flight["op"], flight["steps"].pop(0)
        if step == "plan":
            op.plan()
            flight["steps"] = [("upload", sha) for sha in op.to_upload] + ["commit"]
        elif step == "commit":
            if op.writer is not self.writer:  # a zombie of an attempt fenced off since it began
                with pytest.raises(FencedError):
                    op.commit()
                op.abort()
                del self.ops[slot]
                return
            result = op.commit()
            self.trees[result.id] = flight["tree"]
            del self.ops[slot]
        else:
            op.upload_one(step[1])

    @rule(slot=st.sampled_from([0, 1]))
    def checkpoint_fails(self, slot: int) -> None:
        """An upload error or a timeout at whatever step the operation is in."""
        flight = self.ops.pop(slot, None)
        if flight is not None:
            flight["op"].abort()

    @rule(slot=st.sampled_from([0, 1]))
    def checkpoint_until_commit(self, slot: int) -> None:
        """Everything but the commit: the state in which most of a checkpoint's life is spent."""
        self.checkpoint_step(slot)
        while slot in self.ops and self.ops[slot]["steps"] != ["commit"]:
            self.checkpoint_step(slot)

    @rule(slot=st.sampled_from([0, 1]))
    def checkpoint_to_completion(self, slot: int) -> None:
        self.checkpoint_step(slot)
        while slot in self.ops:
            self.checkpoint_step(slot)

    @rule(starters=st.integers(2, 4))
    def new_attempt_starts(self, starters: int) -> None:
        """Several runtimes start together; in-flight operations of the old writer become zombies."""
        barrier, attempts = threading.Barrier(starters), []

        def start() -> None:
            barrier.wait()
            attempts.append(write_fence(self.store, self.job))
        threads = [threading.Thread(target=start) for _ in range(starters)]
        for t in threads:
            t.start()
        for t in threads:
            t.join(60)
        assert len(attempts) == starters and len(set(attempts)) == starters, attempts
        assert read_fence(self.store, self.job) == max(attempts)
        self.writer = self._new_writer(attempt=max(attempts))

    @rule()
    def writer_crashes(self) -> None:
        self.ops = {}  # pending markers and uploads stay behind as debris
        self.writer = self._new_writer()

    # --- garbage collection ------------------------------------------------------------------
    @rule()
    def gc_step(self) -> None:
        if self.gc is None:
            self.gc = GcPass(self.store, self.job, retain=RETAIN, grace_seconds=self.grace, pins=set(self.pins),
                             pending_timeout_seconds=PENDING_TIMEOUT, clock=self.clock)
            self.gc_steps = ["list_pending", "list_checkpoints", "delete_manifests", "list_objects"]
        step = self.gc_steps.pop(0)
        if step == "list_objects":
            self.gc.list_objects()
            self.gc_steps = [("delete", info) for info in self.gc.candidates] + ["delete_abandoned_pending"]
        elif isinstance(step, tuple):
            self.gc.delete_object(step[1])
        else:
            getattr(self.gc, step)()
        if not self.gc_steps:
            self.gc = None

    @rule()
    def gc_to_completion(self) -> None:
        self.gc_step()
        while self.gc is not None:
            self.gc_step()

    @rule()
    def gc_crashes(self) -> None:
        self.gc = None

    # --- restores and invariants -------------------------------------------------------------
    @rule()
    def restore_latest(self) -> None:
        ids = list_checkpoint_ids(self.store, self.job)
        if not ids:
            return
        target = self.tmp / f"restore-{len(ids)}-{time.monotonic_ns()}"
        restore(self.store, self.job, target, workers=2)
        assert tree_digest(target) == self.trees[ids[-1]]  # the newest id, whichever op finished last
        shutil.rmtree(target)

    @rule(data=st.data())
    def restore_older(self, data: st.DataObject) -> None:
        protected = sorted(m.id for m in self._protected())
        if not protected:
            return
        cid = data.draw(st.sampled_from(protected))
        target = self.tmp / f"restore-{cid}-{time.monotonic_ns()}"
        restore(self.store, self.job, target, checkpoint_id=cid, workers=2)
        assert tree_digest(target) == self.trees[cid]
        shutil.rmtree(target)

    @invariant()
    def protected_objects_exist(self) -> None:
        for manifest in self._protected():
            for entry in manifest.files:
                if entry.inline:  # no object; the restore rule checks its bytes
                    continue
                info = self.store.stat(object_key(self.job, entry.sha256))
                assert info is not None, f"{manifest.id} lost object {entry.sha256[:12]} ({entry.path})"
                assert info.size == entry.size

    @invariant()
    def in_flight_objects_exist(self) -> None:
        for flight in self.ops.values():
            op = flight["op"]
            if not op.planned:
                continue
            for sha in (set(op.sources) - set(op.to_upload)) | op.uploaded:
                assert self.store.stat(object_key(self.job, sha)) is not None, \
                    f"in-flight {op.id} lost object {sha[:12]}"


class GcSafetyCarried(GcSafety):
    """The runtime's writer: no reuse by age, failed markers carried; GC grace only for clock skew."""

    reuse_window, grace, carry_failed = 0.0, 1.0, True

    @invariant()
    def carried_markers_are_this_writers_live_ones(self) -> None:
        held = {i.key.rsplit("/", 1)[-1].removesuffix(".json") for i in self.store.list(pending_prefix(self.job))}
        failed = {mid for mid, m in self.writer.own.entries.items() if m.failed}
        in_flight = {f["op"].id for f in self.ops.values() if f["op"].writer is self.writer}
        assert len(failed - in_flight) <= 2, f"failed markers pile up: {sorted(failed)}"
        fresh = {mid for mid, m in self.writer.own.entries.items() if self.clock() - m.created < PENDING_TIMEOUT / 2}
        assert fresh <= held, f"a marker the writer would reuse from is gone: {sorted(fresh - held)}"


def run(make_store, max_examples: int, steps: int, machine: type[GcSafety] = GcSafety) -> None:  # type: ignore[no-untyped-def]
    machine.make_store = staticmethod(make_store)
    run_state_machine_as_test(machine, settings=settings(
        max_examples=max_examples, stateful_step_count=steps, deadline=None,
        suppress_health_check=list(HealthCheck)))


def test_gc_safety_directory_backend() -> None:
    run(lambda tmp: DirectoryStore(tmp / "store", fsync=False), max_examples=200, steps=50)


def test_gc_safety_carried_markers_directory_backend() -> None:
    run(lambda tmp: DirectoryStore(tmp / "store", fsync=False), max_examples=200, steps=50,
        machine=GcSafetyCarried)


@pytest.mark.minio
def test_gc_safety_minio(minio_server) -> None:  # type: ignore[no-untyped-def]
    import uuid

    from tests.conftest import TEST_BUCKET

    run(lambda tmp: minio_server.open(TEST_BUCKET, f"gcprop-{uuid.uuid4().hex[:10]}"), max_examples=8, steps=30)
    run(lambda tmp: minio_server.open(TEST_BUCKET, f"gcprop-{uuid.uuid4().hex[:10]}"), max_examples=8, steps=30,
        machine=GcSafetyCarried)
