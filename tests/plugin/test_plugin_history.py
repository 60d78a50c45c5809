"""`kubectl sparkpoint history JOB` (issue 30): finds the chart's History Server Service by its labels,
port-forwards to it (a stand-in kubectl on PATH records its argv), names the job's applications, and
says why it cannot."""

from __future__ import annotations

import json

import pytest
from test_plugin_ui import kubectl  # noqa: F401 - the fixture

from sparkpoint.plugin import cli, history


def _svc(name="sp-sparkpoint-history", port=18080):
    return {"metadata": {"name": name}, "spec": {"ports": [{"name": "http", "port": port}]}}


class _Kube:
    namespace = "team"

    def __init__(self, services, event_log=None):
        self._services, self.asked = services, []
        spark = {"eventLog": event_log} if event_log is not None else {}
        self._job = {"metadata": {"name": "clicks", "namespace": "team"}, "spec": {"spark": spark}}

    def job(self, name):
        return self._job

    def services(self, namespace, selector):
        self.asked.append((namespace, selector))
        return self._services


def test_history_forwards_to_the_charts_service_and_names_the_jobs_attempts(kubectl, capsys):  # noqa: F811
    kube = _Kube([_svc(port=18081)])
    args = cli.parser().parse_args(["history", "clicks", "--port", "8124", "--server-namespace", "ops"])
    assert cli.run(args, kube) == 0
    assert kube.asked == [("ops", "app.kubernetes.io/name=sparkpoint,app.kubernetes.io/component=history-server")]
    assert json.loads(kubectl.read_text()) == ["port-forward", "--namespace", "ops", "--address", "127.0.0.1",
                                               "svc/sp-sparkpoint-history", "8124:18081"]
    out = capsys.readouterr().out
    assert "http://127.0.0.1:8124/" in out and "sparkpoint-team-clicks-attempt-<n>" in out


@pytest.mark.parametrize(("services", "message"), [
    ([], "historyServer.enabled=true"),
    ([_svc("a-history"), _svc("b-history")], "a-history, b-history"),
])
def test_history_says_why_there_is_no_server(kubectl, capsys, services, message):  # noqa: F811
    assert cli.run(cli.parser().parse_args(["history", "clicks"]), _Kube(services)) == 1
    assert message in capsys.readouterr().err
    assert not kubectl.exists()


def test_history_notes_a_job_that_no_longer_logs(kubectl, capsys):  # noqa: F811
    assert cli.run(cli.parser().parse_args(["history", "clicks"]), _Kube([_svc()], {"enabled": False})) == 0
    assert "spec.spark.eventLog.enabled: false" in capsys.readouterr().err
    assert json.loads(kubectl.read_text())[-1] == "18080:18080"


def test_bad_port_fails_before_any_api_call(capsys):
    assert cli.main(["history", "clicks", "--port", "-1"]) == 2
    assert "--port -1" in capsys.readouterr().err
    assert history.history_service([_svc()], "x") == ("sp-sparkpoint-history", 18080)


APPS = [  # the shape of the History Server's /api/v1/applications
    {"id": "local-3", "name": "sparkpoint-team-clicks-attempt-2-restart-1",
     "attempts": [{"completed": False, "startTime": "2026-11-26T11:03:00.000GMT", "duration": 61000}]},
    {"id": "local-1", "name": "sparkpoint-team-clicks-attempt-1",
     "attempts": [{"completed": True, "startTime": "2026-11-26T11:00:00.000GMT", "duration": 120500}]},
    {"id": "local-9", "name": "sparkpoint-team-clicks-2-attempt-1", "attempts": [{"completed": True}]},
    {"id": "local-2", "name": "sparkpoint-team-clicks-attempt-2",
     "attempts": [{"completed": False, "startTime": "2026-11-26T11:02:00.000GMT", "duration": 30000}]},
]


def test_job_applications_are_the_jobs_by_attempt_and_restart() -> None:
    job = {"metadata": {"name": "clicks", "namespace": "team"}}
    apps = history.job_applications(APPS, job)
    assert [(a["attempt"], a["restart"], a["id"], a["completed"]) for a in apps] == \
        [(1, 0, "local-1", True), (2, 0, "local-2", False), (2, 1, "local-3", False)]  # not clicks-2's
    headers, rows = history.application_rows(apps)
    assert headers[:5] == ["ATTEMPT", "RESTART", "COMPLETED", "STARTED", "DURATION"]
    assert rows[0][:5] == [1, 0, "true", "2026-11-26T11:00:00.000GMT", "120s"]


def test_history_list_asks_the_service_proxy_and_forwards_nothing(kubectl, capsys):  # noqa: F811
    kube = _Kube([_svc()])
    kube.service_get = lambda ns, svc, port, path: (kube.asked.append((ns, svc["metadata"]["name"], port, path)) or  # type: ignore[attr-defined]
                                                   json.dumps(APPS).encode())
    args = cli.parser().parse_args(["history", "clicks", "--list", "--server-namespace", "ops", "-o", "json"])
    assert cli.run(args, kube) == 0
    assert kube.asked[-1] == ("ops", "sp-sparkpoint-history", 18080, "api/v1/applications")
    listed = json.loads(capsys.readouterr().out)["applications"]
    assert [a["name"] for a in listed] == ["sparkpoint-team-clicks-attempt-1", "sparkpoint-team-clicks-attempt-2",
                                           "sparkpoint-team-clicks-attempt-2-restart-1"]
    assert not kubectl.exists()
