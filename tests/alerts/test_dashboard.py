"""The Grafana dashboard (charts/sparkpoint/dashboards/sparkpoint.json) queries only metrics the
code exports, and covers what issue 9 asks it to show."""

from __future__ import annotations

import json
import re
from pathlib import Path

from promql_names import PROMETHEUS_SERIES, exported_names, metric_names

DASHBOARD = Path(__file__).resolve().parents[2] / "charts" / "sparkpoint" / "dashboards" / "sparkpoint.json"


def _queries(dashboard: dict) -> list[str]:
    exprs = [t["expr"] for p in dashboard["panels"] for t in p.get("targets", [])]
    for var in dashboard["templating"]["list"]:
        if var["type"] == "query":  # label_values(metric{...}, label): the metric must exist too
            exprs.append(re.sub(r"^label_values\((.*),\s*\w+\)$", r"\1", var["query"]["query"]))
    return exprs


def test_every_query_names_an_exported_metric():
    dashboard = json.loads(DASHBOARD.read_text())
    exported = exported_names() | PROMETHEUS_SERIES
    queries = _queries(dashboard)
    assert len(queries) >= 10
    for expr in queries:
        names = metric_names(expr)
        assert names, f"no metric in {expr!r}"
        assert names <= exported, f"{expr!r} reads {sorted(names - exported)}, which the code does not export"


def test_dashboard_shows_what_operators_need():
    dashboard = json.loads(DASHBOARD.read_text())
    read = set().union(*(metric_names(e) for e in _queries(dashboard)))
    assert {"sparkpoint_checkpoint_duration_seconds_bucket", "sparkpoint_checkpoint_size_bytes",
            "sparkpoint_checkpoint_uploaded_bytes_total", "sparkpoint_checkpoint_reused_bytes_total",
            "sparkpoint_batch_duration_seconds_bucket", "sparkpoint_operator_restarts_total",
            "sparkpoint_gc_deleted_bytes_total", "sparkpoint_operator_checkpoint_trigger_lag_seconds_bucket"} <= read
    ids = [p["id"] for p in dashboard["panels"]]
    assert len(ids) == len(set(ids)) and dashboard["uid"] == "sparkpoint"


def test_a_misspelt_metric_is_caught():
    assert not metric_names("rate(sparkpoint_checkpoint_uploaded_byte_total[5m])") <= exported_names()
