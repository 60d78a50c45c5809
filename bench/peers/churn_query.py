"""The key-churn query (see churn.py for the key schedule): a keyed aggregation without windows,
so the state keeps every key and each batch rewrites `rows_per_batch` of them. Output (update mode):
the updated keys, their counts and the payload's length (not the payload itself: the sink stays
small, but the column must be used, or Spark's column pruning drops the MAX and with it the payload
from the state, which is then 24 bytes a key instead of ~1 KB). Used by Sparkpoint (entrypoint
`churn_query:build`, job.pythonPath = this dir) and by vanilla_job.py --query churn."""

from __future__ import annotations

import math


def build(spark, keys: int, rows_per_batch: int, total_batches: int, payload_bytes: int = 0):
    from pyspark.sql import functions as F

    fanout = math.ceil(keys / rows_per_batch)
    value = F.col("value")
    events = (spark.readStream.format("rate-micro-batch").option("rowsPerBatch", rows_per_batch)
              .option("advanceMillisPerBatch", 1000).option("startTimestamp", 0).load()
              .where(value < rows_per_batch * total_batches))
    fill = value < rows_per_batch
    first = F.when(fill, value * fanout).otherwise((value - rows_per_batch) % keys)
    count = F.when(fill, F.lit(fanout)).otherwise(F.lit(1))
    rows = (events.withColumn("key", F.explode(F.sequence(first, first + count - 1)))
            .where(F.col("key") < keys))
    agg = [F.count("*").alias("events"), F.sum("value").alias("value_sum")]
    if payload_bytes:  # hex digests barely compress: the state's size is keys x payload
        parts = [F.sha2(F.concat(F.col("value").cast("string"), F.lit(f"#{i}")), 256)
                 for i in range(max(1, payload_bytes // 64))]
        agg.append(F.max(F.concat(*parts)).alias("payload"))
    out = ["key", "events", "value_sum"]
    if payload_bytes:
        out.append(F.length("payload").alias("payload_chars"))
    return rows.groupBy("key").agg(*agg).select(*out)
