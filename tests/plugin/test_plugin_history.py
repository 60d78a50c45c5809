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
    args = cli._parser().parse_args(["history", "clicks", "--port", "8124", "--server-namespace", "ops"])
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
    assert cli.run(cli._parser().parse_args(["history", "clicks"]), _Kube(services)) == 1
    assert message in capsys.readouterr().err
    assert not kubectl.exists()


def test_history_notes_a_job_that_no_longer_logs(kubectl, capsys):  # noqa: F811
    assert cli.run(cli._parser().parse_args(["history", "clicks"]), _Kube([_svc()], {"enabled": False})) == 0
    assert "spec.spark.eventLog.enabled: false" in capsys.readouterr().err
    assert json.loads(kubectl.read_text())[-1] == "18080:18080"


def test_bad_port_fails_before_any_api_call(capsys):
    assert cli.main(["history", "clicks", "--port", "-1"]) == 2
    assert "--port -1" in capsys.readouterr().err
    assert history.history_service([_svc()], "x") == ("sp-sparkpoint-history", 18080)
