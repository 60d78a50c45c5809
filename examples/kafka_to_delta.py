"""Kafka in, a Delta Lake table out: per-user totals in event-time windows (examples/kafka_to_delta.yaml).

The job is the Kafka example's aggregation (sparkpoint/examples/kafka_events.py: JSON events
{"user", "amount", "ts"} read from a topic, windows closed by the watermark, each (window, user) row
emitted once); the spec's `job.sink.kind: delta` makes its output a Delta table in the job's store,
at `<store>/<namespace>/<name>/outputs/<sink path>/`, one Delta commit per checkpoint. Any Delta
reader reads it; `python examples/kafka_to_delta.py <table>` prints it with polars:

    python examples/kafka_to_delta.py .work/default/kafka-to-delta/store/default/kafka-to-delta/outputs/user-totals
"""

from __future__ import annotations

import sys
from typing import Any

from sparkpoint.examples.kafka_events import build as _aggregate


def build(spark: Any, bootstrap: str, topic: str, window: str = "10 seconds", watermark: str = "30 seconds",
          max_offsets_per_trigger: int | None = None, options: dict[str, Any] | None = None) -> Any:
    """The job's streaming DataFrame (the runtime owns writeStream and the sink)."""
    return _aggregate(spark, bootstrap, topic, window, watermark, max_offsets_per_trigger, options)


def read_table(uri: str, storage_options: dict[str, str] | None = None) -> Any:
    """The table's current version as a polars DataFrame, newest windows last (s3:// URIs need the
    store's endpoint and credentials in storage_options, e.g. AWS_ENDPOINT_URL)."""
    import polars as pl

    return pl.read_delta(uri, storage_options=storage_options).sort("window", "user")


if __name__ == "__main__":
    print(read_table(sys.argv[1]))
