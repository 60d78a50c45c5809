"""Metric names: those the code exports (from its registries) and those a PromQL expression reads."""

from __future__ import annotations

import re

from prometheus_client.metrics import MetricWrapperBase

# Sample-name suffixes each metric type exposes (prometheus_client's text format).
_SUFFIXES = {"counter": ("_total", "_created"), "gauge": ("",), "histogram": ("_bucket", "_count", "_sum", "_created"),
             "summary": ("", "_count", "_sum", "_created"), "info": ("_info",)}
# Series Prometheus writes itself for every target.
PROMETHEUS_SERIES = {"up", "scrape_duration_seconds", "scrape_samples_scraped"}

_KEYWORDS = {"and", "or", "unless", "by", "without", "on", "ignoring", "group_left", "group_right", "bool",
             "offset", "inf", "nan"}


def exported_names(with_families: bool = False) -> set[str]:
    """Every sample name the runtime, the GC sidecar and the operator export; `with_families`: also a
    histogram's own name, which docs use for the family (no PromQL query selects it)."""
    from sparkpoint.operator.metrics import OperatorMetrics
    from sparkpoint.runtime.checkpoint import gc_loop
    from sparkpoint.runtime.service.metrics import RuntimeMetrics

    families = [*RuntimeMetrics().registry.collect(), *OperatorMetrics().registry.collect()]
    for obj in vars(gc_loop).values():  # the GC sidecar's metrics live in the default registry
        if isinstance(obj, MetricWrapperBase):
            families += obj.describe()
    names = set()
    for family in families:
        names |= {family.name + suffix for suffix in _SUFFIXES[family.type]}
        if with_families:
            names.add(family.name)
    return names


def metric_names(expr: str) -> set[str]:
    """The metric names a PromQL expression selects (not functions, keywords or label names)."""
    text = re.sub(r'"(?:[^"\\]|\\.)*"', " ", expr)  # strings: label values, label_replace arguments
    text = re.sub(r"\{[^}]*\}", " ", text)  # label matchers
    text = re.sub(r"\[[^\]]*\]", " ", text)  # range and subquery durations (also $__rate_interval)
    text = re.sub(r"\b(?:by|without|on|ignoring|group_left|group_right)\s*\([^)]*\)", " ", text)
    text = re.sub(r"\$\w+", " ", text)  # Grafana variables outside matchers
    names = set()
    for match in re.finditer(r"[A-Za-z_:][A-Za-z0-9_:]*(?P<call>\s*\()?", text):
        word = match.group(0).rstrip("( \t\n")
        if match.group("call") or word in _KEYWORDS or re.fullmatch(r"\d+[smhdwy]", word):
            continue
        names.add(word)
    return names
