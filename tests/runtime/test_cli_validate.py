"""`sparkpoint validate`: every bad field on its own line with admission's message, YAML errors naming
the file and line, a wrong apiVersion or kind refused; and the CLIs' --version and top-level help."""

from __future__ import annotations

import subprocess
import sys
from importlib import metadata
from pathlib import Path

import pytest

from sparkpoint.operator.__main__ import parse_args as operator_args
from sparkpoint.plugin import cli as plugin_cli
from sparkpoint.runtime.cli import INTERNAL_COMMANDS, build_parser, main
from sparkpoint.runtime.spec import SpecError, parse_spec

REPO = Path(__file__).resolve().parents[2]

BAD_MANIFEST = """\
apiVersion: sparkpoint.dev/v1alpha1
kind: StreamingJob
metadata: {name: Bad_Name}
spec:
  job: {entrypoint: nocolon}
  checkpoint: {retain: 0, interval: 1ms}
"""


def _validate(tmp_path: Path, capsys, text: str, name: str = "job.yaml") -> tuple[int, list[str]]:
    path = tmp_path / name
    path.write_text(text)
    code = main(["validate", str(path)])
    return code, [line.removeprefix(f"{path}: ") for line in capsys.readouterr().out.splitlines()]


def test_every_bad_field_on_its_own_line_with_the_operators_message(tmp_path, capsys):
    code, lines = _validate(tmp_path, capsys, BAD_MANIFEST)
    assert code == 1
    assert [line.split(":", 1)[0] for line in lines] == [
        "metadata.name", "spec.job.entrypoint", "spec.checkpoint.interval", "spec.checkpoint.retain"]
    # the spec's lines are exactly what the operator's validation (parse_spec) reports for it
    with pytest.raises(SpecError) as raised:
        parse_spec({"job": {"entrypoint": "nocolon"}, "checkpoint": {"retain": 0, "interval": "1ms"}})
    assert lines[1:] == raised.value.problems
    assert str(raised.value) == "; ".join(raised.value.problems)


def test_yaml_errors_name_the_file_and_line(tmp_path, capsys):
    path = tmp_path / "broken.yaml"
    path.write_text("job: {entrypoint: 'a:b'\n  x: [\n")
    assert main(["validate", str(path)]) == 1
    out = capsys.readouterr().out
    assert out.startswith(f"{path}: line 2, column 3: not valid YAML")


@pytest.mark.parametrize(("header", "expected"), [
    ("apiVersion: v1\nkind: Deployment\n",
     ["apiVersion: expected sparkpoint.dev/v1alpha1, got 'v1'", "kind: expected StreamingJob, got 'Deployment'"]),
    ("apiVersion: sparkpoint.dev/v1beta9\nkind: StreamingJob\n",
     ["apiVersion: expected sparkpoint.dev/v1alpha1, got 'sparkpoint.dev/v1beta9'"]),
    ("kind: StreamingJobSavepoint\n",
     ["apiVersion: expected sparkpoint.dev/v1alpha1, got None", "kind: expected StreamingJob, got 'StreamingJobSavepoint'"]),
])
def test_a_wrong_api_version_or_kind_is_refused(tmp_path, capsys, header, expected):
    code, lines = _validate(tmp_path, capsys, header + "metadata: {name: ok}\nspec: {job: {entrypoint: 'a:b'}}\n")
    assert (code, lines) == (1, expected)


def test_valid_files_exit_zero_and_say_what_they_hold(capsys):
    files = [REPO / "examples" / "streamingjob.yaml", REPO / "examples" / "windowed_aggregation.yaml"]
    assert main(["validate", *map(str, files)]) == 0
    out = capsys.readouterr().out.splitlines()
    assert out == [f"{files[0]}: valid (StreamingJob default/windowed-aggregation)",
                   f"{files[1]}: valid (a StreamingJob spec)"]


def test_every_document_of_a_file_is_checked(tmp_path, capsys):
    good = "apiVersion: sparkpoint.dev/v1alpha1\nkind: StreamingJob\nmetadata: {name: a}\nspec: {job: {entrypoint: 'a:b'}}\n"
    code, lines = _validate(tmp_path, capsys, good + "---\n" + good.replace("'a:b'", "'ab'"))
    assert code == 1 and len(lines) == 1 and lines[0].startswith("document 2: spec.job.entrypoint:")


def test_missing_and_empty_files(tmp_path, capsys):
    assert main(["validate", str(tmp_path / "nope.yaml")]) == 1
    assert "cannot read" in capsys.readouterr().out
    code, lines = _validate(tmp_path, capsys, "# nothing\n")
    assert code == 1 and lines == ["empty: expected a StreamingJob spec or manifest"]


def test_the_three_commands_print_the_package_version(capsys):
    expected = metadata.version("sparkpoint")
    for parse, prog in ((lambda: build_parser().parse_args(["--version"]), "sparkpoint"),
                        (lambda: operator_args(["--version"]), "sparkpoint-operator"),
                        (lambda: plugin_cli.parser().parse_args(["--version"]), "kubectl-sparkpoint")):
        with pytest.raises(SystemExit) as done:
            parse()
        assert done.value.code == 0
        assert capsys.readouterr().out.strip() == f"{prog} {expected}"


def test_the_version_comes_from_pyproject():
    import tomllib

    from sparkpoint import version

    assert version() == tomllib.loads((REPO / "pyproject.toml").read_text())["project"]["version"]


def test_internal_entry_points_work_but_are_not_in_the_top_level_help():
    help_text = build_parser().format_help()
    for command in INTERNAL_COMMANDS:
        assert f"    {command} " not in help_text
        assert build_parser().parse_args([command, *_minimal(command)]).command == command
    assert "    validate " in help_text and "    run " in help_text


def _minimal(command: str) -> list[str]:
    return {"executor": [], "hot-volume": ["remove-job", "--root", "/r", "--namespace", "n", "--job", "j", "--uid", "u"]}[command]


def test_validate_runs_as_a_console_command(tmp_path):
    path = tmp_path / "j.yaml"
    path.write_text("job: {entrypoint: 'x'}\n")
    done = subprocess.run([sys.executable, "-m", "sparkpoint.runtime.cli", "validate", str(path)],
                          capture_output=True, text=True, timeout=120)
    assert done.returncode == 1 and f"{path}: spec.job.entrypoint:" in done.stdout
