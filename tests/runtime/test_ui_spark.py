"""Spark's live UI of a real running job (issue 30): with the port the operator sets, the runtime's
session serves the UI; its REST API lists the job's application and its batches, the Structured
Streaming tab shows the query, and the UI is read-only (no kill links)."""

from __future__ import annotations

import json
import socket
import urllib.request

import pytest

from harness.runtime_job import RuntimeProcess, WindowedJob, committed, wait_until
from sparkpoint.runtime.spec.rules import SPARK_UI_PORT_ENV

pytestmark = [pytest.mark.spark, pytest.mark.timeout(600)]


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _get(port: int, path: str) -> str:
    with urllib.request.urlopen(f"http://127.0.0.1:{port}{path}", timeout=30) as resp:
        return resp.read().decode(errors="replace")


def test_the_live_ui_answers_with_the_jobs_application(tmp_path):
    job = WindowedJob(name="uijob", rows_per_batch=200, keys=50, total_batches=200, trigger="1s",
                      checkpoint_interval="5s")
    ui_port = _free_port()
    proc = RuntimeProcess(job.write(tmp_path / "ui.yaml", f"file://{tmp_path / 'store'}"), tmp_path / "pod",
                          tmp_path / "ui.log", until_batch=None, env={SPARK_UI_PORT_ENV: str(ui_port)}).start()
    try:
        wait_until(lambda: committed(tmp_path / "pod") >= 3, 300, "three committed batches", proc)
        apps = json.loads(_get(ui_port, "/api/v1/applications"))
        assert [a["name"] for a in apps] == ["sparkpoint-default-uijob-attempt-1"]
        app = apps[0]["id"]
        assert json.loads(_get(ui_port, f"/api/v1/applications/{app}/jobs"))  # the batches ran as Spark jobs
        env = json.loads(_get(ui_port, f"/api/v1/applications/{app}/environment"))
        conf = dict(env["sparkProperties"])
        assert conf["spark.ui.port"] == str(ui_port) and conf["spark.ui.killEnabled"] == "false"
        page = _get(ui_port, "/StreamingQuery/")  # the Structured Streaming tab lists the running query
        assert "Active Streaming Queries" in page and "RUNNING" in page
    finally:
        proc.kill()


def test_behind_an_ingress_path_the_ui_answers_under_it_and_links_there(tmp_path):
    """SPARKPOINT_SPARK_UI_PROXY_BASE (the operator's --ui-path-prefix): the runtime's front takes the
    UI port and strips the path an Ingress forwards unchanged; Spark writes its links with the path."""
    from sparkpoint.runtime.spec.rules import SPARK_UI_PROXY_BASE_ENV

    base = "/sparkpoint/default/uiproxy"
    job = WindowedJob(name="uiproxy", rows_per_batch=200, keys=50, total_batches=200, trigger="1s",
                      checkpoint_interval="5s")
    ui_port = _free_port()
    proc = RuntimeProcess(job.write(tmp_path / "ui.yaml", f"file://{tmp_path / 'store'}"), tmp_path / "pod",
                          tmp_path / "ui.log", until_batch=None,
                          env={SPARK_UI_PORT_ENV: str(ui_port), SPARK_UI_PROXY_BASE_ENV: base}).start()
    try:
        wait_until(lambda: committed(tmp_path / "pod") >= 3, 300, "three committed batches", proc)
        apps = json.loads(_get(ui_port, f"{base}/api/v1/applications"))
        assert [a["name"] for a in apps] == ["sparkpoint-default-uiproxy-attempt-1"]
        page = _get(ui_port, f"{base}/StreamingQuery/")  # the tab, its links under the path
        assert "Active Streaming Queries" in page and f'href="{base}/StreamingQuery/statistics/?id=' in page
        assert f'src="{base}/static/' in page
        assert "Active Streaming Queries" in _get(ui_port, "/StreamingQuery/")  # the root still answers
        assert _get(ui_port, f"{base}/").count(f"{base}/jobs/") >= 1  # Spark's / redirect lands under the path
    finally:
        proc.kill()
