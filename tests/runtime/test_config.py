"""The job spec model: durations, both document shapes, and errors that name the field."""

from __future__ import annotations

import pytest

from sparkpoint.runtime.spec import job as config
from sparkpoint.runtime.spec import rules as spec_rules


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
    assert "spec.restoreFrom: set at most one of checkpoint, savepoint and fresh" in message


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
    assert spec.gc.pending_timeout == "1h"


def _spec_with(**sections) -> dict:
    spec: dict = {"job": {"entrypoint": "a:b"}}
    for section, fields in sections.items():
        spec[section] = fields if not isinstance(fields, dict) else {**spec.get(section, {}), **fields}
    return spec


# Manifests a new user could write that nothing can run (issue 8, item 9): each is refused naming the field.
@pytest.mark.parametrize(("spec", "expected"), [
    (_spec_with(checkpoint={"interval": "0s"}), "spec.checkpoint.interval: must be at least 1s (got 0s)"),
    (_spec_with(checkpoint={"timeout": "0s"}), "spec.checkpoint.timeout: must be at least 1s (got 0s)"),
    (_spec_with(checkpoint={"interval": "999ms"}), "spec.checkpoint.interval: must be at least 1s"),
    (_spec_with(spark={"resources": {"memory": "lots"}}), "spec.spark.resources.memory: 'lots' is not a memory quantity"),
    (_spec_with(spark={"resources": {"cpu": "many"}}), "spec.spark.resources.cpu: 'many' is not a CPU quantity"),
    (_spec_with(spark={"resources": {"cpu": "-1"}}), "spec.spark.resources.cpu: '-1' is not a CPU quantity"),
    (_spec_with(spark={"resources": {"memory": "100Mi"}}), "spec.spark.resources.memory: must be at least 1Gi"),
    (_spec_with(spark={"resources": {"memory": "500m"}}), "spec.spark.resources.memory: '500m' is not a memory quantity"),
    (_spec_with(image="Not A Valid Image!!"), "spec.image: 'Not A Valid Image!!' is not an image reference"),
    (_spec_with(image="sparkpoint:"), "spec.image: "),
    (_spec_with(image="Sparkpoint:dev"), "spec.image: "),
    (_spec_with(spark={"master": "yarn"}), "spec.spark.master: 'yarn' is not local, local[N], local[*] or k8s"),
    (_spec_with(spark={"master": "local[0]"}), "spec.spark.master: "),
    (_spec_with(spark={"master": "spark://host:7077"}), "spec.spark.master: "),
    (_spec_with(job={"entrypoint": "a:b", "triggerInterval": "0ms"}),
     "spec.job.triggerInterval: must be at least 100ms (got 0ms)"),
    (_spec_with(restart={"backoff": "0s"}), "spec.restart.backoff: must be at least 1s"),
    (_spec_with(restart={"backoff": "10m", "maxBackoff": "5m"}),
     "spec.restart: backoff must not be longer than maxBackoff"),
    (_spec_with(gc={"interval": "0s"}), "spec.gc.interval: must be at least 1s"),
    (_spec_with(savepoint={"interval": "10s"}), "spec.savepoint.interval: must be at least 1m (got 10s)"),
    (_spec_with(restart={"window": "0s"}), "spec.restart.window: must be at least 1m"),
    (_spec_with(upgradeTimeout="1s"), "spec.upgradeTimeout: must be at least 30s"),
    (_spec_with(checkpoint={"interval": "1000000h"}), "spec.checkpoint.interval: '1000000h' is not a duration of up to six digits"),
    (_spec_with(checkpoint={"storage": {"url": "s3://bkt/p", "endpoint": "minio:9000"}}),
     "spec.checkpoint.storage.endpoint: 'minio:9000' is not http://host[:port]"),
    (_spec_with(spark={"conf": {"spark.sql.streaming.checkpointLocation": "/tmp/x"}}),
     "spec.spark.conf: spark.sql.streaming.checkpointLocation is set by Sparkpoint"),
    (_spec_with(spark={"conf": {"spark.master": "yarn"}}),
     "spec.spark.conf: spark.master is set by Sparkpoint: set spec.spark.master instead"),
    (_spec_with(job={"entrypoint": "a:b", "sink": {"path": "out/../other-job"}}),
     "spec.job.sink.path: 'out/../other-job' is not a relative path"),
    (_spec_with(job={"entrypoint": "a:b", "sink": {"path": "out//agg"}}), "spec.job.sink.path: "),
    (_spec_with(job={"entrypoint": "a:b", "sink": {"path": "out/"}}), "spec.job.sink.path: "),
    (_spec_with(job={"entrypoint": "a:b", "sink": {"kind": "upsert", "keyColumns": [""]}}),
     "spec.job.sink.keyColumns.0: String should have at least 1 character"),
    (_spec_with(gc={"secretRef": {"name": "gc-creds"}}), "spec: gc.secretRef needs an s3:// checkpoint.storage.url"),
    (_spec_with(gc={"secretRef": {"name": "gc-creds"}}, checkpoint={"storage": {"url": "file:///data"}}),
     "spec: gc.secretRef needs an s3:// checkpoint.storage.url"),
    (_spec_with(gc={"secretRef": {"name": "Bad_Name"}}, checkpoint={"storage": {"url": "s3://bkt/p"}}),
     "spec.gc.secretRef.name: "),
    (_spec_with(spark={"conf": {"spark.sql.shuffle.partitions": "8"}}),
     "spec.spark.conf: spark.sql.shuffle.partitions is set by Sparkpoint: set spec.spark.shufflePartitions"),
    (_spec_with(job={"entrypoint": "a:b", "sink": {"compaction": {"interval": "0s"}}}),
     "spec.job.sink: compaction applies only when kind is delta or upsert"),
    (_spec_with(job={"entrypoint": "a:b", "sink": {"kind": "delta", "compaction": {"minFiles": 1}}}),
     "spec.job.sink.compaction.minFiles: Input should be greater than or equal to 2"),
    (_spec_with(job={"entrypoint": "a:b", "sink": {"kind": "delta", "compaction": {"targetFileSize": "100Ki"}}}),
     "spec.job.sink.compaction.targetFileSize: must be at least 1Mi"),
])
def test_nonsense_a_new_user_could_apply_is_refused_naming_the_field(spec, expected) -> None:
    with pytest.raises(config.SpecError) as err:
        config.parse_spec(spec)
    assert str(err.value).startswith(expected), str(err.value)


