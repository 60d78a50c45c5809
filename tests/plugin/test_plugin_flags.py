"""The plugin's kubectl-like surface: --kubeconfig, NAMESPACE/NAME, durations, -o on reads only and
-o name, the events command, help on every flag."""

from __future__ import annotations

import argparse
from datetime import UTC, datetime

import pytest

from sparkpoint.plugin import cli
from sparkpoint.plugin import events as ev

NOW = datetime(2026, 11, 22, 12, 0, 0, tzinfo=UTC)


def _parse(*argv: str) -> argparse.Namespace:
    args = cli.parser().parse_args(list(argv))
    cli.resolve_job(args)
    cli.check_output(args)
    return args


def _all_parsers(parser: argparse.ArgumentParser):
    yield parser
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            for sub in action.choices.values():
                yield from _all_parsers(sub)


def test_every_flag_and_argument_has_help():
    missing = [f"{p.prog}: {a.option_strings or a.dest}" for p in _all_parsers(cli.parser()) for a in p._actions
               if not isinstance(a, argparse._SubParsersAction) and not a.help]
    assert missing == []


def test_kubeconfig_and_context_before_or_after_the_command():
    for argv in (["--kubeconfig", "/k", "--context", "c", "status", "j"], ["status", "j", "--kubeconfig", "/k", "--context", "c"]):
        args = _parse(*argv)
        assert (args.kubeconfig, args.context, args.job) == ("/k", "c", "j")


def test_job_as_namespace_slash_name():
    args = _parse("status", "team/clicks")
    assert (args.namespace, args.job) == ("team", "clicks")
    assert _parse("-n", "team", "status", "team/clicks").job == "clicks"
    with pytest.raises(ValueError, match="names namespace team, but -n/--namespace says other"):
        _parse("-n", "other", "status", "team/clicks")
    with pytest.raises(ValueError, match="NAME or NAMESPACE/NAME"):
        _parse("status", "a/b/c")


@pytest.mark.parametrize(("text", "seconds"), [("240", 240.0), ("90s", 90.0), ("5m", 300.0), ("1h", 3600.0)])
def test_durations_like_kubectl(text, seconds):
    assert _parse("savepoint", "j", "--timeout", text).timeout == seconds
    assert _parse("logs", "j", "--since", text).since == seconds


def test_a_bad_duration_names_the_flag(capsys):
    with pytest.raises(SystemExit):
        cli.parser().parse_args(["events", "--since", "five"])
    assert "--since" in capsys.readouterr().err


@pytest.mark.parametrize("command", [["suspend", "j"], ["resume", "j"], ["restore", "j", "--from", "chk-000001"],
                                     ["rescale", "j", "--partitions", "2"], ["logs", "j"], ["ui", "j"]])
def test_output_only_on_commands_that_read(command, capsys):
    with pytest.raises(SystemExit):  # after the command: not one of its flags
        cli.parser().parse_args([*command, "-o", "json"])
    assert cli.main(["-o", "json", *command]) == 2  # before it: refused before any API call
    assert "prints no object" in capsys.readouterr().err


@pytest.mark.parametrize("command", [["list"], ["status", "j"], ["checkpoints", "j"], ["executors", "j"],
                                     ["events"], ["history", "j", "--list"], ["savepoint", "j"]])
def test_read_commands_take_output_name(command):
    assert _parse(*command, "-o", "name").output == "name"


def test_output_name_lists_kind_slash_name():
    items = {"items": [{"metadata": {"name": "a"}}, {"metadata": {"name": "b"}}]}
    assert cli.names(items, "streamingjob.sparkpoint.dev") == "streamingjob.sparkpoint.dev/a\nstreamingjob.sparkpoint.dev/b"
    assert cli.names({"metadata": {"name": "x"}}, "pod") == "pod/x"


def _event(name, kind="Pod", reason="Started", at="2026-11-22T11:59:00Z", ns="team", message="ok"):
    return {"metadata": {"name": f"{name}.1", "namespace": ns}, "involvedObject": {"kind": kind, "name": name},
            "type": "Normal", "reason": reason, "message": message, "lastTimestamp": at}


def test_events_of_a_job_and_what_it_owns_oldest_first():
    events = [_event("clicks-2", at="2026-11-22T11:59:00Z"), _event("clicks", kind="StreamingJob", reason="Checkpointed",
                                                                     at="2026-11-22T11:58:00Z"),
              _event("clicksy-1"), _event("views", kind="StreamingJob")]
    chosen = ev.job_events(events, "clicks", NOW)
    assert [e["involvedObject"]["name"] for e in chosen] == ["clicks", "clicks-2"]
    every = ev.job_events(events, None, NOW)
    assert [e["involvedObject"]["name"] for e in every] == ["clicks", "views"]  # Sparkpoint resources only
    recent = ev.job_events(events, "clicks", NOW, since=90)
    assert [e["involvedObject"]["name"] for e in recent] == ["clicks-2"]


def test_event_rows_like_kubectl_events():
    headers, rows = ev.event_rows([_event("clicks", kind="StreamingJob", reason="OOMKilled", message="limit\n 1Gi")], NOW,
                                  namespaces=True)
    assert headers == ["NAMESPACE", "LAST SEEN", "TYPE", "REASON", "OBJECT", "MESSAGE"]
    assert rows == [["team", "60s", "Normal", "OOMKilled", "streamingjob/clicks", "limit 1Gi"]]


class _EventKube:
    namespace = "team"

    def __init__(self, events):
        self._events, self.all_namespaces = events, None

    def events(self, all_namespaces):
        self.all_namespaces = all_namespaces
        return self._events


def test_events_command_prints_the_table_or_names(capsys):
    kube = _EventKube([_event("clicks", kind="StreamingJob", at=datetime.now(UTC).isoformat())])
    assert cli.run(_parse("events", "clicks"), kube) == 0
    assert "streamingjob/clicks" in capsys.readouterr().out and kube.all_namespaces is False
    assert cli.run(_parse("events", "-A", "-o", "name"), kube) == 0
    assert capsys.readouterr().out.strip() == "event/clicks.1" and kube.all_namespaces is True
    assert cli.run(_parse("events", "nothing"), kube) == 0
    assert "no events of streamingjob nothing in namespace team" in capsys.readouterr().err
