"""The job spec model: durations, both document shapes, and errors that name the field."""

from __future__ import annotations

import pytest

from sparkpoint.runtime import config


@pytest.mark.parametrize(("text", "seconds"), [("500ms", 0.5), ("10s", 10), ("5m", 300), ("2h", 7200), ("0s", 0)])
def test_parse_duration(text: str, seconds: float) -> None:
    assert config.parse_duration(text) == seconds


@pytest.mark.parametrize("text", ["10", "1d", "-5s", "5 m", "", "1.5s"])
def test_parse_duration_rejects(text: str) -> None:
    with pytest.raises(ValueError, match="invalid duration"):
        config.parse_duration(text)


def test_full_manifest_and_bare_spec_parse_to_the_same_spec(tmp_path) -> None:
    spec = {"job": {"entrypoint": "examples.windowed:build"}, "checkpoint": {"interval": "5s"}}
    manifest = tmp_path / "job.yaml"
    manifest.write_text(
        "apiVersion: sparkpoint.dev/v1alpha1\nkind: StreamingJob\n"
        "metadata: {name: clicks, namespace: analytics}\n"
        "spec:\n  job: {entrypoint: 'examples.windowed:build'}\n  checkpoint: {interval: 5s}\n")
    bare = tmp_path / "My_Job.yaml"
    bare.write_text("job: {entrypoint: 'examples.windowed:build'}\ncheckpoint: {interval: 5s}\n")
    ident, from_manifest = config.load_job_file(manifest)
    bare_ident, from_bare = config.load_job_file(bare)
    assert (ident.namespace, ident.name) == ("analytics", "clicks")
    assert (bare_ident.namespace, bare_ident.name) == ("default", "my-job")
    assert from_manifest == from_bare == config.parse_spec(spec)
    assert from_bare.checkpoint.interval == "5s" and from_bare.checkpoint.retain == 3


def test_every_error_is_reported_with_its_field(tmp_path) -> None:
    path = tmp_path / "job.yaml"
    path.write_text("job: {entrypoint: nope, sink: {kind: upsert}}\nrestoreFrom: {checkpoint: chk-000001, savepoint: sp}\n")
    with pytest.raises(config.SpecError) as err:
        config.load_job_file(path)
    message = str(err.value)
    assert "spec.job.entrypoint: 'nope' is not of the form module:function" in message
    assert "spec.job.sink: keyColumns must name at least one column" in message
    assert "spec.restoreFrom: set at most one of checkpoint and savepoint" in message


def test_unreadable_and_non_yaml_files_fail_clearly(tmp_path) -> None:
    with pytest.raises(config.SpecError, match="cannot read job file"):
        config.load_job_file(tmp_path / "missing.yaml")
    bad = tmp_path / "bad.yaml"
    bad.write_text("job: [unclosed\n")
    with pytest.raises(config.SpecError, match="not valid YAML"):
        config.load_job_file(bad)
    listy = tmp_path / "list.yaml"
    listy.write_text("- a\n- b\n")
    with pytest.raises(config.SpecError, match="spec: expected a mapping"):
        config.load_job_file(listy)


def test_bad_metadata_name_is_named() -> None:
    with pytest.raises(config.SpecError, match="metadata.name"):
        config.parse_document({"kind": "StreamingJob", "metadata": {"name": "Bad_Name"},
                               "spec": {"job": {"entrypoint": "a:b"}}})


def test_pending_timeout_must_outlive_the_checkpoint_timeout() -> None:
    with pytest.raises(config.SpecError, match="gc.pendingTimeout must be longer than checkpoint.timeout"):
        config.parse_spec({"job": {"entrypoint": "a:b"}, "checkpoint": {"timeout": "2h"}})
    spec = config.parse_spec({"job": {"entrypoint": "a:b"}, "gc": {"grace": "20m"}})
    assert spec.reuse_window_seconds() == 600
