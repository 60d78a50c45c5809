"""Exhaustive interleavings of one checkpoint taken with executors and one GC pass (issue 42;
docs/design.md §4, "Executor-side state"): the executors' objects are uploaded by them, after the
driver's pending marker named every object, so GC spares them exactly as it spares the driver's.

The same small model check as test_gc_interleavings.py, with the executor protocol's steps: begin
(the executors prepare, the driver merges and claims the marker), plan with the driver's uploads (their
races with GC are test_gc_interleavings.py's), the executors' uploads, commit; a GC pass's four steps
and a time jump past the grace in every order (630 orderings per scenario, slow tier: about 5 minutes
at load 11; the unit tier plays every 15th, 42 per scenario).
The state file that changes is an executor's: new content, the content of an orphan older than the
grace, or of a young one. No manifest ever names a missing object, an in-flight checkpoint never loses
an object it counts on, and the checkpoint restores the whole hot dir.

Mutation check (by hand): the marker naming only the driver's objects (writer.begin's
`{*sources, *remote_sizes}` -> `sources`) fails here."""

from __future__ import annotations

import os
import shutil
from pathlib import Path

import pytest

from sparkpoint.runtime.checkpoint import CheckpointWriter, GcPass, write_fence
from sparkpoint.runtime.checkpoint.catalog import list_checkpoint_ids, load_manifest
from sparkpoint.runtime.checkpoint.freeze import freeze, partition_dir_of
from sparkpoint.runtime.executor_state import (
    ExecutorCheckpoint,
    Prepared,
    UploadAck,
    checkpoint_with_executors,
    prepare,
    prepare_request,
    upload,
)
from sparkpoint.runtime.store import DirectoryStore, JobRef, ObjectStore
from sparkpoint.runtime.store.layout import object_key

from . import gcsteps
from .gcsteps import assert_restores_then_only_latest_remains, gc_step
from .timeshift import FakeClock, ShiftedStore
from .trees import tree_digest

GRACE, REUSE_WINDOW, PENDING_TIMEOUT, RETAIN = 100.0, 50.0, 400.0, 1
JOB = JobRef("default", "interleave-executors")
BATCH = 1
WRITER_STEPS = ["begin", "plan", "upload_executors", "commit"]  # plan: and the driver's uploads
SCENARIOS = {  # name: (age of the orphaned object before the run, content the checkpoint needs)
    "fresh-content": (200.0, "new"),
    "revert-to-old-orphan": (200.0, "v0"),
    "revert-to-young-orphan": (20.0, "v0"),
}
CHANGING = "state/0/0/2.delta"  # on executor a


class Local:
    def __init__(self, prepared: Prepared, store: ObjectStore):
        self.prepared, self.store = prepared, store

    @property
    def report(self):  # type: ignore[no-untyped-def]
        return self.prepared.report

    def upload(self, checkpoint: str, shas: list[str]) -> UploadAck:
        return upload(self.prepared, self.store, JOB, checkpoint, shas, workers=1)


def _hot(root: Path, changing: str) -> None:
    files = {"metadata": '{"id":"q"}', "state/0/_metadata/metadata": "v1",
             "state/0/0/1.snapshot": "b" * 200, CHANGING: f"a-{changing}" * 50,
             "state/0/1/1.snapshot": "c" * 200, "state/0/1/2.delta": "d" * 200}
    for b in range(BATCH + 1):
        files[f"offsets/{b}"] = 'v1\n{"batchWatermarkMs":0,"conf":{"spark.sql.shuffle.partitions":"2"}}\n{"o":1}'
        files[f"commits/{b}"] = "v1\n{}"
    for rel, text in files.items():
        (root / rel).parent.mkdir(parents=True, exist_ok=True)
        tmp = root / f"{rel}.new"
        tmp.write_text(text)
        os.replace(tmp, root / rel)  # a new inode, as Spark's rename-on-write gives


def _split(hot: Path, dest: Path) -> None:
    """The driver's share and the two executors' disks (a: partition 0, b: partition 1)."""
    shutil.rmtree(dest, ignore_errors=True)
    shutil.copytree(hot, dest / "driver", ignore=lambda d, names: [
        n for n in names if partition_dir_of(f"{Path(d).relative_to(hot).as_posix()}/{n}")])
    for name, part in (("a", "state/0/0"), ("b", "state/0/1")):
        shutil.copytree(hot / part, dest / name / part)


