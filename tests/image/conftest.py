"""Runs commands inside the images `make image` built (sparkpoint/operator:dev and
sparkpoint/runtime:dev in buildah's local store), with `buildah run --isolation=chroot`: the
container shares the host's network, so it reaches the session's MinIO on loopback.

Without the images these tests skip, naming `make image`; `make test` builds the images first and
sets SPARKPOINT_REQUIRE_IMAGES=1, which turns a missing image into a failure."""

from __future__ import annotations

import os
import shutil
import subprocess
import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

IMAGES = {"operator": "sparkpoint/operator:dev", "runtime": "sparkpoint/runtime:dev"}


def image_present(image: str) -> bool:
    if shutil.which("buildah") is None:
        return False
    return subprocess.run(["buildah", "inspect", "--type", "image", image], capture_output=True).returncode == 0


# buildah's chroot isolation copies its own binary into a sealed memfd before it runs anything;
# sealing fails now and then with EBUSY on a loaded host (CI saw it once, on the operator image's first run). The command
# never started then, so running it again is safe; any other failure is the test's to see.
_TRANSIENT_TRIES = 3


def _buildah_setup_flake(result: subprocess.CompletedProcess) -> bool:
    return result.returncode != 0 and "sealing memfd copy" in result.stderr


@dataclass
class ImageContainer:
    """A buildah working container of one image; `run` executes a command in it as its USER."""

    image: str
    name: str

    def run(self, argv: list[str], env: dict[str, str] | None = None, volumes: dict[Path, str] | None = None,
            user: str | None = None, timeout: float = 120) -> subprocess.CompletedProcess:
        # The host's UTS namespace: buildah's /etc/hosts then names the hostname, which Java's
        # InetAddress.getLocalHost (Spark's driver) must resolve, as a pod's /etc/hosts does.
        cmd = ["buildah", "run", "--isolation=chroot", "--terminal=false", "--uts=host"]
        if user:
            cmd += ["--user", user]
        for key, value in (env or {}).items():
            cmd += ["--env", f"{key}={value}"]
        for source, target in (volumes or {}).items():
            cmd += ["--volume", f"{source}:{target}"]
        for _ in range(_TRANSIENT_TRIES):
            result = subprocess.run([*cmd, self.name, "--", *argv], capture_output=True, text=True, timeout=timeout)
            if not _buildah_setup_flake(result):
                return result
        return result

    def config(self, field: str) -> str:
        return subprocess.run(["buildah", "inspect", "--type", "image", "--format", field, self.image],
                              capture_output=True, text=True, check=True).stdout.strip()


def _container(target: str) -> Iterator[ImageContainer]:
    image = IMAGES[target]
    if not image_present(image):
        message = f"{image} is not in buildah's store: run `make image`"
        if os.environ.get("SPARKPOINT_REQUIRE_IMAGES") == "1":
            pytest.fail(message)
        pytest.skip(message)
    name = f"sparkpoint-test-{target}-{uuid.uuid4().hex[:8]}"
    subprocess.run(["buildah", "from", "--pull-never", "--name", name, image], check=True, capture_output=True)
    try:
        yield ImageContainer(image, name)
    finally:
        subprocess.run(["buildah", "rm", name], capture_output=True)


@pytest.fixture(scope="module")
def operator_image() -> Iterator[ImageContainer]:
    yield from _container("operator")


@pytest.fixture(scope="module")
def runtime_image() -> Iterator[ImageContainer]:
    yield from _container("runtime")


@pytest.fixture
def scratch(tmp_path: Path) -> Path:
    """A host dir the image's uid 185 can write (mounted as the container's /tmp and work dirs)."""
    tmp_path.chmod(0o777)
    return tmp_path
