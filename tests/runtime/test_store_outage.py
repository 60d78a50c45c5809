"""A store outage only delays checkpoints (issue 8, item 10).

`sparkpoint run` as a subprocess against its own throwaway MinIO, checkpointing every 5 s. The store
is (a) frozen with SIGSTOP (connections hang) or (b) killed and restarted on the same port and data
dir, for 2 minutes each. Batches must keep completing during the outage (seen on the control API,
which never touches the store), the runtime must not exit, a checkpoint must complete soon after the
store returns, and the committed output must equal the failure-free result (0 missing, 0 duplicate).
Each takes 5-8 minutes (measured on a shared 2-core machine under load: 318 s frozen, 456 s dead).
"""

from __future__ import annotations

import json
import signal
import time
import urllib.request
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest

from harness.minio_server import MinioServer, free_port
from harness.runtime_job import RuntimeProcess, WindowedJob, canonical, wait_until
from sparkpoint.runtime.sink.transactional import read_committed
from sparkpoint.runtime.store import JobRef, open_store

pytestmark = [pytest.mark.spark, pytest.mark.minio, pytest.mark.slow, pytest.mark.timeout(1500)]

OUTAGE_SECONDS = 120
BUCKET = "outage"


class RestartableMinio(MinioServer):
    """The fixtures' launcher, plus a restart on the same port and data dir (a store that comes back)."""

    def restart_same_port(self) -> None:
        self._launch(console_port=free_port())
        assert self._wait_ready(), "MinIO did not come back on its port"


@pytest.fixture
def minio(tmp_path) -> Iterator[RestartableMinio]:
    server = RestartableMinio(data_dir=str(tmp_path / "minio-data"))
    server.start()
    try:
        server.make_bucket(BUCKET)
        yield server
    finally:
        if server.proc is not None and server.proc.poll() is None:
            server.proc.send_signal(signal.SIGCONT)  # never leave a stopped server behind
        server.stop()


def _status(port: int) -> dict:
    with urllib.request.urlopen(f"http://127.0.0.1:{port}/status", timeout=30) as resp:
        return json.loads(resp.read())


def _run_outage(minio: RestartableMinio, tmp_path: Path, kind: str) -> dict:
    # Enough input that real output is still produced after the outage (about one batch a second).
    job = WindowedJob(name="outage", rows_per_batch=200, keys=200, total_batches=180, trigger="1s",
                      checkpoint_interval="5s")
    store_url = f"s3://{BUCKET}/o-{uuid.uuid4().hex[:8]}"
    proc = RuntimeProcess(job.write(tmp_path / "job.yaml", store_url), tmp_path / "pod", tmp_path / "run.log",
                          until_batch=job.until_batch, env=minio.env()).start()
    t0 = time.monotonic()
    try:
        wait_until(lambda: (tmp_path / "pod" / "api.json").exists(), 180, "control API", proc)
        port = json.loads((tmp_path / "pod" / "api.json").read_text())["port"]
        wait_until(lambda: _status(port)["latestCheckpoint"] is not None, 240, "a first checkpoint", proc)

        before = _status(port)["latestCommittedBatch"]
        if kind == "freeze":
            minio.proc.send_signal(signal.SIGSTOP)
        else:
            minio.proc.kill()
            minio.proc.wait()
        outage_end = time.monotonic() + OUTAGE_SECONDS
        while time.monotonic() < outage_end:
            assert proc.alive(), f"runtime exited during the outage; see {proc.log_path}"
            time.sleep(5)
        during = _status(port)
        if kind == "freeze":
            minio.proc.send_signal(signal.SIGCONT)
        else:
            minio.restart_same_port()
        back = time.monotonic()
        assert during["latestCommittedBatch"] >= before + 20, (
            f"batches stalled during the outage: {before} -> {during['latestCommittedBatch']}")

        def caught_up() -> bool:
            latest = _status(port)["latestCheckpoint"]
            return latest is not None and latest["batchId"] >= during["latestCommittedBatch"]
        wait_until(caught_up, 240, "a checkpoint after the store returned", proc)
        recovery_seconds = time.monotonic() - back
        code = proc.wait(900)
        assert code == 0, f"runtime exit code {code}; see {proc.log_path}"
    finally:
        proc.kill()
    rows = canonical(read_committed(open_store(store_url, env=minio.env()), JobRef("default", "outage")))
    expected = job.expected_rows()
    missing, extra = sum((expected - rows).values()), sum((rows - expected).values())
    assert (missing, extra) == (0, 0), f"{missing} missing, {extra} duplicate or extra rows"
    return {"batches_during_outage": during["latestCommittedBatch"] - before,
            "checkpoint_after_return_s": round(recovery_seconds, 1), "total_s": round(time.monotonic() - t0)}


def test_frozen_store_only_delays_checkpoints(minio, tmp_path):
    print(_run_outage(minio, tmp_path, "freeze"))


def test_dead_store_only_delays_checkpoints(minio, tmp_path):
    print(_run_outage(minio, tmp_path, "kill"))
