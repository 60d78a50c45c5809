"""Recovery end to end with real Spark: a corrupt newest checkpoint falls back to the previous one,
and a corrupt local hot dir under --supervise falls back to the store instead of crash-looping.
Both finish with the exactly-once sink's output equal to the failure-free result."""

from __future__ import annotations

import contextlib
import json
import os
import signal
import subprocess
import sys
import uuid
from dataclasses import dataclass
from pathlib import Path

import pytest

from harness.runtime_job import RuntimeProcess, WindowedJob, canonical, committed, wait_until
from sparkpoint.runtime.checkpoint.catalog import list_checkpoint_ids, load_manifest
from sparkpoint.runtime.checkpoint.freeze import latest_committed_batch
from sparkpoint.runtime.sink.transactional import read_committed
from sparkpoint.runtime.store import JobRef, Manifest, ObjectStore, open_store
from sparkpoint.runtime.store.layout import object_key

from .test_runtime_spark import _get

pytestmark = [pytest.mark.spark, pytest.mark.timeout(900)]
TEST_BUCKET = "sparkpoint-test"


def log_lines(path: Path) -> list[dict]:
    out = []
    for line in path.read_text(errors="replace").splitlines():
        if line.startswith("{"):
            with contextlib.suppress(ValueError):
                out.append(json.loads(line))
    return out


@dataclass
class FirstRun:
    """A job run on MinIO until batch 14 (two or more checkpoints), then drained."""
    job: WindowedJob
    job_file: Path
    env: dict[str, str]
    store: ObjectStore
    ref: JobRef
    newest: Manifest
    previous: Manifest


def first_run(minio_server, tmp_path: Path, name: str, extra_env: dict[str, str] | None = None) -> FirstRun:  # type: ignore[no-untyped-def]
    job = WindowedJob(name=name, rows_per_batch=1000, keys=300, total_batches=24, trigger="300ms",
                      checkpoint_interval="2s")
    store_url = f"s3://{TEST_BUCKET}/{name}-{uuid.uuid4().hex[:10]}"
    env = {**minio_server.env(), **(extra_env or {})}
    job_file = job.write(tmp_path / "job.yaml", store_url)
    first = RuntimeProcess(job_file, tmp_path / "pod1", tmp_path / "first.log", until_batch=14, env=env).start()
    assert first.wait(600) == 0, (tmp_path / "first.log").read_text()[-3000:]
    store, ref = open_store(store_url, env=env), JobRef("default", job.name)
    ids = list_checkpoint_ids(store, ref)
    assert len(ids) >= 2, ids
    return FirstRun(job, job_file, env, store, ref, load_manifest(store, ref, ids[-1]), load_manifest(store, ref, ids[-2]))


def start_second_pod(run: FirstRun, tmp_path: Path) -> tuple[RuntimeProcess, Path, int]:
    """The job again on a new pod (empty work dir), once its control API is ready."""
    pod = tmp_path / "pod2"
    second = RuntimeProcess(run.job_file, pod, tmp_path / "second.log", until_batch=None, env=run.env).start()
    try:
        wait_until(lambda: (pod / "api.json").exists(), 300, "control API", second)
        port = json.loads((pod / "api.json").read_text())["port"]
        wait_until(lambda: _get(port, "/readyz")[0] == 200, 300, "readiness", second)
    except BaseException:
        second.kill()
        raise
    return second, pod, port


def drain_at_the_last_batch(proc: RuntimeProcess, pod: Path, job: WindowedJob) -> None:
    wait_until(lambda: committed(pod) >= job.until_batch, 600, "the last batch", proc)
    proc.proc.send_signal(signal.SIGTERM)
    assert proc.wait(120) == 0


@pytest.mark.minio
def test_corrupt_newest_checkpoint_restores_the_previous_one(minio_server, tmp_path):
    run = first_run(minio_server, tmp_path, "fallback")
    job, store, ref = run.job, run.store, run.ref
    newest, previous = run.newest, run.previous
    victim = max((f for f in newest.files if f.sha256 not in previous.shas()), key=lambda f: f.size)
    store.put_bytes(object_key(ref, victim.sha256), b"\0" * victim.size)  # same size, wrong bytes
    # A new pod (empty work dir): the restore must pass over the corrupt checkpoint, loudly.
    second, pod, port = start_second_pod(run, tmp_path)
    try:
        restore = _get(port, "/status")[1]["restore"]
        assert (restore["source"], restore["checkpoint"], restore["batchId"]) == ("remote", previous.id,
                                                                                 previous.batch_id)
        assert [f["checkpoint"] for f in restore["fallbacks"]] == [newest.id]
        assert victim.path in restore["fallbacks"][0]["error"] and "corrupt" in restore["fallbacks"][0]["error"]
        assert 'sparkpoint_restore_fallbacks_total{reason="corrupt_object"} 1.0' in _get(port, "/metrics")[1]
        drain_at_the_last_batch(second, pod, job)
    finally:
        second.kill()
    warnings = [e for e in log_lines(tmp_path / "second.log") if e.get("level") == "warning"
                and e.get("point") == f"checkpoint:{newest.id}"]
    assert warnings and victim.path in warnings[0]["error"]
    assert canonical(read_committed(store, ref)) == job.expected_rows()


