"""An attempt whose store is down when it starts waits for it (runtime/service/store_wait.py).

The unit tests drive the wait with a stand-in store (the function under test only calls check());
the last one starts `sparkpoint run` with its MinIO down, checks that the control API answers
healthy-but-not-ready meanwhile, brings MinIO back on the same port and expects the job to finish
with exactly the failure-free output."""

from __future__ import annotations

import json
import threading
import time
import urllib.error
import urllib.request
import uuid

import pytest

from harness.runtime_job import RuntimeProcess, WindowedJob, canonical, wait_until
from sparkpoint.runtime.service import store_wait
from sparkpoint.runtime.sink.transactional import read_committed
from sparkpoint.runtime.store import JobRef, StoreAuthError, StoreUnreachableError, open_store


class Store:
    def __init__(self, failures: list[Exception]):
        self.failures, self.checks = list(failures), 0

    def check(self, *, writes: bool = False) -> None:
        assert writes
        self.checks += 1
        if self.failures:
            raise self.failures.pop(0)


def test_waits_through_an_unreachable_store_with_growing_delays(monkeypatch):
    delays = []
    stop = threading.Event()
    monkeypatch.setattr(stop, "wait", lambda d: delays.append(d) or False)
    store = Store([StoreUnreachableError("down")] * 7)
    assert store_wait.wait_for_store(store, stop)
    assert store.checks == 8
    assert delays == [1.0, 2.0, 4.0, 8.0, 16.0, 30.0, 30.0]


def test_a_configuration_error_is_not_waited_for():
    with pytest.raises(StoreAuthError):
        store_wait.wait_for_store(Store([StoreAuthError("credentials rejected")]), threading.Event())


def test_a_stop_ends_the_wait_and_a_limit_raises(monkeypatch):
    stop = threading.Event()
    stop.set()
    assert not store_wait.wait_for_store(Store([StoreUnreachableError("down")]), stop)
    now = [0.0]

    def clock() -> float:
        now[0] += 10
        return now[0]
    delays: list[float] = []
    running = threading.Event()  # never stopped; its waits pass at once (the limit is on `clock`)
    monkeypatch.setattr(running, "wait", lambda d: delays.append(d) or False)
    with pytest.raises(StoreUnreachableError):
        store_wait.wait_for_store(Store([StoreUnreachableError("down")] * 99), running, max_wait=25, clock=clock)
    assert delays == [1.0, 2.0]  # two waits, then 30 s of fake time are past the 25 s limit


def _get(port: int, path: str) -> int:
    try:
        with urllib.request.urlopen(f"http://127.0.0.1:{port}{path}", timeout=5) as resp:
            return resp.status
    except urllib.error.HTTPError as exc:
        return exc.code
    except OSError:  # not listening (yet)
        return 0


@pytest.mark.spark
@pytest.mark.minio
@pytest.mark.slow
@pytest.mark.ci_sample
@pytest.mark.timeout(900)
def test_a_job_started_while_its_store_is_down_waits_then_runs_correctly(tmp_path):
    from harness.minio_server import free_port
    from tests.runtime.test_store_outage import BUCKET, RestartableMinio

    minio = RestartableMinio(data_dir=str(tmp_path / "minio-data"))
    minio.start()
    proc = None
    try:
        minio.make_bucket(BUCKET)
        minio.proc.kill()
        minio.proc.wait()
        job = WindowedJob(name="late-store", rows_per_batch=100, keys=50, total_batches=12, trigger="1s",
                          checkpoint_interval="3s")
        store_url = f"s3://{BUCKET}/w-{uuid.uuid4().hex[:8]}"
        port = free_port()
        proc = RuntimeProcess(job.write(tmp_path / "job.yaml", store_url), tmp_path / "pod", tmp_path / "run.log",
                              until_batch=job.until_batch, env=minio.env(), port=port).start()
        wait_until(lambda: _get(port, "/healthz") == 200, 120, "the control API while the store is down", proc)
        time.sleep(15)  # longer than the store client's own retries: the runtime must still be there
        assert proc.alive(), f"the runtime exited while its store was down; see {proc.log_path}"
        assert _get(port, "/healthz") == 200 and _get(port, "/readyz") == 503
        with urllib.request.urlopen(f"http://127.0.0.1:{port}/status", timeout=5) as resp:
            assert json.loads(resp.read())["phase"] == "waiting_for_store"
        minio.restart_same_port()
        code = proc.wait(600)
        assert code == 0, f"runtime exit code {code}; see {proc.log_path}"
        rows = canonical(read_committed(open_store(store_url, env=minio.env()), JobRef("default", "late-store")))
        expected = job.expected_rows()
        assert (sum((expected - rows).values()), sum((rows - expected).values())) == (0, 0)
        assert "checkpoint store unreachable at start" in proc.log_path.read_text()
    finally:
        if proc is not None:
            proc.kill()
        minio.stop()
