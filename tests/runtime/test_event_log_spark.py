"""Event logs of every attempt in the store, with real Spark and a real MinIO (issue 30): a drained
attempt leaves its completed log under history/<attempt>/, a second attempt keeps the first's and a
SIGKILL leaves its in-progress log; Spark's own History Server, over `sparkpoint history sync`'s
mirror, lists both attempts; GC then removes the logs past retention and keeps the current one."""

from __future__ import annotations

import json
import socket
import subprocess
import sys
import urllib.request
import uuid
from pathlib import Path

import pytest

from harness.polling import wait_until as poll
from harness.runtime_job import RuntimeProcess, WindowedJob, committed, wait_until
from sparkpoint.runtime.service.event_log import UPLOAD_INTERVAL_ENV
from sparkpoint.runtime.spark.executor_entry import pyspark_jars_dir
from sparkpoint.runtime.spark.history_server import history_server_command
from sparkpoint.runtime.store import JobRef, open_store
from tests.conftest import TEST_BUCKET

# About two minutes on two cores (two Spark runs and a History Server): slow, and sampled in CI.
pytestmark = [pytest.mark.spark, pytest.mark.slow, pytest.mark.ci_sample, pytest.mark.timeout(900)]

JOB = JobRef("default", "evjob")


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _history(store_url: str) -> dict[int, list[str]]:
    """attempt -> file names under history/<attempt>/eventlog_v2_*/"""
    out: dict[int, list[str]] = {}
    for info in open_store(store_url).list(f"{JOB.root}/history/"):
        attempt, app_dir, name = info.key.split("/")[3:6]
        assert app_dir.startswith("eventlog_v2_local-")
        out.setdefault(int(attempt), []).append(name)
    return {a: sorted(n) for a, n in out.items()}


def _sparkpoint(*args: str) -> dict:
    done = subprocess.run([sys.executable, "-m", "sparkpoint.runtime.cli", *args], capture_output=True,
                          text=True, timeout=120, check=True)
    return json.loads(done.stdout.strip().splitlines()[-1])


def test_event_logs_per_attempt_history_server_and_gc(tmp_path: Path, minio_env) -> None:
    store_url = f"s3://{TEST_BUCKET}/t-{uuid.uuid4().hex[:12]}"  # the directory store: test_event_log.py
    job = WindowedJob(name=JOB.name, rows_per_batch=200, keys=50, total_batches=6, trigger="1s",
                      checkpoint_interval="3s")
    spec = job.write(tmp_path / "job.yaml", store_url)
    env = {UPLOAD_INTERVAL_ENV: "0"}  # the open file at every checkpoint

    # Attempt 1 drains: its log is complete (the appstatus marker without .inprogress; the runtime
    # never deletes, so the .inprogress one uploaded at a checkpoint stays until GC removes it).
    first = RuntimeProcess(spec, tmp_path / "pod1", tmp_path / "a1.log", until_batch=job.until_batch, env=env)
    assert first.start().wait(300) == 0
    logs = _history(store_url)
    assert list(logs) == [1]
    assert any(n.startswith("events_1_local-") and n.endswith(".zstd") for n in logs[1])
    assert [n for n in logs[1] if n.startswith("appstatus_") and not n.endswith(".inprogress")]

    # Attempt 2 (a new pod) is killed after a checkpoint: its in-progress log is there, attempt 1's kept.
    second = RuntimeProcess(spec, tmp_path / "pod2", tmp_path / "a2.log", until_batch=None, env=env).start()
    try:
        wait_until(lambda: committed(tmp_path / "pod2") >= 2 and 2 in _history(store_url)
                   and any(n.endswith(".inprogress") for n in _history(store_url)[2])
                   and any(n.startswith("events_") for n in _history(store_url)[2]),
                   240, "attempt 2's in-progress event log in the store", second)
    finally:
        second.kill()
    logs = _history(store_url)
    assert sorted(logs) == [1, 2] and logs[1] == _history(store_url)[1]

    # Spark's History Server over the mirror lists both attempts, the killed one as incomplete.
    mirror = tmp_path / "mirror"
    synced = _sparkpoint("history", "sync", "--store", store_url, "--job", str(JOB), "--dest", str(mirror), "--once")
    assert synced["applications"] == 2 and not synced["errors"]
    port = _free_port()
    server = subprocess.Popen(history_server_command(str(mirror), port, pyspark_jars_dir(), update_interval="1s"),
                              stdout=open(tmp_path / "hs.log", "wb"), stderr=subprocess.STDOUT)  # noqa: SIM115
    try:
        def apps() -> list[dict] | None:
            try:
                with urllib.request.urlopen(f"http://127.0.0.1:{port}/api/v1/applications", timeout=10) as r:
                    found = json.loads(r.read())
            except OSError:
                return None
            return found if len(found) == 2 else None

        poll(apps, 180, "the History Server listing two applications", interval=1.0)
        listed = {a["name"]: a["attempts"][0]["completed"] for a in apps() or []}
        assert listed == {f"sparkpoint-default-{JOB.name}-attempt-1": True,
                          f"sparkpoint-default-{JOB.name}-attempt-2": False}
    finally:
        server.kill()
        server.wait()

    # GC keeps the newest attempt's log (the current one: the fence says 2) and removes attempt 1's.
    result = _sparkpoint("gc", "--store", store_url, "--job", str(JOB), "--once", "--retain", "3",
                         "--grace", "0s", "--history-retain", "1", "--json")
    assert result["history"]["kept_attempts"] == [2] and result["history"]["deleted_attempts"] == [1]
    assert _history(store_url) == {2: logs[2]}  # all of attempt 2's, in progress as it was killed
