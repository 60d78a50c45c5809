"""Pure parts of the Kafka -> Delta benchmark (bench/kafka_bench.py, bench/kafka_delta/): events/s from
batch logs, produce-to-commit latency read from a Delta log and from Spark's file sink log in a real
directory store, and the report's ratios."""

from __future__ import annotations

import json
import os
import sys
from datetime import UTC, datetime
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "bench"))

import kafka_bench  # noqa: E402
from kafka_delta import latency, render  # noqa: E402

from sparkpoint.runtime.store import open_store  # noqa: E402


def parquet(path: Path, produced: list[float]) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    column = pa.array([datetime.fromtimestamp(t, UTC) for t in produced], pa.timestamp("us", tz="UTC"))
    pq.write_table(pa.table({"id": list(range(len(produced))), "produced": column}), path)


def entry(path: Path, text: str, committed_at: float) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text)
    os.utime(path, (committed_at, committed_at))


def test_latency_from_delta_versions_counts_each_row_at_its_commit(tmp_path):
    table = tmp_path / "default/job/outputs/events"
    parquet(table / "staging/attempt-1/batch-0-a/part-0.parquet", [100.0, 101.0])
    parquet(table / "staging/attempt-1/batch-1-a/part 1.parquet", [105.0])  # a name Delta URL-encodes
    entry(table / "_delta_log/00000000000000000000.json",
          json.dumps({"commitInfo": {}}) + "\n" + json.dumps({"add": {"path": "staging/attempt-1/batch-0-a/part-0.parquet"}}),
          110.0)
    entry(table / "_delta_log/00000000000000000001.json",
          json.dumps({"add": {"path": "staging/attempt-1/batch-1-a/part%201.parquet"}}), 112.5)
    store = open_store(f"file://{tmp_path}")
    commits = latency.delta_commits(store, "default/job/outputs/events")
    got = sorted(latency.latencies(store, commits))
    assert got == [7.5, 9.0, 10.0]
    assert sorted(latency.latencies(store, commits, since=101.0)) == [7.5, 9.0]  # the warm-up row left out
    assert latency.summary(got) == {"rows": 3, "p50": 9.0, "p95": 10.0, "p99": 10.0, "max": 10.0, "mean": 8.833}


def test_latency_from_the_file_sink_log_counts_compacted_files_once(tmp_path):
    out = tmp_path / "run/out"
    parquet(out / "part-a.parquet", [10.0])
    parquet(out / "part-b.parquet", [20.0, 21.0])

    def log(*names: str) -> str:
        return "v1\n" + "\n".join(json.dumps({"path": f"s3a://bench/run/out/{n}", "action": "add"}) for n in names)
    entry(out / "_spark_metadata/0", log("part-a.parquet"), 12.0)
    entry(out / "_spark_metadata/1.compact", log("part-a.parquet", "part-b.parquet"), 23.0)  # repeats part-a
    store = open_store(f"file://{tmp_path}")
    commits = latency.file_sink_commits(store, "run/out", latency.s3a_key(""))
    assert [keys for _, keys in commits] == [["run/out/part-a.parquet"], ["run/out/part-b.parquet"]]
    assert sorted(latency.latencies(store, commits)) == [2.0, 2.0, 3.0]


def test_throughput_skips_the_warm_up_and_the_empty_batches():
    batches = [{"batch": i, "rows": rows, "seconds": 1.0, "ts": ts}
               for i, (rows, ts) in enumerate([(100, 10.0), (100, 12.0), (100, 13.0), (100, 14.0), (100, 16.0),
                                               (0, 30.0)])]
    got = kafka_bench.throughput(batches, warmup=2)
    assert got == {"events_per_s": 66.7, "batches": 2, "median_batch_s": 1.0}  # 200 events from t=13 to t=16
    assert kafka_bench.throughput(batches[:3], warmup=2)["events_per_s"] is None


def test_committed_all_waits_for_sparkpoints_checkpoint_of_the_last_batch():
    batches = [{"batch": 0, "rows": 5}, {"batch": 1, "rows": 5}]
    assert not kafka_bench.committed_all(11, "vanilla-parquet")(batches, [])
    assert kafka_bench.committed_all(10, "vanilla-parquet")(batches, [])
    assert not kafka_bench.committed_all(10, "sparkpoint-delta")(batches, [{"batch": 0}])
    assert kafka_bench.committed_all(10, "sparkpoint-delta")(batches, [{"batch": 0}, {"batch": 1}])


def test_report_pairs_rounds_side_by_side():
    runs = [{"setup": "sparkpoint-delta", "round": 0, "events_per_s": 900.0, "checkpoints": [{"seconds": 1.0}]},
            {"setup": "vanilla-parquet", "round": 0, "events_per_s": 600.0, "checkpoints": [{"seconds": 0.2}]},
            {"setup": "sparkpoint-delta", "round": 1, "events_per_s": 800.0},
            {"setup": "vanilla-parquet", "round": 1, "events_per_s": None}]  # a failed run pairs with nothing
    assert render.round_ratios(runs) == [1.5]
    raw = {"plan": {"latency_ms": 20, "partitions": 2, "trigger": "100ms", "interval": "10s", "backlog": 1000,
                    "max_offsets": 100, "rounds": 2, "rate": 50, "seconds": 10},
           "throughput": runs, "latency": [{"setup": "sparkpoint-delta", "produced": 500, "rows": 500, "p50": 6.0,
                                            "p95": 10.5, "p99": 11.0, "max": 11.2}], "loads": ["1.0", "2.0"]}
    text = render.render(raw, "<s>", "<e>")
    assert text.startswith("<s>") and text.endswith("<e>")
    assert "per round (side by side): 1.50; median 1.50" in text
    assert "| sparkpoint-delta | 500 | 500 | 6.00 | 10.50 | 11.00 | 11.20 |" in text
