"""Sessionization with a watermark over the deterministic `rate-micro-batch` source.

Each event belongs to user `value % users`. A user is active for 3 seconds out of every 7 (offset by
user id), so activity bursts are separated by idle gaps; `session_window` with a 2-second gap turns
each burst into one session. With the watermark, each session is emitted once, after it closed.
"""

from __future__ import annotations


def build(spark, rows_per_batch: int = 2000, users: int = 200, gap: str = "2 seconds",
          watermark: str = "5 seconds", total_batches: int | None = None):
    from pyspark.sql import functions as F

    events = (spark.readStream.format("rate-micro-batch")
              .option("rowsPerBatch", rows_per_batch)
              .option("advanceMillisPerBatch", 1000)
              .option("startTimestamp", 0)
              .load()
              .withColumn("user", F.col("value") % users)
              .withColumn("second", F.floor(F.unix_timestamp("timestamp"))))
    if total_batches is not None:
        events = events.where(F.col("value") < rows_per_batch * total_batches)
    active = events.where((F.col("second") + F.col("user")) % 7 < 3)
    return (active
            .withWatermark("timestamp", watermark)
            .groupBy(F.session_window("timestamp", gap).alias("session"), "user")
            .agg(F.count("*").alias("events"), F.min("value").alias("first_value"),
                 F.max("value").alias("last_value")))
