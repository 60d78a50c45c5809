"""A StreamingJob whose spec.image is the locally built sparkpoint/runtime:dev: on the local
cluster the node agent runs its containers chrooted into that image (image mode), so this is the
real image's runtime and GC sidecar reaching checkpoints in the cluster's MinIO, as uid 185.

Needs `make image` (make test builds it first); without the image the test skips, or fails when
SPARKPOINT_REQUIRE_IMAGES=1."""

from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path

import pytest
from operator_jobs import Jobs

RUNTIME_IMAGE = "sparkpoint/runtime:dev"


def require_image(image: str) -> None:
    present = shutil.which("buildah") and subprocess.run(
        ["buildah", "inspect", "--type", "image", image], capture_output=True).returncode == 0
    if not present:
        if os.environ.get("SPARKPOINT_REQUIRE_IMAGES") == "1":
            pytest.fail(f"{image} is not in buildah's store: run `make image`")
        pytest.skip(f"{image} is not in buildah's store: run `make image`")


def container_pid(pod, name: str) -> int:
    status = next(c for c in pod.status.container_statuses if c.name == name)
    assert status.container_id and status.container_id.startswith("sparkpoint://"), status
    return int(status.container_id.rsplit("/", 1)[1])


def proc_ids(pid: int) -> tuple[int, int]:
    fields = dict(line.split(":", 1) for line in Path(f"/proc/{pid}/status").read_text().splitlines())
    return int(fields["Uid"].split()[1]), int(fields["Gid"].split()[1])


@pytest.mark.timeout(600)
def test_job_from_the_runtime_image_reaches_checkpoints(api_client, core, namespace, operator, store_env):
    require_image(RUNTIME_IMAGE)
    jobs = Jobs(api_client, namespace, store_env)
    jobs.create("imaged", image=RUNTIME_IMAGE)
    st = jobs.wait_status("imaged", "a completed checkpoint in status",
                          lambda s: len(s.get("checkpoints") or []) >= 1, timeout=420, operator=operator)
    assert st["latestCheckpoint"]["bytes"] > 0
    pod = core.read_namespaced_pod(st["pod"], namespace)
    for name in ("runtime", "gc"):
        pid = container_pid(pod, name)
        # The process sees the image's root (its JRE stamp, its Spark layout), not the host's.
        assert os.readlink(f"/proc/{pid}/root") != "/", name
        root = Path(f"/proc/{pid}/root")
        assert (root / "opt/sparkpoint/jre-version").is_file(), name
        assert (root / "opt/spark/work-dir").is_dir(), name
        assert proc_ids(pid) == (185, 185), name
