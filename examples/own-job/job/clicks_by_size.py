"""An example of your own job: it needs `humanize` (requirements.txt), which the runtime image lacks.

Rows of the deterministic `rate-micro-batch` source are counted per 10-second event-time window and
per size bucket, the bucket labelled by humanize in a Python UDF: the dependency is used both by the
driver (on import, so a missing package fails the start, not a batch) and by Spark's Python workers.
"""

from __future__ import annotations

import humanize


def size_label(value: int, buckets: int) -> str:
    """The bucket of `value` as humanize writes a size: 0 Bytes, 1.0 kB, 2.0 kB, ..."""
    return humanize.naturalsize((value % buckets) * 1000)


def build(spark, rows_per_batch: int = 200, buckets: int = 8):
    from pyspark.sql import functions as F
    from pyspark.sql.types import StringType

    def label(value):  # Spark's Python worker imports this module (PYTHONPATH), and humanize with it
        return size_label(value, buckets)  # (no type hints: Spark would look for a pandas UDF in them)

    events = (spark.readStream.format("rate-micro-batch")
              .option("rowsPerBatch", rows_per_batch)
              .option("advanceMillisPerBatch", 1000)
              .option("startTimestamp", 0)
              .load())
    return (events
            .withWatermark("timestamp", "5 seconds")
            .groupBy(F.window("timestamp", "10 seconds").alias("window"),
                     F.udf(label, StringType(), useArrow=False)(F.col("value")).alias("size"))
            .agg(F.count("*").alias("events")))
