"""Reading committed output: `read_committed` and `sparkpoint output read|files`, both formats,
both store backends (Spark's part files are stood in for by tests.runtime.test_sink.fake_write_files)."""

from __future__ import annotations

import json

import pytest

from sparkpoint.runtime.checkpoint import write_fence
from sparkpoint.runtime.cli import main
from sparkpoint.runtime.sink.journal import SinkJournal
from sparkpoint.runtime.sink.reader import committed_files, read_committed
from sparkpoint.runtime.sink.transactional import TransactionalSink

from .test_sink import FakeBatch, fake_write_files


def _publish(store, job, tmp_path, fmt: str, batches: dict[int, list[dict]], path: str = "default") -> None:
    sink = TransactionalSink(store, job, attempt=write_fence(store, job), path=path, fmt=fmt,
                             journal=SinkJournal(tmp_path / f"journal-{fmt}"), write_files=fake_write_files)
    sink.resume(None, None)
    for b, rows in batches.items():
        sink.write_batch(FakeBatch(rows), b)
    extra = sink.manifest_extra(max(batches))
    sink.upload_staged(extra)
    sink.publish("chk-000001", extra)


@pytest.mark.parametrize("fmt", ["parquet", "jsonl"])
def test_both_formats_read_back_exactly_the_committed_rows(store, job, tmp_path, fmt):
    rows = {0: [{"k": 1, "s": "a", "x": 0.5}, {"k": 2, "s": "b", "x": None}], 1: [], 2: [{"k": 3, "s": "c", "x": 2.0}]}
    _publish(store, job, tmp_path, fmt, rows)
    assert read_committed(store, job) == [r for b in (0, 2) for r in rows[b]]
    files = committed_files(store, job)
    assert [(f["batch"], f["rows"], f["format"]) for f in files] == [(0, 2, fmt), (2, 1, fmt)]
    suffix = ".parquet" if fmt == "parquet" else ".json"
    assert all(k.endswith(suffix) and "/staging/attempt-" in k for f in files for k in f["keys"])


def test_cli_output_read_and_files(store_url, store, job, tmp_path, capsys):
    _publish(store, job, tmp_path, "parquet", {0: [{"v": 0}, {"v": 1}], 1: [{"v": 2}]}, path="agg/out")
    args = ["--store", store_url, "--job", str(job), "--path", "agg/out"]
    assert main(["output", "read", *args, "--json"]) == 0
    doc = json.loads(capsys.readouterr().out)
    assert doc["rows"] == [{"v": 0}, {"v": 1}, {"v": 2}] and doc["head"] == "chk-000001"
    assert doc["rows_committed"] == 3 and [b["batch"] for b in doc["batches"]] == [0, 1]
    assert main(["output", "read", *args, "--limit", "2"]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert lines[0].startswith("#") and "2 committed" in lines[0] and "3 rows" in lines[0]
    assert [json.loads(line) for line in lines[1:]] == [{"v": 0}, {"v": 1}]
    assert main(["output", "files", *args]) == 0
    assert capsys.readouterr().out.startswith("batch 0: 2 rows, parquet: ")
    assert main(["output", "read", "--store", store_url, "--job", str(job), "--json"]) == 0  # another path: empty
    assert json.loads(capsys.readouterr().out)["rows"] == []
