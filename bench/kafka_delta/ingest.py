"""The Kafka benchmark's query, shared by Sparkpoint (job.entrypoint `ingest:build`, kafka_bench.py)
and vanilla Spark (vanilla_kafka_job.py): JSON events deduplicated by id within the event-time
watermark (state: the ids of the last `watermark`), each new event emitted at once with its Kafka
timestamp (the producer's send time). An ingest job: unlike a windowed aggregation, whose rows wait
for the watermark, every row's produce-to-commit latency is the pipeline's own.

Events: {"id": int, "user": str, "amount": int, "ts": epoch millis}."""

from __future__ import annotations

import json
from typing import Any

SCHEMA = "id long, user string, amount long, ts long"


def build(spark: Any, bootstrap: str, topic: str, watermark: str = "30 seconds",
          max_offsets_per_trigger: int | None = None) -> Any:
    from pyspark.sql import functions as F

    reader = (spark.readStream.format("kafka").option("kafka.bootstrap.servers", bootstrap)
              .option("subscribe", topic).option("startingOffsets", "earliest").option("failOnDataLoss", "true"))
    if max_offsets_per_trigger:
        reader = reader.option("maxOffsetsPerTrigger", max_offsets_per_trigger)
    events = (reader.load()
              .select(F.from_json(F.col("value").cast("string"), SCHEMA).alias("e"),
                      F.col("timestamp").alias("produced"))
              .select("e.id", "e.user", "e.amount", F.timestamp_millis("e.ts").alias("ts"), "produced")
              .where(F.col("id").isNotNull()))
    return events.withWatermark("ts", watermark).dropDuplicatesWithinWatermark(["id"])


def values(start: int, count: int, ts_ms: int | None = None) -> list[str]:
    """Events start..start+count-1; event time 1 ms apart from `ts_ms` (a backlog), or all `ts_ms`."""
    base = 1_700_000_000_000 if ts_ms is None else ts_ms
    step = 1 if ts_ms is None else 0
    return [json.dumps({"id": i, "user": f"u{i % 1000}", "amount": i % 97, "ts": base + (i - start) * step})
            for i in range(start, start + count)]
