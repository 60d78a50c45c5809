"""Vanilla Spark on the Kafka benchmark's query (ingest.py): its checkpoint and its Parquet file sink
(with the sink's own `_spark_metadata` log) both on s3a, through the same proxy as Sparkpoint's store.
Prints one JSON line per micro-batch, like bench/peers/vanilla_job.py (whose session and batch lines it
reuses: RocksDB with changelog checkpointing, s3a on the endpoint), and stops once `--until-rows` rows
were read.

    python vanilla_kafka_job.py --jars a.jar,b.jar --endpoint http://127.0.0.1:PORT --bootstrap HOST:PORT \
        --topic T --checkpoint s3a://bench/x/checkpoint --output s3a://bench/x/out [--until-rows N]
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path[:0] = [str(HERE), str(HERE.parent / "peers")]

from ingest import build  # noqa: E402
from vanilla_job import batch_event, new_progress, session, spark_interval  # noqa: E402  (bench/peers/vanilla_job.py)


def main(argv: list[str]) -> int:
    p = argparse.ArgumentParser()
    for flag in ("--jars", "--endpoint", "--bootstrap", "--topic", "--checkpoint", "--output"):
        p.add_argument(flag, required=True)
    p.add_argument("--max-offsets", type=int, default=0)
    p.add_argument("--trigger", default="100ms")
    p.add_argument("--shuffle-partitions", type=int, default=2)
    p.add_argument("--until-rows", type=int, default=-1, help="-1: run until killed")
    args = p.parse_args(argv)
    started = time.monotonic()
    spark = session(argparse.Namespace(jars=args.jars, endpoint=args.endpoint, changelog=True, format_version=0,
                                       shuffle_partitions=args.shuffle_partitions, min_batches_to_retain=100))
    df = build(spark, args.bootstrap, args.topic, max_offsets_per_trigger=args.max_offsets or None)
    query = (df.writeStream.format("parquet").outputMode("append").option("path", args.output)
             .option("checkpointLocation", args.checkpoint)
             .trigger(processingTime=spark_interval(args.trigger)).start())
    print(json.dumps({"event": "started", "seconds": round(time.monotonic() - started, 3)}), flush=True)
    seen: set[int] = set()
    rows = 0
    while query.isActive:
        for prog in new_progress(query, seen):
            rows += prog["numInputRows"]
            print(json.dumps({**batch_event(prog), "ts": round(time.time(), 3)}), flush=True)
        if 0 <= args.until_rows <= rows:
            query.stop()
            break
        time.sleep(0.2)
    spark.stop()
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
