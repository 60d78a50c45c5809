"""The module paths users and the Makefile run keep working across the folders' moves: the console
scripts' targets (pyproject.toml [project.scripts]) and the `python -m` entry points docs/design.md,
the README and the Makefile name."""

from __future__ import annotations

import importlib
import subprocess
import sys
import tomllib
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]


def test_console_scripts_resolve() -> None:
    scripts = tomllib.loads((REPO / "pyproject.toml").read_text())["project"]["scripts"]
    assert set(scripts) == {"sparkpoint", "sparkpoint-operator", "kubectl-sparkpoint"}
    for target in scripts.values():
        module, _, attr = target.partition(":")
        assert callable(getattr(importlib.import_module(module), attr)), target


@pytest.mark.parametrize("module", ["sparkpoint.runtime.cli", "sparkpoint.operator"])
def test_python_m_prints_the_version(module: str) -> None:
    done = subprocess.run([sys.executable, "-m", module, "--version"], cwd=REPO, capture_output=True,
                          text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    assert done.stdout.split()[-1] not in ("", None)


@pytest.mark.parametrize(("module", "committed"), [("sparkpoint.operator.crd", "crds/streamingjob.yaml"),
                                                   ("sparkpoint.operator.savepoint.crd",
                                                    "crds/streamingjobsavepoint.yaml")])
def test_make_crd_modules_print_the_committed_crds(module: str, committed: str) -> None:
    assert f"-m {module} > {committed}" in (REPO / "Makefile").read_text()
    done = subprocess.run([sys.executable, "-m", module], cwd=REPO, capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    assert done.stdout == (REPO / committed).read_text()
