"""`kubectl sparkpoint ui JOB` (issue 30): which pod, the kubectl port-forward it runs (a stand-in
kubectl on PATH records its argv), and the errors that name why there is no UI."""

from __future__ import annotations

import json
import os
import stat

import pytest

from sparkpoint.plugin import cli, ui


def _job(name="clicks", pod="clicks-3", ui_spec=None):
    spark = {"ui": ui_spec} if ui_spec is not None else {}
    return {"metadata": {"name": name, "namespace": "team"}, "spec": {"spark": spark},
            "status": {"phase": "Running", **({"pod": pod} if pod else {})}}


class _Kube:
    namespace = "team"

    def __init__(self, job):
        self._job = job

    def job(self, name):
        return self._job


@pytest.fixture
def kubectl(tmp_path, monkeypatch):
    """A kubectl that writes its arguments to a file and exits 0, first on PATH."""
    record = tmp_path / "argv.json"
    script = tmp_path / "kubectl"
    script.write_text(f"#!/bin/sh\nexec python3 -c 'import json, sys; json.dump(sys.argv[1:], open(\"{record}\", \"w\"))' \"$@\"\n")
    script.chmod(script.stat().st_mode | stat.S_IXUSR)
    monkeypatch.setenv("PATH", f"{tmp_path}{os.pathsep}{os.environ['PATH']}")
    return record


def test_ui_forwards_to_the_current_pod_and_prints_the_address(kubectl, capsys):
    args = cli.parser().parse_args(["ui", "clicks", "--port", "8123", "--context", "kind-sp"])
    assert cli.run(args, _Kube(_job())) == 0
    assert json.loads(kubectl.read_text()) == ["port-forward", "--namespace", "team", "--address", "127.0.0.1",
                                               "--context", "kind-sp", "pod/clicks-3", "8123:4040"]
    out = capsys.readouterr().out
    assert "http://127.0.0.1:8123/" in out and "clicks-3" in out


def test_ui_default_port_is_sparks(kubectl):
    args = cli.parser().parse_args(["ui", "clicks"])
    assert cli.run(args, _Kube(_job())) == 0
    assert json.loads(kubectl.read_text())[-1] == "4040:4040"


@pytest.mark.parametrize(("job", "message"), [
    (_job(ui_spec={"enabled": False}), "spec.spark.ui.enabled: false"),
    (_job(pod=None), "has no current pod"),
])
def test_ui_says_why_there_is_none(kubectl, capsys, job, message):
    assert cli.run(cli.parser().parse_args(["ui", "clicks"]), _Kube(job)) == 1
    assert message in capsys.readouterr().err
    assert not kubectl.exists()  # kubectl never ran


def test_bad_port_fails_before_any_api_call(capsys):
    assert cli.main(["ui", "clicks", "--port", "70000"]) == 2
    assert "--port 70000" in capsys.readouterr().err


def test_pod_from_status():
    assert ui.ui_pod(_job()) == "clicks-3"
