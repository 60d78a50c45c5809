"""A job whose staged output fills the sink's local budget long before its checkpoint interval
comes round: the waiting batch asks for a checkpoint, which publishes the output, and the job goes
on. Before, it waited for the interval (the peer benchmark's floor, interval 24h, stalled at 1 GiB
of output). Real Spark, real runtime process."""

from __future__ import annotations

import pytest

from harness.runtime_job import RuntimeProcess, WindowedJob, canonical
from sparkpoint.runtime.sink.transactional import read_committed
from sparkpoint.runtime.store import JobRef, open_store

from .test_recovery_spark import log_lines

pytestmark = [pytest.mark.spark]


def test_staged_output_over_budget_gets_a_checkpoint_instead_of_waiting_for_the_interval(tmp_path):
    # 2 s windows: a window's output (200 keys) closes every other batch and is larger than the
    # 4 KiB budget, so each emission after the first waits on the one before being published.
    job = WindowedJob(name="budget", rows_per_batch=400, keys=200, total_batches=12, window_seconds=2,
                      watermark_seconds=1, trigger="300ms", checkpoint_interval="1h")
    job_file = job.write(tmp_path / "job.yaml", f"file://{tmp_path / 'store'}")
    log = tmp_path / "runtime.log"
    p = RuntimeProcess(job_file, tmp_path / "pod", log, until_batch=job.until_batch,
                       env={"SPARKPOINT_SINK_STAGED_BUDGET": "4Ki", "TZ": "UTC"}).start()
    try:
        code = p.wait(180)
    finally:
        p.kill()
    events = log_lines(log)
    assert code == 0, log.read_text()[-3000:]
    waits = [e for e in events if e.get("msg") == "staged output over budget; waiting for a checkpoint to publish"]
    assert waits and all(e["checkpoint_requested"] for e in waits)
    budget = [e["request"] for e in events if e.get("msg") == "checkpoint request finished"
              and e["request"]["trigger"] == "sink-budget" and e["request"]["status"] == "completed"]
    assert budget, "no checkpoint was taken for the sink's budget"
    rows = read_committed(open_store(f"file://{tmp_path / 'store'}"), JobRef("default", "budget"))
    assert canonical(rows) == job.expected_rows()  # nothing lost or doubled by the early publishes
