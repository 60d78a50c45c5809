"""values.schema.json is strict (a typo is an error naming the key) and every value is documented."""

from __future__ import annotations

import re

import pytest
import yaml
from conftest import CHART, helm_template


@pytest.mark.parametrize(("values", "named"), [
    ({"replica": 2}, "replica"),                                   # typo of replicas
    ({"image": {"pullpolicy": "Always"}}, "pullpolicy"),           # typo inside an object
    ({"watchNamespaces": ["Team_A"]}, "watchNamespaces"),          # not a namespace name
    ({"replicas": "two"}, "replicas"),
    ({"metrics": {"port": 80}}, "port"),
    ({"upgradeTimeout": "five minutes"}, "upgradeTimeout"),
    ({"networkPolicy": {"enable": True}}, "enable"),
    ({"prometheusRule": {"docsBaseUrl": "docs"}}, "docsBaseUrl"),  # relative: a dead link in Alertmanager
    ({"grafanaDashboard": {"labelValue": 1}}, "labelValue"),       # a label value is a string
    ({"grafanaDashboard": {"labelName": "grafana dashboard"}}, "labelName"),
])
def test_schema_rejects_a_bad_value_naming_it(helm, values, named) -> None:
    out = helm_template(helm, values)
    assert out.returncode != 0, f"{values} was accepted"
    assert "schema" in out.stderr and named in out.stderr, out.stderr


def leaf_keys(node: dict, prefix: str = "") -> list[str]:
    keys = []
    for key, value in node.items():
        path = f"{prefix}{key}"
        # A dict default that users replace whole (resources, securityContext, selectors) is one value.
        if isinstance(value, dict) and value and path not in PASSTHROUGH:
            keys += leaf_keys(value, path + ".")
        else:
            keys.append(path)
    return keys


PASSTHROUGH = {"resources", "podSecurityContext", "securityContext", "historyServer.resources"}


def test_every_value_is_documented_in_the_readme_table() -> None:
    values = yaml.safe_load((CHART / "values.yaml").read_text())
    documented = set(re.findall(r"^\| `([A-Za-z0-9.]+)` \|", (CHART / "README.md").read_text(), re.M))
    assert documented == set(leaf_keys(values))


def test_every_value_has_a_comment_in_values_yaml() -> None:
    """The line before each documented value's key in values.yaml is a comment."""
    leaves = set(leaf_keys(yaml.safe_load((CHART / "values.yaml").read_text())))
    lines = (CHART / "values.yaml").read_text().splitlines()
    path: list[str] = []
    seen = set()
    for i, line in enumerate(lines):
        m = re.match(r"^( *)([A-Za-z]+):", line)
        if not m:
            continue
        depth = len(m.group(1)) // 2
        path = path[:depth] + [m.group(2)]
        key = ".".join(path)
        if key in leaves:
            seen.add(key)
            assert lines[i - 1].lstrip().startswith("#"), f"values.yaml line {i + 1} ({key}) has no comment"
    assert seen == leaves
