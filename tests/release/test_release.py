"""`make release` (scripts/release.sh): the artifacts at pyproject.toml's one version, and the wheel
installed on a Python other than the images' 3.11 runs the client side (`sparkpoint validate`,
`kubectl-sparkpoint`) with no runtime or operator extra."""

from __future__ import annotations

import hashlib
import shutil
import subprocess
import sys
import tarfile
import tomllib
from pathlib import Path

import pytest
import yaml

REPO = Path(__file__).resolve().parents[2]
VERSION = tomllib.loads((REPO / "pyproject.toml").read_text())["project"]["version"]


def other_python() -> str | None:
    """A Python 3.12 or 3.13 interpreter of this machine (PATH, then pyenv's versions), None if none."""
    for minor in ("3.13", "3.12"):
        found = shutil.which(f"python{minor}")
        if found and subprocess.run([found, "--version"], capture_output=True).returncode == 0:
            return found
        for candidate in sorted(Path("/root/.pyenv/versions").glob(f"{minor}.*/bin/python{minor}"), reverse=True):
            return str(candidate)
    return None


def test_the_chart_carries_the_package_version() -> None:
    """release.sh sets the packaged chart's version from pyproject.toml; the source chart must not
    tell another story."""
    chart = yaml.safe_load((REPO / "charts" / "sparkpoint" / "Chart.yaml").read_text())
    assert (chart["version"], chart["appVersion"]) == (VERSION, VERSION)


@pytest.fixture(scope="module")
def release(tmp_path_factory: pytest.TempPathFactory) -> Path:
    helm = subprocess.run([str(REPO / "scripts" / "ensure-helm.sh")], capture_output=True, text=True,
                          timeout=3600, check=True).stdout.strip()
    out = tmp_path_factory.mktemp("dist")
    done = subprocess.run([str(REPO / "scripts" / "release.sh"), sys.executable, helm, str(out)],
                          capture_output=True, text=True, timeout=1800)
    assert done.returncode == 0, done.stdout + done.stderr
    return out


@pytest.mark.tools
def test_release_builds_every_artifact_at_one_version(release: Path) -> None:
    names = {p.name for p in release.iterdir()}
    assert {f"sparkpoint-{VERSION}-py3-none-any.whl", f"sparkpoint-{VERSION}.tar.gz", f"sparkpoint-{VERSION}.tgz",
            f"sparkpoint-crds-{VERSION}.yaml", "SHA256SUMS"} <= names
    with tarfile.open(release / f"sparkpoint-{VERSION}.tgz") as chart:
        meta = yaml.safe_load(chart.extractfile("sparkpoint/Chart.yaml").read())
        packaged_crds = {Path(n).name for n in chart.getnames() if "/crds/" in n}
    assert (meta["version"], meta["appVersion"]) == (VERSION, VERSION)
    assert packaged_crds == {p.name for p in (REPO / "crds").glob("*.yaml")}
    docs = [d for d in yaml.safe_load_all((release / f"sparkpoint-crds-{VERSION}.yaml").read_text()) if d]
    expected = [d for f in sorted((REPO / "crds").glob("*.yaml")) for d in yaml.safe_load_all(f.read_text()) if d]
    assert docs == expected and {d["kind"] for d in docs} == {"CustomResourceDefinition"}
    sums = dict(reversed(line.split(maxsplit=1)) for line in (release / "SHA256SUMS").read_text().splitlines())
    assert set(sums) == names - {"SHA256SUMS"}
    for name, digest in sums.items():
        assert hashlib.sha256((release / name).read_bytes()).hexdigest() == digest, name


@pytest.mark.tools
@pytest.mark.slow
def test_the_wheel_runs_the_client_side_on_another_python(release: Path, tmp_path: Path) -> None:
    python = other_python()
    if python is None:
        pytest.skip("no Python 3.12 or 3.13 on this machine to install the wheel into")
    venv = tmp_path / "venv"
    subprocess.run([python, "-m", "venv", str(venv)], check=True, timeout=300)
    subprocess.run([str(venv / "bin" / "pip"), "install", "-q", str(release / f"sparkpoint-{VERSION}-py3-none-any.whl")],
                   check=True, timeout=1800)
    bad = tmp_path / "bad.yaml"
    bad.write_text("job: {entrypoint: nocolon}\ncheckpoint: {retain: 0}\n")
    valid = subprocess.run([str(venv / "bin" / "sparkpoint"), "validate", str(REPO / "examples" / "streamingjob.yaml")],
                           capture_output=True, text=True, timeout=120)
    assert valid.returncode == 0 and "valid (StreamingJob default/windowed-aggregation)" in valid.stdout, valid.stderr
    invalid = subprocess.run([str(venv / "bin" / "sparkpoint"), "validate", str(bad)], capture_output=True, text=True,
                             timeout=120)
    assert invalid.returncode == 1
    assert [line.split(": ")[1] for line in invalid.stdout.splitlines()] == ["spec.job.entrypoint", "spec.checkpoint.retain"]
    plugin = subprocess.run([str(venv / "bin" / "kubectl-sparkpoint"), "--help"], capture_output=True, text=True, timeout=120)
    assert plugin.returncode == 0 and "events" in plugin.stdout
    version = subprocess.run([str(venv / "bin" / "kubectl-sparkpoint"), "--version"], capture_output=True, text=True,
                             timeout=120)
    assert version.stdout.strip() == f"kubectl-sparkpoint {VERSION}"
    # the client side needs neither extra
    freeze = subprocess.run([str(venv / "bin" / "pip"), "freeze"], capture_output=True, text=True, timeout=120).stdout.lower()
    assert "pyspark" not in freeze and "kopf" not in freeze
