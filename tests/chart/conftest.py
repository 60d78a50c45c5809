"""Fixtures of the chart tests: the pinned helm binary (scripts/ensure-helm.sh builds it once per
machine) and `render`, which runs `helm template` with given values and parses the objects."""

from __future__ import annotations

import json
import subprocess
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
import yaml

ROOT = Path(__file__).resolve().parents[2]
CHART = ROOT / "charts" / "sparkpoint"
RELEASE, RELEASE_NS = "sp", "sparkpoint-system"


HELM_BUILD_WAIT = 1800  # seconds: a cold build on two loaded cores took over 25 minutes


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """The first test that needs helm may wait for its cold build (started in the background by
    `make test`) far longer than the suite's 600 s per-test timeout: give those tests the build's."""
    for item in items:
        if "helm" in getattr(item, "fixturenames", ()):
            item.add_marker(pytest.mark.timeout(HELM_BUILD_WAIT + 300))


@pytest.fixture(scope="session")
def helm() -> str:
    # A cold build takes minutes; in `make test` it runs in the background while the tests start.
    out = subprocess.run([str(ROOT / "scripts" / "ensure-helm.sh")], capture_output=True, text=True,
                         timeout=HELM_BUILD_WAIT)
    assert out.returncode == 0, f"scripts/ensure-helm.sh failed:\n{out.stderr[-3000:]}"
    return out.stdout.strip()


class Rendered(list):
    """The objects of one `helm template`, with look-ups by kind (and name/namespace)."""

    def of(self, kind: str, namespace: str | None = None) -> list[dict[str, Any]]:
        return [o for o in self if o["kind"] == kind
                and (namespace is None or o["metadata"].get("namespace") == namespace)]

    def one(self, kind: str, namespace: str | None = None) -> dict[str, Any]:
        found = self.of(kind, namespace)
        assert len(found) == 1, f"expected one {kind} in {namespace}, got {[o['metadata']['name'] for o in found]}"
        return found[0]


def helm_template(helm: str, values: dict[str, Any], *extra: str) -> subprocess.CompletedProcess:
    # --set-json per top-level key: the values reach the schema exactly as a values file would give them.
    args = [a for key, value in values.items() for a in ("--set-json", f"{key}={json.dumps(value)}")]
    return subprocess.run([helm, "template", RELEASE, str(CHART), "--namespace", RELEASE_NS, *args, *extra],
                          capture_output=True, text=True, timeout=120)


@pytest.fixture(scope="session")
def render(helm) -> Callable[..., Rendered]:
    def run(**values: Any) -> Rendered:
        out = helm_template(helm, values)
        assert out.returncode == 0, out.stderr
        return Rendered(doc for doc in yaml.safe_load_all(out.stdout) if doc)
    return run


def operator_container(objs: Rendered) -> dict[str, Any]:
    return objs.one("Deployment")["spec"]["template"]["spec"]["containers"][0]
