"""A standby attempt end to end (issue 43; runtime/service/standby.py) with real Spark on MinIO: it writes
nothing while it follows, fetches only each new checkpoint's new objects, does not trust a corrupted
held object, and once promoted (after the active process was killed, or while it still runs, which
fences the old one out) finishes with the exactly-once sink's output equal to the failure-free result."""

from __future__ import annotations

import json
import signal
import uuid
from pathlib import Path

import pytest
import yaml

from harness.runtime_job import RuntimeProcess, WindowedJob, canonical, committed, state_replays, wait_until
from sparkpoint.runtime.checkpoint import read_fence
from sparkpoint.runtime.checkpoint.catalog import list_checkpoint_ids, load_manifest
from sparkpoint.runtime.sink.transactional import read_committed
from sparkpoint.runtime.store import JobRef, ObjectStore, open_store

from .test_recovery_spark import log_lines
from .test_runtime_spark import _get

pytestmark = [pytest.mark.spark, pytest.mark.minio, pytest.mark.timeout(1800)]
TEST_BUCKET = "sparkpoint-test"


def new_job(minio_server, tmp_path: Path, name: str) -> tuple[WindowedJob, Path, dict, ObjectStore, JobRef]:  # type: ignore[no-untyped-def]
    job = WindowedJob(name=name, rows_per_batch=1000, keys=300, total_batches=30, trigger="300ms",
                      checkpoint_interval="2s")
    url = f"s3://{TEST_BUCKET}/{name}-{uuid.uuid4().hex[:10]}"
    env = minio_server.env()
    return job, job.write(tmp_path / "job.yaml", url), env, open_store(url, env=env), JobRef("default", name)


def start_standby(job_file: Path, tmp_path: Path, env: dict, name: str = "standby",  # type: ignore[type-arg]
                  *extra: str) -> tuple[RuntimeProcess, int]:
    pod = tmp_path / name
    p = RuntimeProcess(job_file, pod, tmp_path / f"{name}.log", until_batch=None, env=env,
                       extra_args=("--standby", "--standby-interval", "500ms", *extra)).start()
    wait_until(lambda: (pod / "standby.json").exists(), 300, "the standby's API", p)
    return p, json.loads((pod / "standby.json").read_text())["port"]


def standby_doc(port: int) -> dict:  # type: ignore[type-arg]
    return _get(port, "/status")[1]["standby"]


def listing(store: ObjectStore, ref: JobRef) -> dict[str, tuple[int, object]]:
    return {o.key: (o.size, o.last_modified) for o in store.list(f"{ref.root}/")}


def shas(store: ObjectStore, ref: JobRef, cid: str) -> set[str]:
    return {f.sha256 for f in load_manifest(store, ref, cid).files if not f.inline}


def promote_and_finish(standby: RuntimeProcess, port: int, job: WindowedJob) -> dict:  # type: ignore[type-arg]
    assert _get(port, "/promote", {})[0] == 202
    wait_until(lambda: _get(port, "/readyz")[0] == 200, 300, "the promoted standby's query", standby)
    status = _get(port, "/status")[1]
    wait_until(lambda: committed(standby.work_dir) >= job.until_batch, 600, "the last batch", standby)
    standby.proc.send_signal(signal.SIGTERM)
    assert standby.wait(120) == 0
    return status