class World:
    """One run's store, built by copying a template (three checkpoints, then an orphan's age)."""

    template_shift: dict[str, float] = {}
    template_offset = 0.0

    def __init__(self, template: Path, tmp: Path, age: float, content: str):
        self.tmp, self.clock = tmp, FakeClock()
        if not (template / "store").exists():
            self._build_template(template, age, content)
        shutil.copytree(template / "store", tmp / "store")
        self.store = ShiftedStore(DirectoryStore(tmp / "store", fsync=False), self.clock)
        self.store.shift = dict(World.template_shift)
        self.clock.offset = World.template_offset
        self.disks = template / "disks"
        self.expected_tree = tree_digest(template / "hot")
        self.writer = self._writer()  # the restarted runtime
        self.checkpoint: ExecutorCheckpoint | None = None
        self.committed = None
        self.gc = GcPass(self.store, JOB, retain=RETAIN, grace_seconds=GRACE,
                         pending_timeout_seconds=PENDING_TIMEOUT, clock=self.clock)

    def _build_template(self, template: Path, age: float, content: str) -> None:
        self.store = ShiftedStore(DirectoryStore(template / "store", fsync=False), self.clock)
        hot, disks = template / "hot", template / "disks"
        writer = self._writer()
        for version in ("v0", "v1", "v2"):  # chk1..3; with retain=1, the v0/v1 objects are orphans
            _hot(hot, version)
            _split(hot, disks)
            checkpoint_with_executors(writer, self._frozen(disks, template / f"frozen-{version}"),
                                      self._executors(disks, template / f"prep-{version}"),
                                      batch=BATCH, partitions=2, operators=["0"])
        self.clock.offset += age
        _hot(hot, content)
        _split(hot, disks)
        World.template_shift, World.template_offset = dict(self.store.shift), self.clock.offset

    def _frozen(self, disks: Path, dest: Path) -> Path:
        assert freeze(disks / "driver", dest, scope="driver").batch_id == BATCH
        return dest

    def _executors(self, disks: Path, work: Path) -> list[Local]:
        request = prepare_request(disks / "driver", BATCH)
        return [Local(prepare(disks / e, request, work / e, executor=e), self.store) for e in ("a", "b")]

    def _writer(self) -> CheckpointWriter:
        return CheckpointWriter(self.store, JOB, attempt=write_fence(self.store, JOB), job_uid="u",
                                upload_workers=1, reuse_window_seconds=REUSE_WINDOW, clock=self.clock, inline_max=0)

    def writer_step(self, step: str) -> None:
        if step == "begin":
            self.checkpoint = ExecutorCheckpoint(
                self.writer, self._frozen(self.disks, self.tmp / "frozen"), self._executors(self.disks, self.tmp / "prep"),
                batch=BATCH, partitions=2, operators=["0"])
            self.checkpoint.begin()
        elif step == "plan":
            self.checkpoint.plan()  # type: ignore[union-attr]
            self.checkpoint.upload_driver()  # type: ignore[union-attr]
        elif step == "commit":
            self.committed = self.checkpoint.commit()  # type: ignore[union-attr]
            self.checkpoint = None
        else:
            getattr(self.checkpoint, step)()

    def check_invariants(self, where: str) -> None:
        for cid in list_checkpoint_ids(self.store, JOB)[-RETAIN:]:
            for entry in load_manifest(self.store, JOB, cid).files:
                assert self.store.stat(object_key(JOB, entry.sha256)), f"{where}: {cid} lost {entry.path}"
        op = self.checkpoint.op if self.checkpoint else None
        if op is not None and op.planned:
            counted = (set(op.sources) | set(op.remote_sizes)) - set(op.to_upload) | op.uploaded
            for sha in counted:
                assert self.store.stat(object_key(JOB, sha)), f"{where}: in-flight {op.id} lost {sha[:12]}"

    def check_end_state(self) -> None:
        assert_restores_then_only_latest_remains(
            self.store, JOB, self.tmp / "restored", self.expected_tree, self.clock,
            advance=PENDING_TIMEOUT + GRACE + 1, passes=2,
            retain=RETAIN, grace_seconds=GRACE, pending_timeout_seconds=PENDING_TIMEOUT)


@pytest.mark.parametrize("stride", [pytest.param(1, marks=pytest.mark.slow, id="all"), pytest.param(15, id="sample")])
@pytest.mark.parametrize("scenario", sorted(SCENARIOS))
def test_every_interleaving_of_an_executor_checkpoint_and_a_gc_pass_is_safe(scenario: str, stride: int,
                                                                           tmp_path: Path) -> None:
    age, content = SCENARIOS[scenario]
    runs = gcsteps.orderings({"W": len(WRITER_STEPS), "G": len(gcsteps.STEPS), "T": 1})
    assert len(runs) == 630
    for n, order in enumerate(runs[::stride]):
        tmp = tmp_path / f"run{n}"
        tmp.mkdir()
        world = World(tmp_path / "template", tmp, age, content)

        def jump(world: World = world) -> None:
            world.clock.offset += GRACE + 20  # past the grace period, within the pending timeout
        gcsteps.play(order, {"W": iter(WRITER_STEPS), "G": iter(gcsteps.STEPS), "T": None},
                     {"W": world.writer_step, "G": lambda step, world=world: gc_step(world.gc, step), "T": jump},
                     lambda i, world=world, order=order: world.check_invariants(f"{scenario} {''.join(order)} step {i}"))
        assert world.committed is not None
        world.check_end_state()
        shutil.rmtree(tmp)
