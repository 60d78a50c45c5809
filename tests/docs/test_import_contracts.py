"""The import contracts in pyproject.toml ([tool.importlinter], run by `make lint`) stay complete.

The operator and the plugin may import only the runtime's facades. Their contracts list what is
*forbidden* (import-linter has no "only these" contract), so a new runtime module must be added to
the lists; these tests fail until it is. They also check that a broken rule is reported, on a copy of
the code with one bad import. Pure: no services, no network.
"""

from __future__ import annotations

import shutil
import subprocess
import sys
import tomllib
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
FACADES = {"operator-facades": {"spec", "store", "checkpoint"}, "plugin-spec-model": {"spec"}}


def contracts() -> dict[str, dict]:
    config = tomllib.loads((REPO / "pyproject.toml").read_text())["tool"]["importlinter"]
    return {c["id"]: c for c in config["contracts"]}


def runtime_top_level(runtime: Path = REPO / "runtime") -> set[str]:
    """The runtime's modules and packages directly under sparkpoint.runtime."""
    names = {p.stem for p in runtime.glob("*.py") if p.name != "__init__.py"}
    return names | {p.name for p in runtime.iterdir() if (p / "__init__.py").is_file()}


@pytest.mark.parametrize("contract_id", sorted(FACADES))
def test_every_runtime_module_but_the_facades_is_forbidden(contract_id: str) -> None:
    forbidden = set(contracts()[contract_id]["forbidden_modules"])
    assert "sparkpoint.runtime.*.*" in forbidden, "the runtime's nested modules (store.layout, ...)"
    expected = {f"sparkpoint.runtime.{name}" for name in runtime_top_level() - FACADES[contract_id]}
    missing = expected - forbidden
    assert not missing, f"add to [[tool.importlinter.contracts]] {contract_id!r}: {sorted(missing)}"
    stale = {m for m in forbidden if m.count(".") == 2 and m.split(".")[-1] not in runtime_top_level()}
    assert not stale, f"no such runtime module: {sorted(stale)}"


def test_a_facade_is_not_forbidden() -> None:
    for contract_id, facades in FACADES.items():
        forbidden = set(contracts()[contract_id]["forbidden_modules"])
        assert not {f"sparkpoint.runtime.{f}" for f in facades} & forbidden


def test_lint_imports_reports_an_operator_import_of_a_runtime_internal(tmp_path: Path) -> None:
    for name in ("pyproject.toml", "runtime", "operator", "plugin"):
        src = REPO / name
        if src.is_dir():
            shutil.copytree(src, tmp_path / name, ignore=shutil.ignore_patterns("__pycache__"))
        else:
            shutil.copy(src, tmp_path / name)
    (tmp_path / "sparkpoint").mkdir()
    shutil.copy(REPO / "sparkpoint" / "__init__.py", tmp_path / "sparkpoint" / "__init__.py")
    for name in ("runtime", "operator", "plugin"):
        (tmp_path / "sparkpoint" / name).symlink_to(f"../{name}")
    lint_imports = Path(sys.executable).parent / "lint-imports"

    def run() -> subprocess.CompletedProcess[str]:
        return subprocess.run([str(lint_imports), "--no-cache"], cwd=tmp_path, capture_output=True, text=True,
                              env={"PYTHONPATH": str(tmp_path), "PATH": "/usr/bin:/bin"}, timeout=120)

    assert run().returncode == 0, "the copy passes before the bad import"
    bad = tmp_path / "operator" / "zz_bad_import.py"
    bad.write_text("from sparkpoint.runtime.store.layout import JobRef  # noqa: F401\n")
    result = run()
    assert result.returncode != 0
    assert "sparkpoint.operator.zz_bad_import -> sparkpoint.runtime.store.layout" in result.stdout


def test_the_spec_models_former_path_still_imports() -> None:
    """sparkpoint.runtime.config was the spec model's path before runtime/spec/; users' code may name it."""
    from sparkpoint.runtime import config, spec

    assert config.JobSpec is spec.JobSpec
    assert set(spec.__all__) == set(config.__all__)
    assert all(getattr(config, name) is getattr(spec, name) for name in spec.__all__)


def children(folder: Path) -> set[str]:
    """The modules and packages directly in a product folder (operator/ is a namespace package)."""
    names = {p.stem for p in folder.glob("*.py") if p.name != "__init__.py"}
    return names | {p.name for p in folder.iterdir() if (p / "__init__.py").is_file()}


@pytest.mark.parametrize(("contract_id", "folder", "outside"), [("runtime-rooms", "runtime", {"config"}),
                                                                ("operator-rooms", "operator", set())])
def test_every_room_has_its_layer(contract_id: str, folder: str, outside: set[str]) -> None:
    """A new module or sub-package of the runtime or the operator takes its place in the layers, so the
    contract keeps describing the whole folder (config: the spec model's former path, a re-export)."""
    layers = {name.strip() for layer in contracts()[contract_id]["layers"] for name in layer.split("|")}
    assert children(REPO / folder) - outside == layers
