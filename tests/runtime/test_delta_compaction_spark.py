"""Compaction in a running runtime: real Spark, the real checkpoint pipeline and its maintenance thread,
a delta sink on a directory store. The job runs, the store keeps one checkpoint (a GC pass), the job
goes on from its work dir (local recovery) and compacts after its checkpoints; the table, read with
delta-rs and polars, and the entries' reader still hold exactly the failure-free rows."""

from __future__ import annotations

import json

import polars as pl
import pytest
import yaml
from deltalake import DeltaTable

from harness.runtime_job import RuntimeProcess, WindowedJob, canonical
from sparkpoint.runtime.checkpoint import gc_pass
from sparkpoint.runtime.sink.delta_table import COMPACTION_META
from sparkpoint.runtime.sink.reader import committed_files, read_committed
from sparkpoint.runtime.store import JobRef, open_store

pytestmark = [pytest.mark.spark, pytest.mark.slow, pytest.mark.timeout(3300)]


def test_a_running_job_compacts_its_table_and_keeps_its_rows(tmp_path):
    job = WindowedJob(name="compacting", rows_per_batch=200, keys=20, total_batches=12, window_seconds=2,
                      watermark_seconds=1, trigger="300ms", checkpoint_interval="1s")
    store_url = f"file://{tmp_path / 'store'}"
    spec = job.spec(store_url)
    spec["spec"]["job"]["sink"] = {"kind": "delta", "path": "table",
                                   "compaction": {"interval": "0s", "minFiles": 2}}
    job_file = tmp_path / "job.yaml"
    job_file.write_text(yaml.safe_dump(spec))
    store, ref = open_store(store_url), JobRef("default", "compacting")
    logs = []
    for n, until in enumerate((6, job.until_batch)):
        logs.append(tmp_path / f"runtime-{n}.log")
        p = RuntimeProcess(job_file, tmp_path / "pod", logs[-1], until_batch=until, env={"TZ": "UTC"}).start()
        try:
            code = p.wait(1500)  # generous: a loaded machine starts a JVM in minutes
        finally:
            p.kill()
        assert code == 0, logs[-1].read_text()[-3000:]
        if n == 0:  # the sidecar's pass: the newest checkpoint alone is kept
            gc_pass(store, ref, retain=1, grace_seconds=0)
    assert '"delta table compacted"' in logs[-1].read_text(), logs[-1].read_text()[-3000:]

    table_uri = str(tmp_path / "store" / "default" / "compacting" / "outputs" / "table")
    history = DeltaTable(table_uri).history()
    assert any(COMPACTION_META in commit for commit in history)
    files = committed_files(store, ref, "table")
    assert any("lastBatch" in f for f in files), files
    assert canonical(read_committed(store, ref, "table")) == job.expected_rows()
    by_rs = DeltaTable(table_uri).to_pyarrow_table().to_pylist()
    by_pl = pl.read_delta(table_uri).to_dicts()
    expected = job.expected_rows()
    for rows in (by_rs, by_pl):
        got = sorted((r["key"], r["events"], r["value_sum"]) for r in rows)
        assert got == sorted((k, n, total) for k, n, total in (json.loads(e)[1:] for e in expected.elements()))
