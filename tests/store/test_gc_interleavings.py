"""Exhaustive interleavings of one checkpoint and one GC pass (a small model check).

The hypothesis state machine explores broadly; this test covers every ordering of the steps where
the known races live: a GC pass that listed pending markers before the checkpoint's marker
existed, an orphaned object whose content a new checkpoint needs again (old or young), and a
time jump past the grace period while the checkpoint is in flight.

Mutation check (run by hand when changing gc.py or writer.py): GC ignoring pending markers,
the writer reusing orphans regardless of age, GC without a grace period, and an off-by-one in
retention are each caught here. (GC's second pending listing is defence in depth: objects
written after a pass started are never its candidates, so removing it is not caught.)
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

GRACE, REUSE_WINDOW, PENDING_TIMEOUT, RETAIN = 100.0, 50.0, 400.0, 1
JOB = JobRef("default", "interleave")
WRITER_STEPS = ["begin", "plan", "upload", "commit"]
GC_STEPS = gcsteps.STEPS
SCENARIOS = {  # name: (age of the orphaned object before the run, content the checkpoint needs)
    "fresh-content": (200.0, "new"),
    "revert-to-old-orphan": (200.0, "v0"),
    "revert-to-young-orphan": (20.0, "v0"),
}


def orderings() -> list[tuple[str, ...]]:
    """Every distinct interleaving of 4 writer steps, 4 GC steps and one time jump."""
    return gcsteps.orderings({"W": len(WRITER_STEPS), "G": len(GC_STEPS), "T": 1})


class World:
    """One run's store, built by copying a template (three checkpoints, then an orphan's age)."""

    def __init__(self, template: Path, tmp: Path, age: float, content: str):
        self.tmp, self.clock = tmp, FakeClock()
        if not (template / "store").exists():
            self._build_template(template, age, content)
        shutil.copytree(template / "store", tmp / "store")
        self.store = ShiftedStore(DirectoryStore(tmp / "store", fsync=False), self.clock)
        self.store.shift = dict(self.template_shift)
        self.clock.offset = self.template_offset
        self.frozen = template / "frozen"
        self.expected_tree = tree_digest(self.frozen)
        self.writer = self._writer()  # the restarted runtime
        self.op = None
        self.committed = None
        self.gc = GcPass(self.store, JOB, retain=RETAIN, grace_seconds=GRACE,
                         pending_timeout_seconds=PENDING_TIMEOUT, clock=self.clock)

    template_shift: dict[str, float] = {}
    template_offset = 0.0

    def _build_template(self, template: Path, age: float, content: str) -> None:
        self.store = ShiftedStore(DirectoryStore(template / "store", fsync=False), self.clock)
        hot = template / "hot"
        hot.mkdir(parents=True)
        for name in ("a", "b", "c"):
            (hot / name).write_text(f"{name}-v0" * 50)
        writer = self._writer()
        for version in ("v0", "v1", "v2"):  # chk1..3; with retain=1, a's v0/v1 objects are orphans
            (hot / "a").write_text(f"a-{version}" * 50)
            writer.take_checkpoint(hot)
        self.clock.offset += age
        (hot / "a").write_text(f"a-{content}" * 50)
        shutil.copytree(hot, template / "frozen")
        World.template_shift, World.template_offset = dict(self.store.shift), self.clock.offset

    def _writer(self) -> CheckpointWriter:
        return CheckpointWriter(self.store, JOB, attempt=write_fence(self.store, JOB), job_uid="u",
                                upload_workers=1, reuse_window_seconds=REUSE_WINDOW, clock=self.clock,
                                inline_max=0)  # every file an object: the scenarios are about object reuse

    def writer_step(self, step: str) -> None:
        if step == "begin":
            self.op = self.writer.begin(self.frozen, batch_id=1)
        elif step == "plan":
            self.op.plan()
        elif step == "upload":
            self.op.upload_all()
        else:
            self.committed = self.op.commit()
            self.op = None

    def gc_step(self, step: str) -> None:
        gc_step(self.gc, step)

    def check_invariants(self, where: str) -> None:
        ids = list_checkpoint_ids(self.store, JOB)
        for cid in ids[-RETAIN:]:
            for entry in load_manifest(self.store, JOB, cid).files:
                assert self.store.stat(object_key(JOB, entry.sha256)), f"{where}: {cid} lost {entry.path}"
        if self.op is not None and self.op.planned:
            for sha in (set(self.op.sources) - set(self.op.to_upload)) | self.op.uploaded:
                assert self.store.stat(object_key(JOB, sha)), f"{where}: in-flight {self.op.id} lost {sha[:12]}"

    def check_end_state(self) -> None:
        assert_restores_then_only_latest_remains(
            self.store, JOB, self.tmp / "restored", self.expected_tree, self.clock,
            advance=PENDING_TIMEOUT + GRACE + 1, passes=2,
            retain=RETAIN, grace_seconds=GRACE, pending_timeout_seconds=PENDING_TIMEOUT)


@pytest.mark.parametrize("scenario", sorted(SCENARIOS))
def test_every_interleaving_of_a_checkpoint_and_a_gc_pass_is_safe(scenario: str, tmp_path: Path) -> None:
    age, content = SCENARIOS[scenario]
    runs = orderings()
    assert len(runs) == 630
    for n, order in enumerate(runs):
        tmp = tmp_path / f"run{n}"
        tmp.mkdir()
        world = World(tmp_path / "template", tmp, age, content)
        def jump(world: World = world) -> None:
            world.clock.offset += GRACE + 20  # past the grace period, within the pending timeout
        gcsteps.play(order, {"W": iter(WRITER_STEPS), "G": iter(GC_STEPS), "T": None},
                     {"W": world.writer_step, "G": world.gc_step, "T": jump},
                     lambda i, world=world, order=order: world.check_invariants(f"{scenario} {''.join(order)} step {i}"))
        assert world.committed is not None
        world.check_end_state()
        shutil.rmtree(tmp)
