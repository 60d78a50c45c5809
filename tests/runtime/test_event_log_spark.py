"""Event logs of every attempt in the store, with real Spark and a real MinIO (issue 30): a drained
attempt leaves its completed log under history/<attempt>/<start>/, a second attempt keeps the first's,
a SIGKILL leaves its in-progress log, and an in-place restart of that attempt (same pod, same
SPARKPOINT_ATTEMPT) is a start of its own under the same attempt; Spark's own History Server, over
`sparkpoint history sync`'s mirror, lists all three by the operator's attempt; GC then removes the
logs past retention and keeps the current attempt, both its starts."""

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
from sparkpoint.runtime.store.layout import history_entry_of
from tests.conftest import TEST_BUCKET

# About two minutes on two cores (two Spark runs and a History Server): slow, and sampled in CI.
pytestmark = [pytest.mark.spark, pytest.mark.slow, pytest.mark.ci_sample, pytest.mark.timeout(900)]

JOB = JobRef("default", "evjob")


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _history(store_url: str) -> dict[tuple[int, int], list[str]]:
    """(attempt, start) -> file names under history/<attempt>/<start>/eventlog_v2_*/"""
    out: dict[tuple[int, int], list[str]] = {}
    for info in open_store(store_url).list(f"{JOB.root}/history/"):
        entry = history_entry_of(info.key, JOB)
        assert entry is not None and not entry.legacy and entry.app_dir.startswith("eventlog_v2_local-"), info.key
        out.setdefault(entry.run, []).append(entry.name)
    return {a: sorted(n) for a, n in out.items()}


def _in_progress(store_url: str, run: tuple[int, int]) -> bool:
    names = _history(store_url).get(run, [])
    return any(n.endswith(".inprogress") for n in names) and any(n.startswith("events_") for n in names)


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
    first = RuntimeProcess(spec, tmp_path / "pod1", tmp_path / "a1.log", until_batch=job.until_batch,
                           env={**env, "SPARKPOINT_ATTEMPT": "1"})
    assert first.start().wait(300) == 0
    logs = _history(store_url)
    assert list(logs) == [(1, 1)]
    assert any(n.startswith("events_1_local-") and n.endswith(".zstd") for n in logs[(1, 1)])
    assert [n for n in logs[(1, 1)] if n.startswith("appstatus_") and not n.endswith(".inprogress")]

    # Attempt 2 (a new pod) is killed after a checkpoint: its in-progress log is there, attempt 1's kept.
    pod2 = {**env, "SPARKPOINT_ATTEMPT": "2"}
    second = RuntimeProcess(spec, tmp_path / "pod2", tmp_path / "a2.log", until_batch=None, env=pod2).start()
    try:
        wait_until(lambda: committed(tmp_path / "pod2") >= 2 and _in_progress(store_url, (2, 2)),
                   240, "attempt 2's in-progress event log in the store", second)
    finally:
        second.kill()
    # ... and its container restarts in place (same work dir, same attempt): the store's start 3 of
    # attempt 2, whose log goes beside the first start's instead of over it.
    restarted = RuntimeProcess(spec, tmp_path / "pod2", tmp_path / "a2r.log", until_batch=None, env=pod2).start()
    try:
        wait_until(lambda: _in_progress(store_url, (2, 3)), 240, "the restart's in-progress event log", restarted)
    finally:
        restarted.kill()
    logs = _history(store_url)
    assert sorted(logs) == [(1, 1), (2, 2), (2, 3)]

    # Spark's History Server over the mirror lists all three by the operator's attempt, the killed
    # ones as incomplete.
    mirror = tmp_path / "mirror"
    synced = _sparkpoint("history", "sync", "--store", store_url, "--job", str(JOB), "--dest", str(mirror), "--once")
    assert synced["applications"] == 3 and not synced["errors"]
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
            return found if len(found) == 3 else None

        poll(apps, 180, "the History Server listing three applications", interval=1.0)
        listed = {a["name"]: a["attempts"][0]["completed"] for a in apps() or []}
        assert listed == {f"sparkpoint-default-{JOB.name}-attempt-1": True,
                          f"sparkpoint-default-{JOB.name}-attempt-2": False,
                          f"sparkpoint-default-{JOB.name}-attempt-2-restart-1": False}
    finally:
        server.kill()
        server.wait()

    # GC keeps the newest attempt's logs (the current one: the fence says start 3), both of its
    # starts, and removes attempt 1's.
    result = _sparkpoint("gc", "--store", store_url, "--job", str(JOB), "--once", "--retain", "3",
                         "--grace", "0s", "--history-retain", "1", "--json")
    assert result["history"]["kept_attempts"] == [2] and result["history"]["deleted_attempts"] == [1]
    assert _history(store_url) == {(2, 2): logs[(2, 2)], (2, 3): logs[(2, 3)]}
