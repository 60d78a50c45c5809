"""The upsert and console sinks with one micro-batch several times the driver's heap (the transactional
sink's twin is test_sink_scale_spark.py, whose job this reuses). Both used to collect each batch on
the driver (`df.collect()`); now Spark's executors write the batch as files and the driver streams
them, to the store (upsert) or to stdout (console). Real Spark (local[2], heap 512m: Spark's floor is
450m), real runtime process; the upsert sink's store is real MinIO. Figures go to the log line
`scale:` (docs/reliability.md quotes them)."""

from __future__ import annotations

import json
import re
import time
from pathlib import Path

import pyarrow.parquet as pq
import pytest

from sparkpoint.runtime.sink.keys import sink_root
from sparkpoint.runtime.sink.upsert import iter_upserted_rows
from sparkpoint.runtime.sink.upsert_files import visible_batches
from sparkpoint.runtime.store import JobRef, open_store
from tests.conftest import TEST_BUCKET

from .test_sink_scale_spark import HEAP, ROWS, run_big_batch

pytestmark = [pytest.mark.spark, pytest.mark.slow, pytest.mark.timeout(2400)]

_CONSOLE_ROW = re.compile(rb'^\{"id":(\d+),"a":"[0-9a-f]{64}","b":"[0-9a-f]{128}"\}$')


def _batch_seconds(log: Path) -> float:
    with open(log, "rb") as f:
        for line in f:
            if line.startswith(b"{") and b'"batch completed"' in line:
                event = json.loads(line)
                if event.get("batchId") == 0:
                    return float(event["durationSeconds"])
    raise AssertionError("no 'batch completed' line for batch 0")


def test_an_upsert_batch_far_larger_than_the_driver_heap_is_visible(tmp_path: Path, minio_env):
    url = f"s3://{TEST_BUCKET}/scale-upsert-{time.time_ns()}"
    log, seconds = run_big_batch(tmp_path, url, minio_env, sink={"kind": "upsert", "keyColumns": ["id"]},
                                 wait_seconds=1800, stdout_path=tmp_path / "stdout")
    store, job = open_store(url, env=minio_env), JobRef("default", "big")
    [(marker, files)] = visible_batches(store, store.list(f"{sink_root(job, 'default')}/upserts/"))
    stored = sum(store.stat(k).size for k, _ in files)
    assert stored > 1 << 30, f"only {stored} bytes: the test no longer dwarfs the heap"
    assert json.loads(store.get_bytes(marker))["rows"] == ROWS
    # The files the reader folds (visible_batches is its resolution) hold every id exactly once,
    # read from the store one file and one row group at a time, as the reader does.
    rows, ids_sum, ids_xor = 0, 0, 0
    started = time.monotonic()
    for key, fmt in files:
        assert fmt == "parquet"
        local = tmp_path / "part.parquet"
        store.get_file(key, str(local))
        parquet = pq.ParquetFile(local)
        for group in range(parquet.num_row_groups):
            for v in parquet.read_row_group(group, columns=["id"]).column("id").to_pylist():
                rows, ids_sum, ids_xor = rows + 1, ids_sum + v, ids_xor ^ v
        local.unlink()
    read_seconds = time.monotonic() - started
    assert rows == ROWS and ids_sum == ROWS * (ROWS - 1) // 2
    assert ids_xor == _xor_upto(ROWS - 1)
    first = next(iter_upserted_rows(store, job, "default"))
    assert set(first) == {"id", "a", "b"} and len(first["b"]) == 128
    print("scale:", json.dumps({"sink": "upsert", "heap": HEAP, "rows": ROWS, "stored_bytes": stored,
                                "parts": len(files), "batch_seconds": _batch_seconds(log),
                                "read_seconds": round(read_seconds, 1), "total_seconds": round(seconds, 1)}))


def test_a_console_batch_far_larger_than_the_driver_heap_is_printed(tmp_path: Path):
    log, seconds = run_big_batch(tmp_path, f"file://{tmp_path / 'store'}", {}, sink={"kind": "console"},
                                 wait_seconds=1800, stdout_path=tmp_path / "stdout")
    rows, ids_sum, ids_xor, header = 0, 0, 0, None
    with open(tmp_path / "stdout", "rb") as f:  # the console's rows, apart from the log
        for line in f:
            if m := _CONSOLE_ROW.match(line.rstrip(b"\n")):
                v = int(m.group(1))
                rows, ids_sum, ids_xor = rows + 1, ids_sum + v, ids_xor ^ v
            elif line.startswith(b"# batch 0:"):
                header = line.decode().strip()
    assert header == f"# batch 0: {ROWS} rows"
    assert rows == ROWS and ids_sum == ROWS * (ROWS - 1) // 2 and ids_xor == _xor_upto(ROWS - 1)
    printed = (tmp_path / "stdout").stat().st_size
    assert printed > 1 << 30, f"only {printed} bytes printed: the test no longer dwarfs the heap"
    print("scale:", json.dumps({"sink": "console", "heap": HEAP, "rows": ROWS, "printed_bytes": printed,
                                "batch_seconds": _batch_seconds(log), "total_seconds": round(seconds, 1)}))


def _xor_upto(n: int) -> int:
    """0 ^ 1 ^ ... ^ n (a second check beside the sum: a lost row and a duplicate can't cancel in both)."""
    return [n, 1, n + 1, 0][n % 4]