def garble_payload(path: Path) -> None:
    """Flip bytes inside the first lz4 block: the framing stays intact (the start-up check cannot
    see it), decompression fails when Spark loads the state."""
    data = bytearray(path.read_bytes())
    assert len(data) > 21 + 4 + 21 + 8, f"{path} is too short to garble inside a block"
    for i in range(21 + 4, min(len(data) - 21, 21 + 40)):
        data[i] ^= 0x5A
    path.write_bytes(bytes(data))


def newest_needed_changelog(hot: Path) -> Path:
    """The newest changelog a restart reads: of a version the restart loads (up to the committed
    batch C + 1; a drain can leave the next batch's changelog behind, which the restart rewrites
    unread) in a partition whose newest snapshot up to that version is older."""
    def version(p: Path) -> int:
        return int(p.name.split(".")[0].split("_")[0])
    loads = (latest_committed_batch(hot) or 0) + 1
    for part in sorted((hot / "state" / "0").glob("[0-9]*")):
        logs = sorted((p for p in part.glob("*.changelog") if version(p) <= loads), key=version)
        zips = [version(z) for z in part.glob("*.zip") if version(z) <= loads]
        if logs and version(logs[-1]) > max(zips, default=0):
            return logs[-1]
    raise AssertionError(f"every partition of {hot} has a snapshot at its newest version")


def supervise(job_file: Path, pod: Path, log: Path) -> subprocess.Popen:
    out = open(log, "ab")  # noqa: SIM115 (the child owns it)
    try:
        return subprocess.Popen([sys.executable, "-m", "sparkpoint.runtime.cli", "run", str(job_file), "--supervise",
                                 "--work-dir", str(pod), "--port", "0"], stdout=out, stderr=subprocess.STDOUT,
                                start_new_session=True, env={**os.environ, "TZ": "UTC"})
    finally:
        out.close()


def drain_supervisor(sup: subprocess.Popen, pod: Path, after: int) -> None:
    try:
        wait_until(lambda: (latest_committed_batch(pod / "hot") or -1) > after, 400, f"a batch after {after}")
        sup.send_signal(signal.SIGTERM)
        assert sup.wait(120) == 0
    finally:
        if sup.poll() is None:
            os.killpg(sup.pid, signal.SIGKILL)


@pytest.mark.timeout(1800)  # about 2 minutes on a quiet machine, 7 under load; its waits are bounded
def test_corrupt_hot_dir_under_supervise_restores_from_the_store(tmp_path):
    """Issue 8 item 11, as a new user would: drain with SIGTERM, garble the newest offsets file and the
    newest state changelog, start with --supervise."""
    job = WindowedJob(name="garbled", rows_per_batch=1000, keys=300, total_batches=30, trigger="300ms",
                      checkpoint_interval="3s")
    spec = job.spec(f"file://{tmp_path / 'store'}")
    spec["spec"]["restart"] = {"backoff": "1s"}
    job_file = tmp_path / "job.yaml"
    job_file.write_text(json.dumps(spec))
    pod = tmp_path / "pod"
    first = RuntimeProcess(job_file, pod, tmp_path / "first.log", until_batch=None).start()
    wait_until(lambda: committed(pod) >= 8, 300, "batch 8", first)
    first.proc.send_signal(signal.SIGTERM)
    assert first.wait(120) == 0
    drained = committed(pod)
    offsets = pod / "hot" / "offsets" / str(max(int(n) for n in os.listdir(pod / "hot" / "offsets") if n.isdigit()))
    # Text that starts like a Spark log entry (what a first-character check accepts) but does not parse.
    offsets.write_bytes(b'v1\n{"batchWatermarkMs":0,"batchTimestampMs":garbled\n{"offset":')
    newest_needed_changelog(pod / "hot").write_bytes(b"\x00garbage" * 30)
    log1 = tmp_path / "supervise-1.log"
    drain_supervisor(supervise(job_file, pod, log1), pod, drained)
    starts = [e for e in log_lines(log1) if e.get("msg") == "query running"]
    assert [s["restore"] for s in starts] == ["remote"], starts  # one start, from the store
    plan = next(e for e in log_lines(log1) if e.get("msg") == "restore plan")
    assert "offsets/" in plan["reason"], plan
    # Now a corruption the start-up check cannot see (inside a compressed block): the start from the
    # hot dir fails before committing a batch, and the next start restores from the store.
    drained = committed(pod)
    garble_payload(newest_needed_changelog(pod / "hot"))
    log2 = tmp_path / "supervise-2.log"
    sup = supervise(job_file, pod, log2)
    try:
        wait_until(lambda: sum(e.get("msg") == "query running" for e in log_lines(log2)) >= 2, 800,
                   "a second start")
    finally:
        if sup.poll() is not None:
            raise AssertionError(log2.read_text()[-3000:])
    wait_until(lambda: committed(pod) >= job.until_batch, 600, "the last batch")
    drain_supervisor(sup, pod, drained)
    entries = log_lines(log2)
    assert [s["restore"] for s in entries if s.get("msg") == "query running"] == ["local", "remote"]
    failed = [e for e in entries if e.get("level") == "warning" and "start from the restore point failed" in
              e.get("msg", "")]
    assert failed and failed[0]["source"] == "local"
    plans = [e for e in entries if e.get("msg") == "restore plan"]
    assert "failed before committing a batch" in plans[1]["reason"]
    store = open_store(f"file://{tmp_path / 'store'}")
    assert canonical(read_committed(store, JobRef("default", job.name))) == job.expected_rows()
