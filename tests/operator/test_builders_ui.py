"""Spark's live UI (issue 30): the pod's `spark-ui` port and the env var that turns the UI on follow
spec.spark.ui.enabled; the job's Service always names the port. Event logs (spec.spark.eventLog):
the GC sidecar's retention of them and their deletion with the job."""

from __future__ import annotations

import pytest

from sparkpoint.operator.kube import builders
from sparkpoint.runtime.spec import job as config
from sparkpoint.runtime.spec.rules import SPARK_UI_PORT_ENV, SPARK_UI_PROXY_BASE_ENV

JOB = builders.JobRef(namespace="analytics", name="clicks", uid="0d9c0a52-1111-2222-3333-444455556666")
BASE = {"image": "sparkpoint:dev", "job": {"entrypoint": "examples.windowed_aggregation:build"}}


def _runtime(spark: dict, **more) -> dict:
    spec = config.parse_spec({**BASE, "spark": spark, **more})
    return builders.build_pod(JOB, spec, attempt=1)["spec"]["containers"][0]


def test_ui_on_by_default_names_the_port_and_tells_the_runtime() -> None:
    runtime = _runtime({})
    assert {"name": "spark-ui", "containerPort": 4040} in runtime["ports"]
    assert {"name": SPARK_UI_PORT_ENV, "value": "4040"} in runtime["env"]


def test_ui_off_leaves_no_port_and_no_env() -> None:
    runtime = _runtime({"ui": {"enabled": False}})
    assert "spark-ui" not in {p["name"] for p in runtime["ports"]}
    assert SPARK_UI_PORT_ENV not in {e["name"] for e in runtime["env"]}


def test_behind_the_charts_ingress_the_runtime_gets_its_path_as_proxy_base() -> None:
    spec = config.parse_spec(BASE)
    env = builders.build_pod(JOB, spec, attempt=1, ui_path_prefix="/sparkpoint")["spec"]["containers"][0]["env"]
    assert {"name": SPARK_UI_PROXY_BASE_ENV, "value": "/sparkpoint/analytics/clicks"} in env
    assert SPARK_UI_PROXY_BASE_ENV not in {e["name"] for e in _runtime({})["env"]}  # no prefix: none
    off = config.parse_spec({**BASE, "spark": {"ui": {"enabled": False}}})
    off_env = builders.build_pod(JOB, off, attempt=1, ui_path_prefix="/sparkpoint")["spec"]["containers"][0]["env"]
    assert SPARK_UI_PROXY_BASE_ENV not in {e["name"] for e in off_env}


def test_operator_refuses_a_ui_path_prefix_it_cannot_use(capsys) -> None:
    from sparkpoint.operator.__main__ import parse_args

    assert parse_args(["--all-namespaces", "--ui-path-prefix", "/a/b-c"]).ui_path_prefix == "/a/b-c"
    for bad in ("a", "/a/", "/a b", "/"):
        with pytest.raises(SystemExit):
            parse_args(["--all-namespaces", "--ui-path-prefix", bad])
        assert "--ui-path-prefix" in capsys.readouterr().err


def test_ui_beside_the_driver_ports_of_master_k8s() -> None:
    runtime = _runtime({"master": "k8s", "executors": {"instances": 1}}, checkpoint={
        "storage": {"url": "s3://ckpt/prod"}, "hotVolume": {"persistentVolumeClaim": {"claimName": "hot"}}})
    assert [p["name"] for p in runtime["ports"]] == ["control", "metrics", "spark-driver", "spark-blocks", "spark-ui"]


def test_service_names_the_ui_port_for_the_current_attempt() -> None:
    ports = {p["name"]: p for p in builders.build_service(JOB)["spec"]["ports"]}
    assert ports["spark-ui"] == {"name": "spark-ui", "port": 4040, "targetPort": "spark-ui"}


def _gc_command(spark: dict) -> list[str]:
    spec = config.parse_spec({**BASE, "spark": spark})
    return builders.build_pod(JOB, spec, attempt=1)["spec"]["containers"][1]["command"]


def test_gc_sidecar_collects_event_logs_with_the_specs_retention_even_when_logging_is_off() -> None:
    for spark, retain in (({}, "5"), ({"eventLog": {"retainAttempts": 2}}, "2"),
                          ({"eventLog": {"enabled": False, "retainAttempts": 3}}, "3")):
        command = _gc_command(spark)
        assert command[command.index("--history-retain") + 1] == retain


def test_gc_on_delete_removes_the_event_logs_too(tmp_path) -> None:
    from sparkpoint.operator.store.view import delete_checkpoints
    from sparkpoint.runtime.store import DirectoryStore, JobRef
    from sparkpoint.runtime.store.layout import history_key

    store, job = DirectoryStore(tmp_path), JobRef("analytics", "clicks")
    store.put_bytes(history_key(job, 1, 1, "eventlog_v2_local-1/events_1_local-1.zstd"), b"x")
    assert delete_checkpoints(store, job) == 1 and not list(store.list(""))
