"""Vanilla Spark, the status quo: the same windowed aggregation with checkpointLocation=s3a://...
and the RocksDB state store. Runs in its own process (one JVM per run); prints one JSON line per
micro-batch (from the query's progress) and exits after `--until-batch`.

    python vanilla_job.py --checkpoint s3a://bench/x --endpoint http://127.0.0.1:9000 --jars a.jar,b.jar \
        --rows 5000 --keys 5000 --batches 25 [--changelog] [--format-version 2]
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time


def new_progress(query, seen: set[int]):  # -> Iterator[dict]
    """The query's progress reports of batches that ran and are not in `seen` (which it extends),
    oldest first. An idle trigger reports too, with the id of the batch that has not run yet and no
    addBatch: counting it as that batch hid the batch itself once it ran (the Kafka bench's latency
    run waited forever for the rows of a batch that came right after an idle trigger)."""
    for prog in query.recentProgress:
        if "addBatch" in prog["durationMs"] and prog["batchId"] not in seen:
            seen.add(prog["batchId"])
            yield prog


def state_operator(prog: dict) -> dict:
    """The first stateful operator's progress (empty when the query has none)."""
    return (prog.get("stateOperators") or [{}])[0]


def batch_event(prog: dict) -> dict:
    """The fields every vanilla job prints of a batch (the benchmarks parse these lines)."""
    return {"event": "batch", "batchId": prog["batchId"], "rows": prog["numInputRows"],
            "durationMs": prog["durationMs"], "stateCommitMs": state_operator(prog).get("commitTimeMs")}


def session(args: argparse.Namespace):  # -> SparkSession
    from pyspark.sql import SparkSession

    conf = {
        "spark.jars": args.jars,
        "spark.ui.enabled": "false",
        "spark.sql.shuffle.partitions": str(args.shuffle_partitions),
        "spark.sql.adaptive.enabled": "false",
        "spark.driver.memory": os.environ.get("SPARKPOINT_DRIVER_MEMORY", "1g"),
        "spark.sql.streaming.stateStore.providerClass":
            "org.apache.spark.sql.execution.streaming.state.RocksDBStateStoreProvider",
        "spark.sql.streaming.stateStore.rocksdb.changelogCheckpointing.enabled": str(args.changelog).lower(),
        "spark.sql.streaming.stateStore.minDeltasForSnapshot": "5",
        "spark.sql.streaming.stateStore.maintenanceInterval": "15s",
        # Vanilla's own cleanup: how many batches' offsets, commits and state versions it keeps.
        "spark.sql.streaming.minBatchesToRetain": str(args.min_batches_to_retain),
        "spark.hadoop.fs.s3a.endpoint": args.endpoint,
        "spark.hadoop.fs.s3a.endpoint.region": "us-east-1",
        "spark.hadoop.fs.s3a.path.style.access": "true",
        "spark.hadoop.fs.s3a.connection.ssl.enabled": "false",
        "spark.hadoop.fs.s3a.access.key": os.environ["AWS_ACCESS_KEY_ID"],
        "spark.hadoop.fs.s3a.secret.key": os.environ["AWS_SECRET_ACCESS_KEY"],
        "spark.hadoop.fs.s3a.aws.credentials.provider":
            "org.apache.hadoop.fs.s3a.SimpleAWSCredentialsProvider",
    }
    if args.format_version:
        conf["spark.sql.streaming.stateStore.checkpointFormatVersion"] = str(args.format_version)
    builder = SparkSession.builder.master("local[2]").appName("vanilla-bench")
    for k, v in conf.items():
        builder = builder.config(k, v)
    spark = builder.getOrCreate()
    spark.sparkContext.setLogLevel("ERROR")
    return spark


def spark_interval(text: str) -> str:
    """"100ms" / "1s" / "2m" -> what processingTime parses ("100 milliseconds", ...)."""
    for suffix, unit in (("ms", "milliseconds"), ("s", "seconds"), ("m", "minutes")):
        if text.endswith(suffix) and text[: -len(suffix)].isdigit():
            return f"{text[: -len(suffix)]} {unit}"
    return text


def main(argv: list[str]) -> int:
    p = argparse.ArgumentParser()
    p.add_argument("--checkpoint", required=True)
    p.add_argument("--endpoint", required=True)
    p.add_argument("--jars", required=True)
    p.add_argument("--output", required=True, help="local dir: each batch's rows as JSON (like the floor's sink)")
    p.add_argument("--rows", type=int, required=True)
    p.add_argument("--keys", type=int, required=True)
    p.add_argument("--batches", type=int, required=True)
    p.add_argument("--payload-bytes", type=int, default=0)
    p.add_argument("--window-seconds", type=int, default=10)
    p.add_argument("--watermark-seconds", type=int, default=5)
    p.add_argument("--trigger", default="100ms")
    p.add_argument("--until-batch", type=int, required=True, help="-1: run until killed")
    p.add_argument("--changelog", action="store_true")
    p.add_argument("--format-version", type=int, default=0)
    p.add_argument("--query", choices=["windowed", "churn"], default="windowed",
                   help="windowed: sparkpoint/examples/windowed_aggregation.py; churn: churn_query.py")
    p.add_argument("--shuffle-partitions", type=int, default=2, help="state partitions (the caller sets the peers' count)")
    p.add_argument("--min-batches-to-retain", type=int, default=100, help="Spark's default is 100")
    args = p.parse_args(argv)

    started = time.monotonic()
    spark = session(args)
    if args.query == "churn":
        from churn_query import build as build_churn  # this file's own dir is on sys.path

        df = build_churn(spark, keys=args.keys, rows_per_batch=args.rows, total_batches=args.batches,
                         payload_bytes=args.payload_bytes)
    else:
        from sparkpoint.examples.windowed_aggregation import build

        df = build(spark, rows_per_batch=args.rows, keys=args.keys, window=f"{args.window_seconds} seconds",
                   watermark=f"{args.watermark_seconds} seconds", total_batches=args.batches,
                   payload_bytes=args.payload_bytes)

    def write_batch(batch_df, batch_id: int) -> None:
        batch_df.write.mode("overwrite").json(os.path.join(args.output, f"batch-{batch_id}"))

    trigger = spark_interval(args.trigger)
    mode = "update" if args.query == "churn" else "append"
    query = (df.writeStream.outputMode(mode).option("checkpointLocation", args.checkpoint)
             .trigger(processingTime=trigger).foreachBatch(write_batch).start())
    print(json.dumps({"event": "started", "seconds": round(time.monotonic() - started, 3)}), flush=True)
    seen: set[int] = set()
    while query.isActive:
        for prog in new_progress(query, seen):
            print(json.dumps({**batch_event(prog), "stateRows": state_operator(prog).get("numRowsTotal"),
                              "seconds": round(time.monotonic() - started, 3), "ts": round(time.time(), 3),
                              "timestamp": prog["timestamp"]}), flush=True)
        if args.until_batch >= 0 and seen and max(seen) >= args.until_batch:
            query.stop()
            break
        time.sleep(0.2)
    spark.stop()
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
