"""Windowed aggregation over the deterministic `rate-micro-batch` source.

Every micro-batch brings `rows_per_batch` rows whose event time advances one second per batch, so
a re-run of any batch produces the same rows. Rows are grouped into tumbling event-time windows and
`keys` buckets; with a watermark, each (window, key) row is emitted once, when the window closes.
`total_batches` bounds the input (later batches are empty), so two runs can be compared exactly.
"""

from __future__ import annotations

import time


def build(spark, rows_per_batch: int = 5000, keys: int = 5000, window: str = "10 seconds",
          watermark: str = "5 seconds", total_batches: int | None = None, slow_seconds: float = 0.0,
          payload_bytes: int = 0):
    from pyspark.sql import functions as F

    events = (spark.readStream.format("rate-micro-batch")
              .option("rowsPerBatch", rows_per_batch)
              .option("advanceMillisPerBatch", 1000)
              .option("startTimestamp", 0)
              .load())
    if total_batches is not None:
        events = events.where(F.col("value") < rows_per_batch * total_batches)
    if slow_seconds:
        events = events.withColumn("value", _slow_udf(rows_per_batch, slow_seconds)(F.col("value")))
    agg = [F.count("*").alias("events"), F.sum("value").alias("value_sum")]
    if payload_bytes:  # bigger state without more keys (benchmarks): hex digests barely compress
        parts = [F.sha2(F.concat(F.col("value").cast("string"), F.lit(f"#{i}")), 256)
                 for i in range(max(1, payload_bytes // 64))]
        agg.append(F.max(F.concat(*parts)).alias("payload"))
    return (events
            .withWatermark("timestamp", watermark)
            .groupBy(F.window("timestamp", window).alias("window"), (F.col("value") % keys).alias("key"))
            .agg(*agg))


def _slow_udf(rows_per_batch: int, seconds: float):
    """Sleeps once per batch (on its first row): a slow batch that still makes progress."""
    from pyspark.sql import functions as F
    from pyspark.sql.types import LongType

    def slow(v: int) -> int:
        if v % rows_per_batch == 0:
            time.sleep(seconds)
        return v
    return F.udf(slow, LongType())
