"""A freeze whose state listing is stale, with real Spark (issue 42, finding 2).

`SPARKPOINT_FAULT_STALE_STATE_LISTING` makes the first freezes list one store directory without its
newest changelog, as a stale NFS listing would; the files are on disk, only the listing misses one.
state_gaps, the real check, refuses that set: those checkpoints fail with the reason named, the job
goes on, a later checkpoint completes, and what it stored restores into a hot dir that local
recovery's check accepts. The committed output equals the failure-free result."""

from __future__ import annotations

import pytest

from harness.runtime_job import RuntimeProcess, WindowedJob, canonical
from sparkpoint.runtime.checkpoint.freeze import check_restartable
from sparkpoint.runtime.checkpoint.restore import restore
from sparkpoint.runtime.sink.transactional import read_committed
from sparkpoint.runtime.store import JobRef, open_store

from .test_recovery_spark import log_lines

pytestmark = [pytest.mark.spark, pytest.mark.slow, pytest.mark.ci_sample, pytest.mark.timeout(1800)]

STALE = 2


def test_a_freeze_that_misses_a_changelog_fails_its_checkpoint_and_the_next_one_completes(tmp_path):
    job = WindowedJob(name="stale-state", rows_per_batch=400, keys=40, total_batches=10, window_seconds=2,
                      watermark_seconds=1, trigger="500ms", checkpoint_interval="1s")
    url = f"file://{tmp_path / 'store'}"
    job_file = job.write(tmp_path / "job.yaml", url)
    log = tmp_path / "runtime.log"
    p = RuntimeProcess(job_file, tmp_path / "pod", log, until_batch=job.until_batch,
                       env={"TZ": "UTC", "SPARKPOINT_FAULT_STALE_STATE_LISTING": str(STALE)}).start()
    try:
        code = p.wait(1500)  # generous: a loaded machine starts a JVM in minutes
    finally:
        p.kill()
    assert code == 0, log.read_text()[-3000:]
    finished = [e["request"] for e in log_lines(log) if e.get("msg") == "checkpoint request finished"]
    failed = [r for r in finished if r["status"] == "failed"]
    assert len(failed) == STALE, finished
    for r in failed:  # named: which store and which versions are not there (or, when the hidden file
        # was its store's only one, which partition has no store)
        assert r["error"].startswith("freeze: FreezeError: state/"), r
        assert "are not there" in r["error"] or "have no state files" in r["error"], r
    completed = [r for r in finished if r["status"] == "completed"]
    assert completed and finished.index(completed[0]) > finished.index(failed[0])

    store, ref = open_store(url), JobRef("default", job.name)
    restored = restore(store, ref, tmp_path / "restored")
    assert check_restartable(tmp_path / "restored") == restored.manifest.batch_id
    assert canonical(read_committed(store, ref)) == job.expected_rows()
