"""One image name and tag scheme (issue 40): sparkpoint/runtime:<version> and sparkpoint/operator:<version>,
the version pyproject.toml's, across `make image`, the chart, the CRD's default spec.image, the examples
and the docs."""

from __future__ import annotations

import re
import tomllib
from pathlib import Path

import yaml

ROOT = Path(__file__).resolve().parents[2]
VERSION = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["version"]
RUNTIME = f"sparkpoint/runtime:{VERSION}"


def test_the_chart_names_the_release_images_by_its_app_version() -> None:
    chart = yaml.safe_load((ROOT / "charts" / "sparkpoint" / "Chart.yaml").read_text())
    values = yaml.safe_load((ROOT / "charts" / "sparkpoint" / "values.yaml").read_text())
    assert chart["appVersion"] == VERSION
    assert values["image"] == values["image"] | {"repository": "sparkpoint/operator", "tag": ""}
    history = values["historyServer"]["image"]
    assert history == history | {"repository": "sparkpoint/runtime", "tag": ""}


def test_the_crd_default_image_and_the_examples_are_the_runtime_release_image() -> None:
    from sparkpoint.runtime.spec import DEFAULT_IMAGE

    crd = yaml.safe_load((ROOT / "crds" / "streamingjob.yaml").read_text())
    spec = crd["spec"]["versions"][0]["schema"]["openAPIV3Schema"]["properties"]["spec"]
    assert spec["properties"]["image"]["default"] == DEFAULT_IMAGE == RUNTIME
    named = {path.name: re.findall(r"^\s*image:\s*[\"']?([^\s\"']+)", path.read_text(), re.M)
             for path in (ROOT / "examples").glob("*.yaml")}
    assert {name: images for name, images in named.items() if images and set(images) != {RUNTIME}} == {}


def test_make_image_tags_the_release_names_from_pyproject() -> None:
    script = (ROOT / "scripts" / "build-image.sh").read_text()
    assert """version=$(sed -n 's/^version = "\\(.*\\)"$/\\1/p' pyproject.toml)""" in script
    assert 'release="sparkpoint/$target${SPARKPOINT_IMAGE_SUFFIX:-}:$version"' in script
    assert '--tag "$release"' in script and 'buildah tag "$tag" "$release"' in script
    assert '--build-arg "VERSION=$version"' in script  # the image's OCI version label


def test_no_doc_or_example_names_another_scheme() -> None:
    files = [ROOT / "README.md", *(ROOT / "docs").glob("*.md"), *(ROOT / "examples").glob("*"),
             ROOT / "charts" / "sparkpoint" / "README.md"]
    stale = {f.name for f in files if f.is_file() and re.search(r"\bsparkpoint:(latest|\d)", f.read_text())}
    assert stale == set()
