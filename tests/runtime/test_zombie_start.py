"""A runtime of an older attempt started late (its pod's container restarted in place on a node the
operator gave up on, after the next attempt started) does not claim the store fence: it would fence
off the newer attempt. The real `sparkpoint run`, a directory store, no Spark needed (it stops first)."""

from __future__ import annotations

import os
import subprocess
import sys

from sparkpoint.runtime.checkpoint import read_fence, write_fence
from sparkpoint.runtime.store import JobRef, open_store


def _run(tmp_path, store_url: str, attempt: str) -> subprocess.CompletedProcess[str]:  # type: ignore[no-untyped-def]
    job = tmp_path / "job.yaml"
    job.write_text("job:\n  entrypoint: sparkpoint.examples.windowed_aggregation:build\n"
                   f"checkpoint:\n  storage:\n    url: {store_url}\n")
    env = {**os.environ, "SPARKPOINT_JOB_UID": "uid-1", "SPARKPOINT_ATTEMPT": attempt, "JAVA_HOME": "/nonexistent"}
    return subprocess.run([sys.executable, "-m", "sparkpoint.runtime.cli", "run", str(job), "--namespace", "ns",
                           "--name", "clicks", "--work-dir", str(tmp_path / f"w{attempt}"), "--port", "0"],
                          capture_output=True, text=True, timeout=120, env=env)


def test_a_runtime_of_an_older_attempt_does_not_start_over_a_newer_one(tmp_path) -> None:  # type: ignore[no-untyped-def]
    url = f"file://{tmp_path / 'store'}"
    store, job = open_store(url), JobRef("ns", "clicks")
    write_fence(store, job, incarnation="uid-1", launch=1)
    newer = write_fence(store, job, incarnation="uid-1", launch=2)
    r = _run(tmp_path, url, attempt="1")
    assert r.returncode == 0, r.stderr[-2000:]
    assert "superseded by a newer attempt" in r.stderr and "attempt 2 of this job has started since" in r.stderr
    assert read_fence(store, job) == newer  # it claimed nothing: attempt 2 still commits
