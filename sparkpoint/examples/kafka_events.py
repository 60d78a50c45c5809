"""Per-user totals in event-time windows over JSON events read from a Kafka topic.

Each record's value is a JSON object {"user": str, "amount": int, "ts": epoch millis}. The event
time is the record's own `ts`, not Kafka's timestamp, so a re-run of any offsets produces the same
rows however Spark cuts them into batches. Windows close on the watermark; in append mode each
(window, user) row is emitted once. Kafka offsets live in Spark's checkpoint (the hot dir the
runtime checkpoints), so a restore resumes from the offsets of the restored batch.

`max_offsets_per_trigger` bounds a batch (Spark's `maxOffsetsPerTrigger`); `options` passes any
other source option (`kafka.` ones go to the consumer). The watermark must exceed the event-time
spread of one batch across partitions, or a batch cut could make a late event: see docs/design.md.
"""

from __future__ import annotations

from typing import Any

SCHEMA = "user string, amount long, ts long"


def build(spark, bootstrap: str, topic: str, window: str = "10 seconds", watermark: str = "30 seconds",
          max_offsets_per_trigger: int | None = None, options: dict[str, Any] | None = None):
    from pyspark.sql import functions as F

    reader = (spark.readStream.format("kafka")
              .option("kafka.bootstrap.servers", bootstrap)
              .option("subscribe", topic)
              .option("startingOffsets", "earliest")
              # Retention could delete offsets a restore resumes from: fail then, never skip data.
              .option("failOnDataLoss", "true"))
    if max_offsets_per_trigger:
        reader = reader.option("maxOffsetsPerTrigger", max_offsets_per_trigger)
    for key, value in (options or {}).items():
        reader = reader.option(key, value)
    events = (reader.load()
              .select(F.from_json(F.col("value").cast("string"), SCHEMA).alias("e"))
              .select("e.user", "e.amount", F.timestamp_millis("e.ts").alias("ts"))
              .where(F.col("user").isNotNull()))  # a value that is not such JSON is skipped
    return (events
            .withWatermark("ts", watermark)
            .groupBy(F.window("ts", window).alias("window"), "user")
            .agg(F.count("*").alias("events"), F.sum("amount").alias("amount")))
