"""Exhaustive interleavings for the runtime's writer: no reuse by age, failed markers carried.

The runtime's writer (reuse window 0, `carry_failed`) lets GC run with a grace of about nothing, so
orphans go as soon as nothing references them. Its one source of reuse beyond the base checkpoint
is the kept pending marker of a failed operation F. This test runs every ordering of the next
checkpoint Q's steps (begin, plan, finish), F giving up (its abort) and one GC pass's steps, in
three scenarios, and checks after every step that nothing Q relies on is gone:

- reuse-from-failed: Q needs what F uploaded (old enough to be a GC candidate by age alone);
- old-orphan: Q needs the content of an object no marker or kept checkpoint references;
- marker-expired: as the first, but F's marker is past the pending timeout (GC abandons it).

Mutation check (run by hand when changing writer.py): reusing any object the store holds, abort
deleting the marker while the writer still reuses from it, and reusing from a marker older than
half the pending timeout are each caught here.
"""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from sparkpoint.runtime.checkpoint import CheckpointWriter, GcPass, write_fence
from sparkpoint.runtime.checkpoint.catalog import list_checkpoint_ids, load_manifest
from sparkpoint.runtime.store import DirectoryStore, JobRef
from sparkpoint.runtime.store.layout import object_key

from . import gcsteps
from .gcsteps import assert_restores_then_only_latest_remains, gc_step
from .timeshift import FakeClock, ShiftedStore
from .trees import tree_digest

GRACE, PENDING_TIMEOUT, RETAIN = 1.0, 400.0, 1
JOB = JobRef("default", "carried")
Q_STEPS = ["begin", "plan", "finish"]
GC_STEPS = gcsteps.STEPS
SCENARIOS = {  # name: (content Q needs for file a, age of F's marker when the run starts)
    "reuse-from-failed": ("vF", 30.0),
    "old-orphan": ("v0", 30.0),
    "marker-expired": ("vF", PENDING_TIMEOUT + 1),
}


def orderings() -> list[tuple[str, ...]]:
    return gcsteps.orderings({"Q": len(Q_STEPS), "G": len(GC_STEPS), "F": 1})


def runtime_writer(store, clock) -> CheckpointWriter:  # type: ignore[no-untyped-def]
    return CheckpointWriter(store, JOB, attempt=write_fence(store, JOB), job_uid="u", upload_workers=1,
                            reuse_window_seconds=0, carry_failed=True,
                            pending_timeout_seconds=PENDING_TIMEOUT, clock=clock,
                            inline_max=0)  # every file an object: the scenarios are about object reuse


class World:
    """Three checkpoints (a = v0, v1, v2; with retain 1 the first two are dropped by the pass),
    then F: a = vF, marker written and every object uploaded, not yet given up."""

    def __init__(self, template: Path, tmp: Path, content: str, marker_age: float):
        if not (template / "store").exists():
            self._build(template, content, marker_age)
        self.tmp, self.clock = tmp, FakeClock()
        shutil.copytree(template / "store", tmp / "store")
        self.store = ShiftedStore(DirectoryStore(tmp / "store", fsync=False), self.clock)
        self.store.shift, self.clock.offset = dict(self.t_shift), self.t_offset
        # The same runtime process: its writer still knows F (rebuilt here from the template's record).
        self.writer = runtime_writer(self.store, self.clock)
        self.writer.own.entries = {k: type(v)(v.created, set(v.shas), v.failed) for k, v in self.t_markers.items()}
        self.writer._next_number = self.t_next
        self.f_op = self.t_f_op_id
        self.frozen = template / "frozen"
        self.expected = tree_digest(self.frozen)
        self.q = None
        self.committed = None
        self.gc = GcPass(self.store, JOB, retain=RETAIN, grace_seconds=GRACE,
                         pending_timeout_seconds=PENDING_TIMEOUT, clock=self.clock)

    def _build(self, template: Path, content: str, marker_age: float) -> None:
        clock = FakeClock()
        store = ShiftedStore(DirectoryStore(template / "store", fsync=False), clock)
        hot = template / "hot"
        hot.mkdir(parents=True)
        for name in ("a", "b", "c"):
            (hot / name).write_text(f"{name}-v0" * 50)
        writer = runtime_writer(store, clock)
        for version in ("v0", "v1", "v2"):
            (hot / "a").write_text(f"a-{version}" * 50)
            writer.take_checkpoint(hot)
        (hot / "a").write_text("a-vF" * 50)
        f = writer.begin(hot, batch_id=4)
        f.plan()
        f.upload_all()
        clock.offset += marker_age  # everything F uploaded is past the grace by age
        (hot / "a").write_text(f"a-{content}" * 50)
        shutil.copytree(hot, template / "frozen")
        World.t_shift, World.t_offset = dict(store.shift), clock.offset
        World.t_markers, World.t_next, World.t_f_op_id = dict(writer.own.entries), writer._next_number, f.id
        World.t_f = f

    def q_step(self, step: str) -> None:
        if step == "begin":
            self.q = self.writer.begin(self.frozen, batch_id=5)
        elif step == "plan":
            self.q.plan()
        else:
            self.q.upload_all()
            self.committed = self.q.commit()
            self.q = None

    def f_gives_up(self) -> None:
        # F's abort, on this world's writer (the template's operation object is only a record).
        self.t_f.writer = self.writer
        self.t_f.abort()

    def gc_step(self, step: str) -> None:
        gc_step(self.gc, step)

    def check(self, where: str) -> None:
        for cid in list_checkpoint_ids(self.store, JOB)[-RETAIN:]:
            for entry in load_manifest(self.store, JOB, cid).files:
                assert self.store.stat(object_key(JOB, entry.sha256)), f"{where}: {cid} lost {entry.path}"
        if self.q is not None and self.q.planned:
            for sha in set(self.q.sources) - set(self.q.to_upload):
                assert self.store.stat(object_key(JOB, sha)), f"{where}: {self.q.id} reuses a deleted object"

    def check_end(self, content: str) -> None:
        # Once F gave up and Q committed, its marker is gone: deleted by Q's plan, or abandoned by GC.
        assert_restores_then_only_latest_remains(
            self.store, JOB, self.tmp / "restored", self.expected, self.clock,
            advance=PENDING_TIMEOUT + 1, passes=1,
            retain=RETAIN, grace_seconds=GRACE, pending_timeout_seconds=PENDING_TIMEOUT)


@pytest.mark.parametrize("scenario", sorted(SCENARIOS))
def test_every_interleaving_with_a_carried_marker_is_safe(scenario: str, tmp_path: Path) -> None:
    content, marker_age = SCENARIOS[scenario]
    runs = orderings()
    assert len(runs) == 280
    reused_from_f = 0
    for n, order in enumerate(runs):
        tmp = tmp_path / f"run{n}"
        tmp.mkdir()
        world = World(tmp_path / "template", tmp, content, marker_age)
        gcsteps.play(order, {"Q": iter(Q_STEPS), "G": iter(GC_STEPS), "F": None},
                     {"Q": world.q_step, "G": world.gc_step, "F": world.f_gives_up},
                     lambda i, world=world, order=order: world.check(f"{scenario} {''.join(order)} step {i}"))
        assert world.committed is not None
        reused_from_f += world.committed.new_bytes == 0
        world.check_end(content)
        shutil.rmtree(tmp)
    if scenario == "reuse-from-failed":
        # The point of carrying F: in most orderings Q uploads nothing (F's objects are reused).
        assert reused_from_f > len(runs) // 2, reused_from_f
    else:
        assert reused_from_f == 0
