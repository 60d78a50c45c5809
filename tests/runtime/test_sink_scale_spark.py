"""One micro-batch whose output is several times the driver's heap: the transactional sink stages it
as files Spark's executors write, the checkpoint streams them to MinIO, and the committed view has
every row. When the sink collected batches on the driver (`df.collect()`) this job could not finish
with this heap. Real Spark (local[2], heap 512m: Spark's floor is 450m), real runtime process,
real MinIO. Measured figures go to the log line `scale:` (docs/reliability.md quotes them)."""

from __future__ import annotations

import json
import time
from pathlib import Path

import pyarrow.parquet as pq
import pytest
import yaml

from harness.runtime_job import RuntimeProcess
from sparkpoint.runtime.sink.reader import committed_files, iter_committed
from sparkpoint.runtime.store import JobRef, open_store
from tests.conftest import TEST_BUCKET

from .test_recovery_spark import log_lines

pytestmark = [pytest.mark.spark, pytest.mark.slow, pytest.mark.ci_sample]

ROWS = 6_000_000  # about 1.2 GB of Parquet: sha2 hex text barely compresses
HEAP = "512m"

JOB_CODE = '''
from pyspark.sql import functions as F

def build(spark, rows):
    src = (spark.readStream.format("rate-micro-batch").option("rowsPerBatch", rows)
           .option("numPartitions", 4).load())
    v = F.col("value")
    # rate-micro-batch emits `rows` rows every batch: only batch 0's are output
    return src.where(v < rows).select(v.alias("id"), F.sha2(v.cast("string"), 256).alias("a"),
                      F.sha2((v * 7).cast("string"), 512).alias("b"))
'''


def run_big_batch(tmp_path: Path, url: str, env: dict[str, str], *, sink: dict | None = None,
                  wait_seconds: float = 1500, stdout_path: Path | None = None,
                  extra_args: tuple[str, ...] = ()) -> tuple[Path, float]:
    """Run JOB_CODE's batch 0 (ROWS rows) through a real runtime process with a HEAP driver, drain,
    and require exit 0: (the runtime's log, the seconds it took). `sink`: the spec's (None: the default)."""
    (tmp_path / "code").mkdir()
    (tmp_path / "code" / "big_batch.py").write_text(JOB_CODE)
    job: dict = {"entrypoint": "big_batch:build", "args": {"rows": ROWS},
                 "pythonPath": [str(tmp_path / "code")], "triggerInterval": "5s"}
    if sink is not None:
        job["sink"] = sink
    spec = {"apiVersion": "sparkpoint.dev/v1alpha1", "kind": "StreamingJob",
            "metadata": {"name": "big", "namespace": "default"},
            "spec": {"job": job, "spark": {"master": "local[2]"},
                     "checkpoint": {"interval": "1h", "timeout": "30m", "storage": {"url": url}}}}
    job_file = tmp_path / "job.yaml"
    job_file.write_text(yaml.safe_dump(spec))
    log = tmp_path / "runtime.log"
    started = time.monotonic()
    p = RuntimeProcess(job_file, tmp_path / "pod", log, until_batch=0, stdout_path=stdout_path,
                       env={**env, "SPARKPOINT_DRIVER_MEMORY": HEAP}, extra_args=extra_args).start()
    try:
        code = p.wait(wait_seconds)
    finally:
        p.kill()
    seconds = time.monotonic() - started
    assert code == 0, log.read_text()[-4000:]
    return log, seconds


def test_a_batch_far_larger_than_the_driver_heap_is_committed(tmp_path: Path, minio_env):
    url = f"s3://{TEST_BUCKET}/scale-{time.time_ns()}"
    log, seconds = run_big_batch(tmp_path, url, {**minio_env, "SPARKPOINT_SINK_STAGED_BUDGET": "4Gi"},
                                 extra_args=("--grace", "10m"))  # the drain's checkpoint uploads > 1 GiB

    store = open_store(url, env=minio_env)
    job = JobRef("default", "big")
    files = committed_files(store, job)
    assert [f["batch"] for f in files] == [0] and files[0]["rows"] == ROWS and files[0]["format"] == "parquet"
    stored = sum(store.stat(k).size for k in files[0]["keys"])
    assert stored > 1 << 30, f"only {stored} bytes: the test no longer dwarfs the heap"
    # Every row is there exactly once: ids 0..ROWS-1, checked from the stored files one at a time.
    ids_sum, rows = 0, 0
    for key in files[0]["keys"]:
        local = tmp_path / "part.parquet"
        store.get_file(key, str(local))
        parquet = pq.ParquetFile(local)
        rows += parquet.metadata.num_rows
        for group in range(parquet.num_row_groups):
            ids_sum += sum(parquet.read_row_group(group, columns=["id"]).column("id").to_pylist())
        local.unlink()
    assert rows == ROWS and ids_sum == ROWS * (ROWS - 1) // 2
    first = next(iter_committed(store, job))
    assert set(first) == {"id", "a", "b"} and len(first["b"]) == 128

    events = log_lines(log)
    batch = next(e for e in events if e.get("msg") == "batch completed" and e.get("batchId") == 0)
    ckpt = [e["request"] for e in events if e.get("msg") == "checkpoint request finished"
            and e["request"]["status"] == "completed"]
    print("scale:", json.dumps({"heap": HEAP, "rows": ROWS, "stored_bytes": stored, "parts": len(files[0]["keys"]),
                                "batch_seconds": batch["durationSeconds"],
                                "checkpoints": [{k: c.get(k) for k in ("id", "batchId", "asyncSeconds", "uploadSeconds")}
                                                for c in ckpt],
                                "total_seconds": round(seconds, 1)}))
