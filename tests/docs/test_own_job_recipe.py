"""The "your own job on a cluster" recipe (README.md, examples/own-job) stays consistent: its Dockerfile
builds FROM this release's runtime image, its dependency is one the runtime image lacks (else the
recipe proves nothing), its StreamingJob names a module the image carries, and `make own-job-image`
builds it. e2e/test_own_job_image.py builds and runs it on the local cluster."""

from __future__ import annotations

import re
import tomllib
from pathlib import Path

import yaml

from sparkpoint.runtime.cli.validate import check_file
from sparkpoint.runtime.spec import parse_spec

ROOT = Path(__file__).resolve().parents[2]
OWN = ROOT / "examples" / "own-job"
VERSION = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["version"]


def requirement_names(text: str) -> set[str]:
    return {re.split(r"[=<>!~\[; ]", line.strip(), maxsplit=1)[0].lower().replace("_", "-")
            for line in text.splitlines() if line.strip() and not line.lstrip().startswith("#")}


def test_the_dockerfile_builds_from_this_releases_runtime_image() -> None:
    dockerfile = (OWN / "Dockerfile").read_text()
    assert re.search(rf"^ARG RUNTIME_IMAGE=sparkpoint/runtime:{re.escape(VERSION)}$", dockerfile, re.M)
    assert re.search(r"^FROM \$\{RUNTIME_IMAGE\}$", dockerfile, re.M)
    assert dockerfile.rstrip().splitlines()[-1] == "USER 185:185"  # the job runs as the runtime's user


def test_its_dependencies_are_ones_the_runtime_image_lacks() -> None:
    wanted = requirement_names((OWN / "requirements.txt").read_text())
    in_image = requirement_names((ROOT / "image" / "constraints.txt").read_text())
    assert wanted and not wanted & in_image


def test_the_streamingjob_names_a_module_the_image_carries() -> None:
    assert check_file(OWN / "streamingjob.yaml")[0] == []
    spec = parse_spec(yaml.safe_load((OWN / "streamingjob.yaml").read_text())["spec"])
    module, _, func = spec.job.entrypoint.partition(":")
    source = (OWN / "job" / f"{module}.py").read_text()
    assert re.search(rf"^def {func}\(spark\b", source, re.M)
    assert re.search(r"^import humanize$", source, re.M)  # imported at start: a missing package fails early


def test_make_own_job_image_builds_the_example_from_the_runtime_image() -> None:
    makefile = (ROOT / "Makefile").read_text()
    assert re.search(r"^own-job-image:\n\t@scripts/build-own-job-image.sh$", makefile, re.M)
    script = (ROOT / "scripts" / "build-own-job-image.sh").read_text()
    assert "dir=${OWN_JOB_DIR:-examples/own-job}" in script
    assert "runtime=${RUNTIME_IMAGE:-sparkpoint/runtime:$version}" in script
    assert '--build-arg "RUNTIME_IMAGE=$runtime"' in script and "--pull=never" in script