@pytest.mark.parametrize("spec", [
    _spec_with(spark={"master": "local"}), _spec_with(spark={"master": "local[*]"}),
    _spec_with(spark={"master": "local[16]"}),
    _spec_with(spark={"master": "k8s", "executors": {"instances": 2}},
               checkpoint={"hotVolume": {"persistentVolumeClaim": {"claimName": "hot"}}}),
    _spec_with(image="ghcr.io/org/sparkpoint:1.2"), _spec_with(image="localhost:5000/team/job_x:v1.0-rc1"),
    _spec_with(image="sparkpoint@sha256:" + "a" * 64), _spec_with(image="my-registry.example.com/a/b__c"),
    _spec_with(spark={"resources": {"cpu": "500m", "memory": "1Gi"}}),
    _spec_with(spark={"resources": {"cpu": "0.5", "memory": "1.5Gi"}}),
    _spec_with(spark={"resources": {"cpu": "2", "memory": "4G"}}),
    _spec_with(spark={"conf": {"spark.sql.session.timeZone": "UTC"}}),
    _spec_with(job={"entrypoint": "a:b", "sink": {"path": "out/agg_v1.2/_x"}}),
    _spec_with(job={"entrypoint": "a:b", "triggerInterval": "100ms"}),
    _spec_with(checkpoint={"interval": "1s", "timeout": "1s", "storage": {
        "url": "s3://bkt/p", "endpoint": "https://s3.example.com:9443"}}),
    _spec_with(restart={"backoff": "5m", "maxBackoff": "5m", "window": "1m"}),
    _spec_with(savepoint={"interval": "1m", "retain": 1}, upgradeTimeout="30s"),
    _spec_with(checkpoint={"timeout": "999999m"}, gc={"pendingTimeout": "999999h"}),
    _spec_with(checkpoint={"storage": {"url": "s3://bkt/p", "secretRef": {"name": "runtime-creds"}}},
               gc={"secretRef": {"name": "gc-creds"}}),
])
def test_sensible_values_next_to_the_limits_are_accepted(spec) -> None:
    config.parse_spec(spec)