def test_standby_writes_nothing_follows_new_objects_only_and_takes_over_after_a_kill(minio_server, tmp_path):
    job, job_file, env, store, ref = new_job(minio_server, tmp_path, "standby-kill")
    first = RuntimeProcess(job_file, tmp_path / "pod1", tmp_path / "first.log", until_batch=8, env=env).start()
    assert first.wait(600) == 0, (tmp_path / "first.log").read_text()[-3000:]
    before = listing(store, ref)
    # A standby that starts, follows and is stopped before any promotion writes nothing at all.
    idle, port = start_standby(job_file, tmp_path, env, "idle")
    try:
        newest = list_checkpoint_ids(store, ref)[-1]
        wait_until(lambda: standby_doc(port)["checkpoint"] == newest and standby_doc(port)["rounds"] >= 4, 300,
                   "the standby to hold the newest checkpoint", idle)
        wait_until(lambda: "session" in _get(port, "/status")[1]["startPhases"], 300, "the standby's session", idle)
        assert _get(port, "/readyz")[0] == 503 and _get(port, "/healthz")[0] == 200
        idle.proc.send_signal(signal.SIGTERM)
        assert idle.wait(120) == 0
    finally:
        idle.kill()
    assert listing(store, ref) == before  # its JVM, session (event log), following and stop wrote nothing
    # The job runs again with a standby beside it: each checkpoint it takes costs only its new objects.
    active = RuntimeProcess(job_file, tmp_path / "pod2", tmp_path / "active.log", until_batch=None, env=env).start()
    standby = None
    try:
        wait_until(lambda: committed(tmp_path / "pod2") >= 10, 600, "batch 10", active)
        standby, port = start_standby(job_file, tmp_path, env)
        wait_until(lambda: committed(tmp_path / "pod2") >= 20, 600, "batch 20", active)
        wait_until(lambda: len([e for e in log_lines(tmp_path / "standby.log")
                                if e.get("msg") == "standby holds a checkpoint"]) >= 4, 300, "followed checkpoints")
        active.kill()
        last = list_checkpoint_ids(store, ref)[-1]
        wait_until(lambda: standby_doc(port)["checkpoint"] == last, 60, "the standby to hold the last checkpoint")
        held = [e for e in log_lines(tmp_path / "standby.log") if e.get("msg") == "standby holds a checkpoint"]
        assert held[0]["fetchedObjects"] == len(shas(store, ref, held[0]["checkpoint"]))
        for prev, cur in zip(held, held[1:], strict=False):
            new = shas(store, ref, cur["checkpoint"]) - shas(store, ref, prev["checkpoint"])
            assert cur["fetchedObjects"] == len(new), (prev, cur)
        assert sum(h["fetchedObjects"] for h in held) == standby_doc(port)["fetchedObjects"]
        assert sum(h["fetchedObjects"] for h in held) < sum(len(shas(store, ref, h["checkpoint"])) for h in held)
        # A held object damaged on disk is checked at the promotion and downloaded again.
        objects = tmp_path / "standby" / "standby-objects"
        victim = max(objects.iterdir(), key=lambda p: p.stat().st_size)
        victim.write_bytes(b"\0" * victim.stat().st_size)
        killed_attempt = read_fence(store, ref)
        status = promote_and_finish(standby, port, job)
    finally:
        active.kill()
        if standby is not None:
            standby.kill()
    assert status["attempt"] == killed_attempt + 1
    assert (status["restore"]["source"], status["restore"]["checkpoint"]) == ("remote", last)
    promotion = status["standby"]["promotion"]
    assert (promotion["rejectedFiles"], promotion["downloadedFiles"]) == (1, 1), promotion
    assert "promoted" in status["startPhases"]
    assert canonical(read_committed(store, ref)) == job.expected_rows()


def test_promotion_beside_a_running_attempt_fences_it_out(minio_server, tmp_path):
    job, job_file, env, store, ref = new_job(minio_server, tmp_path, "standby-fence")
    active = RuntimeProcess(job_file, tmp_path / "pod1", tmp_path / "active.log", until_batch=None, env=env).start()
    standby = None
    try:
        wait_until(lambda: committed(tmp_path / "pod1") >= 6, 600, "batch 6", active)
        standby, port = start_standby(job_file, tmp_path, env)
        wait_until(lambda: standby_doc(port)["checkpoint"] is not None and
                   "session" in _get(port, "/status")[1]["startPhases"], 300, "a held checkpoint", standby)
        old_attempt = read_fence(store, ref)
        assert _get(port, "/status")[1]["attempt"] is None  # a standby claims none until promoted
        assert _get(port, "/promote", {"attempt": 3})[0] == 409  # not the attempt this pod would start
        assert _get(port, "/promote", {})[0] == 202
        wait_until(lambda: _get(port, "/readyz")[0] == 200, 300, "the promoted standby's query", standby)
        # The old attempt still runs: its next checkpoint's commit is refused.
        wait_until(lambda: any("fenced off" in json.dumps(e) for e in log_lines(tmp_path / "active.log")),
                   120, "the old attempt's fenced checkpoint", active)
        active.kill()
        status = _get(port, "/status")[1]
        wait_until(lambda: committed(standby.work_dir) >= job.until_batch, 600, "the last batch", standby)
        standby.proc.send_signal(signal.SIGTERM)
        assert standby.wait(120) == 0
    finally:
        active.kill()
        if standby is not None:
            standby.kill()
    assert status["attempt"] == old_attempt + 1
    assert status["standby"]["promotion"]["reusedFiles"] > 0
    writers = {load_manifest(store, ref, c).attempt for c in list_checkpoint_ids(store, ref)}
    assert max(writers) == old_attempt + 1 and writers <= {old_attempt, old_attempt + 1}
    assert canonical(read_committed(store, ref)) == job.expected_rows()


