"""The alert rules (charts/sparkpoint/rules/alerts.yaml): promtool checks and unit-tests them
(tests/alerts/alerts_test.yaml), every alert is tested, documented and reads only exported metrics."""

from __future__ import annotations

import re
import shutil
import subprocess
from pathlib import Path

import pytest
import yaml
from promql_names import PROMETHEUS_SERIES, exported_names, metric_names

REPO = Path(__file__).resolve().parents[2]
RULES = REPO / "charts" / "sparkpoint" / "rules" / "alerts.yaml"
UNIT_TESTS = Path(__file__).parent / "alerts_test.yaml"
RUNBOOK = REPO / "docs" / "alerts.md"
VALUES = REPO / "charts" / "sparkpoint" / "values.yaml"
# Labels a rule must never put on an alert: they could carry a credential or a store URL.
FORBIDDEN_LABELS = re.compile(r"secret|token|password|access_key|credential|url|endpoint", re.I)


def _alerts() -> list[dict]:
    return [rule for group in yaml.safe_load(RULES.read_text())["groups"] for rule in group["rules"]
            if "alert" in rule]


def _promtool(*args: str) -> subprocess.CompletedProcess:
    promtool = shutil.which("promtool")
    assert promtool, "promtool not found: run scripts/ensure-prometheus.sh (Debian's prometheus package)"
    return subprocess.run([promtool, *args], capture_output=True, text=True, timeout=120)


@pytest.mark.tools
def test_promtool_check_rules():
    result = _promtool("check", "rules", str(RULES))
    assert result.returncode == 0, result.stdout + result.stderr
    assert f"SUCCESS: {len(_alerts())} rules found" in result.stdout


@pytest.mark.tools
def test_promtool_unit_tests_pass():
    result = _promtool("test", "rules", str(UNIT_TESTS))
    assert result.returncode == 0, result.stdout + result.stderr
    assert "SUCCESS" in result.stdout


def test_every_alert_is_tested_firing_and_quiet():
    firing, quiet = set(), set()
    for case in yaml.safe_load(UNIT_TESTS.read_text())["tests"]:
        for check in case.get("alert_rule_test", []):
            (firing if check.get("exp_alerts") else quiet).add(check["alertname"])
    names = {rule["alert"] for rule in _alerts()}
    assert names - firing == set(), "alerts never seen firing"
    assert names - quiet == set(), "alerts never seen quiet"


@pytest.mark.parametrize("rule", _alerts(), ids=lambda rule: rule["alert"])
def test_alert_is_documented_and_labelled(rule):
    assert rule["labels"]["severity"] in ("critical", "warning")
    annotations = rule["annotations"]
    assert annotations["summary"] and annotations["description"]
    anchor = rule["alert"].lower()
    # Absolute (a relative path is a dead link in Alertmanager and Grafana), under the chart's default
    # docs base URL, which the chart's PrometheusRule swaps for prometheusRule.docsBaseUrl.
    docs_base = yaml.safe_load(VALUES.read_text())["prometheusRule"]["docsBaseUrl"]
    assert docs_base.startswith("https://")
    assert annotations["runbook_url"] == f"{docs_base}/alerts.md#{anchor}"
    headings = {line.lstrip("#").strip().lower() for line in RUNBOOK.read_text().splitlines() if line.startswith("## ")}
    assert anchor in headings, f"docs/alerts.md has no section '## {rule['alert']}'"
    assert not [label for label in rule["labels"] if FORBIDDEN_LABELS.search(label)]


@pytest.mark.parametrize("rule", _alerts(), ids=lambda rule: rule["alert"])
def test_alert_reads_only_exported_metrics(rule):
    names = metric_names(rule["expr"])
    assert names, rule["expr"]
    assert names - exported_names() - PROMETHEUS_SERIES == set()


def test_metric_names_parser():
    expr = ('label_replace(sum by (namespace, job) (increase(sparkpoint_operator_restarts_total{kind="local"}[30m]))'
            ' > 2, "sparkpoint_job", "$1", "job", "(.+)") or on (a) absent(up{x=~"$namespace"} == 1)'
            ' unless rate(foo_bar[$__rate_interval]) * 2')
    assert metric_names(expr) == {"sparkpoint_operator_restarts_total", "up", "foo_bar"}


def test_exported_names_come_from_the_registries():
    names = exported_names()
    assert {"sparkpoint_checkpoint_interval_seconds", "sparkpoint_gc_errors_total",
            "sparkpoint_operator_reconcile_duration_seconds_count", "sparkpoint_batch_duration_seconds_bucket"} <= names
    assert "sparkpoint_gc_errors" not in names  # a counter's samples end in _total
