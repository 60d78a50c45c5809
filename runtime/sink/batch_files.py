"""A micro-batch written as files by Spark's executors, never collected on the driver (docs/design.md §6).

The sinks hand `write_batch_files` the batch's DataFrame and an empty local folder; Spark writes one
part file per non-empty partition there (Parquet, or JSON lines when `job.sink.format: jsonl`) and
counts the rows on the way with an Observation, so the driver holds neither the rows nor a second
pass over them. The folder is on the driver's local disk: with Spark in local mode the executors
are threads of the driver's JVM and write there directly, and the checkpoint uploads the files, so
the same path works for every store backend and a store outage never blocks a batch.
"""

from __future__ import annotations

import itertools
from pathlib import Path
from typing import Any

_observations = itertools.count()

# Spark's JSON text for timestamps carries the session's zone offset by default; this keeps the
# microseconds and leaves the zone out, the form the driver-encoded JSON lines had.
JSON_OPTIONS = {"ignoreNullFields": "false", "timestampFormat": "yyyy-MM-dd'T'HH:mm:ss.SSSSSS",
                "timestampNTZFormat": "yyyy-MM-dd'T'HH:mm:ss.SSSSSS"}


def write_batch_files(df: Any, directory: Path, fmt: str) -> int:
    """Write `df` into `directory` (which must not exist) as `fmt` files; returns the row count."""
    from pyspark.sql import Observation
    from pyspark.sql import functions as F

    # Parquet timestamps as instants in microseconds (Spark's default INT96 is deprecated in Parquet
    # and read as zone-less by other tools). A session setting; the runtime owns the session.
    df.sparkSession.conf.set("spark.sql.parquet.outputTimestampType", "TIMESTAMP_MICROS")
    observation = Observation(f"sparkpoint_rows_{next(_observations)}")
    writer = df.observe(observation, F.count(F.lit(1)).alias("rows")).write.mode("errorifexists")
    if fmt == "parquet":
        writer.parquet(str(directory))
    elif fmt == "jsonl":
        writer.options(**JSON_OPTIONS).json(str(directory))
    else:
        raise ValueError(f"unknown sink format {fmt!r}")
    return int(observation.get["rows"])