def test_a_warmed_up_standby_writes_nothing_and_its_promotion_is_exactly_once(minio_server, tmp_path):
    """--standby-warmup (runtime/service/warmup.py): the standby runs the job's query once on a scratch
    checkpoint into a sink that writes nothing, then follows; the store is untouched, its scratch dir gone,
    and the promoted attempt restores the job's own checkpoint and finishes with the exact output."""
    job, job_file, env, store, ref = new_job(minio_server, tmp_path, "standby-warm")
    # The job as the operator runs it with spec.standby.warmup; maintenance every second, so that each
    # snapshot Spark makes is in the hot dir (and the next checkpoint) a second later, not 15 s later.
    doc = yaml.safe_load(job_file.read_text())
    doc["spec"]["standby"] = {"enabled": True, "warmup": True}
    doc["spec"]["spark"]["conf"] = {"spark.sql.streaming.stateStore.maintenanceInterval": "1s"}
    job_file.write_text(yaml.safe_dump(doc))
    # Batch 18 is state version 19: version 10's snapshot has 9 versions to reach the hot dir before the
    # drain's checkpoint, and version 20's is not due yet.
    first = RuntimeProcess(job_file, tmp_path / "pod1", tmp_path / "first.log", until_batch=18, env=env).start()
    assert first.wait(600) == 0, (tmp_path / "first.log").read_text()[-3000:]
    before, last, old_attempt = listing(store, ref), list_checkpoint_ids(store, ref)[-1], read_fence(store, ref)
    # Its state snapshots every 10 versions (session.DELTAS_PER_SNAPSHOT_FAST_RESTORE; Spark's 50 before):
    # the promoted first batch replays at most 10 changelogs per partition here, not every version since 0.
    restored = load_manifest(store, ref, last)
    replays = state_replays([f.path for f in restored.files], restored.batch_id + 1)
    assert len(replays) == 4 and max(replays.values()) <= 10, (restored.batch_id, replays)
    standby, port = start_standby(job_file, tmp_path, env, "standby", "--standby-warmup")
    try:
        wait_until(lambda: (standby_doc(port)["warmup"] or {}).get("state") not in (None, "pending"), 600,
                   "the standby's warm-up", standby)
        assert standby_doc(port)["warmup"]["state"] == "warm", standby_doc(port)
        wait_until(lambda: standby_doc(port)["checkpoint"] == last, 120, "the standby to hold the last checkpoint")
        assert listing(store, ref) == before  # the warm-up's query wrote nothing to the store
        assert (tmp_path / "standby" / "standby-warmup").is_dir()  # its own scratch checkpoint, left for Spark
        assert not (tmp_path / "standby" / "hot").exists() or not any((tmp_path / "standby" / "hot").iterdir())
        status = promote_and_finish(standby, port, job)
    finally:
        standby.kill()
    assert status["attempt"] == old_attempt + 1
    assert (status["restore"]["source"], status["restore"]["checkpoint"]) == ("remote", last)
    assert canonical(read_committed(store, ref)) == job.expected_rows()
