"""spec.spark.ui.enabled (issue 30): the field, its reserved conf keys, and the session's UI conf
(on only when the spec wants it and the pod names the port: local runs and tests keep it off)."""

from __future__ import annotations

import pytest

from sparkpoint.runtime.spark.session import launch_conf, session_conf, wants_fast_restore
from sparkpoint.runtime.spec import SparkSection, StandbySection
from sparkpoint.runtime.spec import job as config
from sparkpoint.runtime.spec.rules import SPARK_UI_PORT_ENV

BASE = {"image": "sparkpoint:dev", "job": {"entrypoint": "examples.windowed_aggregation:build"}}


def test_ui_enabled_defaults_true_and_round_trips_camel_case() -> None:
    spec = config.parse_spec(BASE)
    assert spec.spark.ui.enabled is True
    off = config.parse_spec({**BASE, "spark": {"ui": {"enabled": False}}})
    assert off.model_dump(by_alias=True)["spark"]["ui"] == {"enabled": False}


@pytest.mark.parametrize("key", ["spark.ui.enabled", "spark.ui.port"])
def test_ui_conf_keys_are_reserved_and_the_error_names_them(key) -> None:
    with pytest.raises(config.SpecError, match=key.replace(".", r"\.")):
        config.parse_spec({**BASE, "spark": {"conf": {key: "true"}}})


def test_a_typo_in_ui_names_the_field() -> None:
    with pytest.raises(config.SpecError, match="spark.ui.enable: Extra inputs"):
        config.parse_spec({**BASE, "spark": {"ui": {"enable": True}}})


def test_local_run_keeps_the_ui_off(monkeypatch) -> None:
    monkeypatch.delenv(SPARK_UI_PORT_ENV, raising=False)
    conf = session_conf(SparkSection())
    assert conf["spark.ui.enabled"] == "false" and "spark.ui.port" not in conf


def test_pod_with_the_port_turns_it_on_unless_the_spec_says_off(monkeypatch) -> None:
    monkeypatch.setenv(SPARK_UI_PORT_ENV, "4040")
    conf = session_conf(SparkSection())
    assert conf["spark.ui.enabled"] == "true" and conf["spark.ui.port"] == "4040"
    assert conf["spark.ui.killEnabled"] == "false"  # read-only (docs/security.md)
    assert session_conf(SparkSection(ui={"enabled": False}))["spark.ui.enabled"] == "false"


def test_behind_the_ingress_the_proxy_base_is_spark_ui_proxy_base(monkeypatch) -> None:
    from sparkpoint.runtime.spec.rules import SPARK_UI_PROXY_BASE_ENV

    monkeypatch.setenv(SPARK_UI_PORT_ENV, "4040")
    monkeypatch.setenv(SPARK_UI_PROXY_BASE_ENV, "/sparkpoint/team/clicks")
    assert session_conf(SparkSection())["spark.ui.proxyBase"] == "/sparkpoint/team/clicks"
    # Spark's UI reads it from the JVM's system properties: the early JVM is launched with it
    assert launch_conf(SparkSection())["spark.ui.proxyBase"] == "/sparkpoint/team/clicks"
    monkeypatch.delenv(SPARK_UI_PROXY_BASE_ENV)
    assert "spark.ui.proxyBase" not in session_conf(SparkSection())


def test_a_job_with_a_warmed_standby_snapshots_its_state_every_10_versions_unless_its_conf_says() -> None:
    """spec.standby.warmup: the promoted first batch replays at most 10 changelogs per partition (the
    runner passes fast_restore for it); every other job keeps 50, and the user's conf wins over both."""
    key = "spark.sql.streaming.stateStore.minDeltasForSnapshot"
    assert session_conf(SparkSection())[key] == "50"
    assert session_conf(SparkSection(), fast_restore=True)[key] == "10"
    assert session_conf(SparkSection(conf={key: "25"}), fast_restore=True)[key] == "25"
    assert wants_fast_restore(StandbySection(enabled=True, warmup=True))
    assert not wants_fast_restore(StandbySection(enabled=True)) and not wants_fast_restore(StandbySection(warmup=True))
    assert not wants_fast_restore(None)
