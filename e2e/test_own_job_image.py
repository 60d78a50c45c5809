"""Issue 44's "your own job on a cluster", as a user follows it (README.md): examples/own-job's image,
built FROM the runtime image by `make own-job-image` (scripts/build-own-job-image.sh, buildah) with a
dependency the runtime image lacks (humanize, examples/own-job/requirements.txt), made available to the
local cluster's node (`cluster.py import-image`: into the real node's containerd the way `make image`'s
images are; the node agent runs sparkpoint/*:dev from buildah's store), run as a StreamingJob, which
checkpoints: its driver imports humanize at start and Spark's Python workers in every batch.

Needs `make image` (the runtime image); without it the test skips, or fails when
SPARKPOINT_REQUIRE_IMAGES=1. The build installs humanize with pip, so it needs the package index."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest
import yaml
from kube_helpers import STATE_DIR
from operator_jobs import Jobs
from test_image_mode import require_image

REPO = Path(__file__).resolve().parents[1]
EXAMPLE = REPO / "examples" / "own-job"
RUNTIME_IMAGE = os.environ.get("SPARKPOINT_E2E_RUNTIME_IMAGE", "sparkpoint/runtime:dev")
OWN_IMAGE = "sparkpoint/own-job-e2e:dev"  # sparkpoint/*:dev: the node agent runs it too
NAME = "own-job"


@pytest.mark.slow
@pytest.mark.timeout(1500)
def test_a_job_image_built_from_the_runtime_image_with_its_own_dependency_checkpoints(
        api_client, namespace, operator, store_env):
    if os.environ.get("SPARKPOINT_E2E_CLUSTER") == "kind":
        pytest.skip("images reach kind's node through e2e/kind/local.sh, not cluster.py import-image")
    require_image(RUNTIME_IMAGE)
    build = subprocess.run([str(REPO / "scripts" / "build-own-job-image.sh")], capture_output=True, text=True,
                           timeout=900, env={**os.environ, "RUNTIME_IMAGE": RUNTIME_IMAGE, "OWN_JOB_IMAGE": OWN_IMAGE})
    assert build.returncode == 0, f"make own-job-image failed:\n{build.stdout[-2000:]}\n{build.stderr[-3000:]}"
    imported = subprocess.run([sys.executable, str(REPO / "e2e" / "local" / "cluster.py"), "import-image", OWN_IMAGE,
                               "--state", str(STATE_DIR)], capture_output=True, text=True, timeout=600)
    assert imported.returncode == 0, f"cluster.py import-image failed:\n{imported.stderr[-3000:]}"

    example = yaml.safe_load((EXAMPLE / "streamingjob.yaml").read_text())["spec"]
    jobs = Jobs(api_client, namespace, store_env)
    jobs.create(NAME, image=OWN_IMAGE, job=example["job"])  # the example's job, this test's store and sizes
    st = jobs.wait_status(NAME, "a completed checkpoint in status", lambda s: len(s.get("checkpoints") or []) >= 1,
                          timeout=600, operator=operator)
    assert st["latestCheckpoint"]["bytes"] > 0
    # Batches ran (each calls the humanize UDF in a Python worker) and the job is still up after them.
    st = jobs.wait_status(NAME, "a second checkpoint, the job Running", lambda s: len(s.get("checkpoints") or []) >= 2
                          and s.get("phase") == "Running", timeout=240, operator=operator)
    assert st.get("restarts", 0) == 0, st
