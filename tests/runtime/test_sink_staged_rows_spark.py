"""A stale listing of a batch folder with real Spark and MinIO (issue 42, finding 1): every sink.

`SPARKPOINT_FAULT_STALE_LISTING` makes the driver's first listings of a batch folder leave a part
file out, as an NFS listing may when another node just wrote it; the part is on disk, only the
listing is stale. The check the sinks run (the parts' Parquet footers against the rows Spark's
Observation counted) is the real one: the batch is written again, and the committed output equals
the failure-free result computed independently (harness.runtime_job.WindowedJob.expected_rows); a
batch listed short on every try fails, and the restarted job commits it whole.
With the check taken out this test fails: the short batch is staged and committed."""

from __future__ import annotations

import json
import time

import pytest
import yaml

from harness.runtime_job import RuntimeProcess, WindowedJob, canonical
from sparkpoint.runtime.sink.transactional import read_committed
from sparkpoint.runtime.sink.upsert import read_upserted
from sparkpoint.runtime.store import JobRef, open_store
from tests.conftest import TEST_BUCKET

from .test_recovery_spark import log_lines

pytestmark = [pytest.mark.spark, pytest.mark.slow, pytest.mark.timeout(1800)]

TRIES = 3  # batch_files.WRITE_TRIES


def _run(job_file, work_dir, log, until_batch, env, hidden: int) -> tuple[int, list[dict]]:
    p = RuntimeProcess(job_file, work_dir, log, until_batch=until_batch,
                       env={**env, "TZ": "UTC", "SPARKPOINT_FAULT_STALE_LISTING": str(hidden)}).start()
    try:
        code = p.wait(1500)  # generous: a loaded machine starts a JVM in minutes
    finally:
        p.kill()
    return code, log_lines(log)


def _messages(events: list[dict], prefix: str) -> list[dict]:
    return [e for e in events if str(e.get("msg", "")).startswith(prefix)]


# CI runs the transactional case (two runtime starts, about a minute); the others share its path.
@pytest.mark.parametrize("kind", [pytest.param("transactional", marks=pytest.mark.ci_sample), "delta", "upsert"])
def test_a_part_missing_from_the_listing_never_commits_a_short_batch(tmp_path, minio_env, kind):
    job = WindowedJob(name=f"stale-{kind}", rows_per_batch=400, keys=40, total_batches=8, window_seconds=2,
                      watermark_seconds=1, trigger="300ms", checkpoint_interval="2s")
    url = f"s3://{TEST_BUCKET}/stale-listing-{kind}-{time.time_ns()}"
    spec = job.spec(url)
    spec["spec"]["spark"]["shufflePartitions"] = 4  # an emitted window has several parts: one can hide
    spec["spec"]["job"]["sink"] = {"kind": kind, "path": "table",
                                   **({"keyColumns": ["window", "key"]} if kind == "upsert" else {})}
    job_file = tmp_path / "job.yaml"
    job_file.write_text(yaml.safe_dump(spec))

    # 1. The first emitted batch is listed short on every try: it fails, and nothing of it is committed.
    code, events = _run(job_file, tmp_path / "pod", tmp_path / "run-1.log", job.until_batch, minio_env, TRIES)
    assert code != 0, "a batch listed short on every try was staged"
    assert len(_messages(events, "fault injection: a stale listing hides")) == TRIES
    assert len(_messages(events, "a batch's part files hold other than the rows")) == TRIES
    assert "StagedOutputIncomplete" in (tmp_path / "run-1.log").read_text()

    # 2. The restart (local recovery on the same work dir, as a restarted container) re-runs that batch;
    # its first two listings are short again, the third is whole, and the job runs to its end.
    code, events = _run(job_file, tmp_path / "pod", tmp_path / "run-2.log", job.until_batch, minio_env, TRIES - 1)
    assert code == 0, (tmp_path / "run-2.log").read_text()[-3000:]
    rewrites = _messages(events, "a batch's part files hold other than the rows")
    assert len(rewrites) == TRIES - 1 and all(e["rows_in_parts"] < e["counted_rows"] for e in rewrites)

    store, ref = open_store(url, env=minio_env), JobRef("default", job.name)
    expected = job.expected_rows()
    if kind == "upsert":  # the folded table: the final aggregate of every closed window
        table = read_upserted(store, ref, "table", ["window", "key"])
        closed = {json.loads(k)[0] for k in expected}
        got = {k: n for k, n in canonical(list(table.values())).items() if json.loads(k)[0] in closed}
        assert got == dict(expected)
        return
    assert canonical(read_committed(store, ref, "table")) == expected  # nothing missing, nothing doubled
    if kind == "delta":  # the Delta table too, read by delta-rs
        from deltalake import DeltaTable

        from sparkpoint.runtime.sink.delta_table import delta_location
        from sparkpoint.runtime.sink.keys import sink_root

        loc = delta_location(store, sink_root(ref, "table"))
        rows = DeltaTable(loc.uri, storage_options=loc.storage_options).to_pyarrow_table().to_pylist()
        got = sorted((r["key"], r["events"], r["value_sum"]) for r in rows)
        assert got == sorted((k, n, total) for k, n, total in (json.loads(e)[1:] for e in expected.elements()))
