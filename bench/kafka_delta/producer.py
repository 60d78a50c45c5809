"""Writes the Kafka benchmark's events (ingest.values) to a topic through Spark's Kafka writer, in its
own process so its JVM ends with it.

    python producer.py BOOTSTRAP TOPIC --count N              # a backlog, as fast as it goes
    python producer.py BOOTSTRAP TOPIC --rate R --seconds D   # R events a second for D seconds
Each record's Kafka timestamp is the producer's send time (no timestamp column is written), which the
latency figure measures from. Prints one JSON line at the end: {"produced": n, "seconds": s}."""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from ingest import values  # noqa: E402

from harness.kafka_server import produce  # noqa: E402
from sparkpoint.runtime.spark.session import build_session  # noqa: E402
from sparkpoint.runtime.spec import SparkSection  # noqa: E402

CHUNK = 200_000  # a backlog goes in pieces: one Spark job per piece keeps the driver's rows small


def main(argv: list[str]) -> int:
    p = argparse.ArgumentParser()
    p.add_argument("bootstrap")
    p.add_argument("topic")
    p.add_argument("--count", type=int, default=0)
    p.add_argument("--rate", type=int, default=0)
    p.add_argument("--seconds", type=float, default=0)
    p.add_argument("--first-id", type=int, default=0)
    args = p.parse_args(argv)
    spark = build_session(SparkSection(master="local[1]", shuffle_partitions=1), "bench-kafka-producer")
    if args.rate:
        # The first Kafka write of a JVM takes seconds (the writer's classes, the producer's metadata):
        # done before the clock starts on a topic of its own, or the first second's chunk overruns it.
        produce(spark, args.bootstrap, f"{args.topic}-warmup", values(0, 1))
    started, started_wall, produced = time.monotonic(), time.time(), 0
    try:
        if args.rate:
            # One chunk per second of `seconds`, each sent at its second or, when behind, at once: the
            # count is always rate x seconds (a time-bounded loop sent one chunk when the first overran).
            for tick in range(max(1, round(args.seconds))):
                time.sleep(max(0.0, tick - (time.monotonic() - started)))
                produced += produce(spark, args.bootstrap, args.topic,
                                    values(args.first_id + produced, args.rate, ts_ms=int(time.time() * 1000)))
        else:
            while produced < args.count:
                produced += produce(spark, args.bootstrap, args.topic,
                                    values(args.first_id + produced, min(CHUNK, args.count - produced)))
    finally:
        spark.stop()
    print(json.dumps({"produced": produced, "seconds": round(time.monotonic() - started, 3),
                      "from": round(started_wall, 3)}), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
