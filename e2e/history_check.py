"""Spark's History Server over a job's event logs, as the chart runs it (issue 30): `sparkpoint history
sync` mirrors the job's history/ prefix from the cluster's MinIO and Spark's HistoryServer (pyspark's
jars) reads the mirror; both run on the host here, the chart's pod runs the same two commands."""

from __future__ import annotations

import json
import socket
import subprocess
import sys
import urllib.request
from pathlib import Path

from kube_helpers import wait_for

from sparkpoint.runtime.spark.executor_entry import pyspark_jars_dir
from sparkpoint.runtime.spark.history_server import history_server_command
from sparkpoint.runtime.store import JobRef, open_store
from sparkpoint.runtime.store.layout import history_entry_of


def attempts_with_logs(store_url: str, env: dict[str, str], job: JobRef) -> dict[int, list[str]]:
    """The operator's attempt -> the names of its event log files (history/<attempt>/<start>/...)."""
    out: dict[int, list[str]] = {}
    for info in open_store(store_url, env=env).list(f"{job.root}/history/"):
        entry = history_entry_of(info.key, job)
        assert entry is not None and not entry.legacy, info.key
        out.setdefault(entry.attempt, []).append(entry.name)
    return out


def history_applications(store_url: str, env: dict[str, str], job: JobRef, work: Path,
                         expected: int) -> dict[str, bool]:
    """Mirror the job's logs, start the History Server, return {application name: completed} once it
    lists `expected` applications."""
    mirror = work / "history-mirror"
    subprocess.run([sys.executable, "-m", "sparkpoint.runtime.cli", "history", "sync", "--store", store_url,
                    "--job", str(job), "--dest", str(mirror), "--once"], env={**_environ(), **env},
                   check=True, timeout=120, capture_output=True)
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = int(s.getsockname()[1])
    with open(work / "history-server.log", "wb") as log:
        server = subprocess.Popen(history_server_command(str(mirror), port, pyspark_jars_dir(), update_interval="1s"),
                                  stdout=log, stderr=subprocess.STDOUT)
    try:
        def listed() -> dict[str, bool] | None:
            try:
                with urllib.request.urlopen(f"http://127.0.0.1:{port}/api/v1/applications", timeout=10) as r:
                    apps = json.loads(r.read())
            except (OSError, ValueError):  # ValueError: a page, not the API's JSON, while the server starts
                return None
            return {a["name"]: a["attempts"][0]["completed"] for a in apps} if len(apps) >= expected else None

        return wait_for(f"the History Server listing {expected} applications", listed, timeout=180, interval=1.0)
    finally:
        server.kill()
        server.wait()


def _environ() -> dict[str, str]:
    import os

    return dict(os.environ)