@pytest.mark.parametrize(("text", "amount"), [("512Mi", 512 * 2**20), ("1.5Gi", 3 * 2**29), ("4G", 4 * 10**9),
                                              ("500m", 0.5), ("2", 2), ("1k", 1000)])
def test_parse_quantity(text: str, amount: float) -> None:
    assert spec_rules.parse_quantity(text) == amount


def test_the_memory_minimum_is_compared_exactly() -> None:
    """Quantities are Decimals (kubernetes.utils), so a bound is not blurred by float rounding."""
    assert spec_rules.parse_quantity("1Gi") == spec_rules.parse_quantity("1024Mi")
    config.parse_spec(_spec_with(spark={"resources": {"memory": "1024Mi"}}))
    with pytest.raises(config.SpecError, match=r"spec\.spark\.resources\.memory: must be at least 1Gi \(got 1023\.999Mi\)"):
        config.parse_spec(_spec_with(spark={"resources": {"memory": "1023.999Mi"}}))


def _manifest(name: str) -> dict:
    return {"kind": "StreamingJob", "metadata": {"name": name}, "spec": {"job": {"entrypoint": "a:b"}}}


@pytest.mark.parametrize("name", ["a" * 76, "a" * 53, "1job", "my.job"])
def test_names_that_cannot_name_the_jobs_service_and_pods_are_refused(name: str) -> None:
    with pytest.raises(config.SpecError, match=r"^metadata\.name: "):
        config.parse_document(_manifest(name))


def test_longest_accepted_name_leaves_room_for_the_derived_names() -> None:
    ident, _ = config.parse_document(_manifest("a" * config.JOB_NAME_MAX_LENGTH))
    # Service <name> is a DNS-1035 label (<= 63); pod <name>-<attempt> stays a label up to 10 digits.
    assert len(f"{ident.name}-{10**10 - 1}") <= 63


def test_bare_spec_file_names_become_valid_job_names(tmp_path) -> None:
    for stem, expected in [("1st_run", "job-1st-run"), ("x" * 80, "x" * 52), ("__", "job")]:
        path = tmp_path / f"{stem}.yaml"
        path.write_text("job: {entrypoint: 'a:b'}\n")
        assert config.load_job_file(path)[0].name == expected


def test_delta_compaction_defaults_and_settings() -> None:
    from sparkpoint.runtime.sink.compaction import CompactionSettings, compaction_settings

    spec = config.parse_spec(_spec_with(job={"entrypoint": "a:b", "sink": {"kind": "delta"}}))
    assert spec.job.sink.compaction is None  # unset: out of the operator's job document and spec key
    assert compaction_settings(spec.job.sink.compaction) == CompactionSettings(3600.0, 128 << 20, 10)
    spec = config.parse_spec(_spec_with(job={"entrypoint": "a:b", "sink": {
        "kind": "delta", "compaction": {"interval": "5m", "targetFileSize": "64Mi", "minFiles": 4}}}))
    assert compaction_settings(spec.job.sink.compaction) == CompactionSettings(300.0, 64 << 20, 4)
    off = config.parse_spec(_spec_with(job={"entrypoint": "a:b", "sink": {"kind": "delta", "compaction": {"enabled": False}}}))
    assert compaction_settings(off.job.sink.compaction) is None


def test_upsert_snapshots_take_the_same_compaction_settings() -> None:
    from sparkpoint.runtime.sink.compaction import CompactionSettings, compaction_settings

    sink = {"kind": "upsert", "keyColumns": ["k"]}
    spec = config.parse_spec(_spec_with(job={"entrypoint": "a:b", "sink": sink}))
    assert compaction_settings(spec.job.sink.compaction) == CompactionSettings(3600.0, 128 << 20, 10)  # on by default
    spec = config.parse_spec(_spec_with(job={"entrypoint": "a:b", "sink": {**sink, "compaction": {"interval": "0s"}}}))
    assert compaction_settings(spec.job.sink.compaction).interval_seconds == 0
    off = config.parse_spec(_spec_with(job={"entrypoint": "a:b", "sink": {**sink, "compaction": {"enabled": False}}}))
    assert compaction_settings(off.job.sink.compaction) is None
