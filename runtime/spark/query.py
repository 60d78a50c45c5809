"""Start the user's stream with the runtime's sink and checkpoint location; watch its progress."""

from __future__ import annotations

import logging
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from sparkpoint.runtime.spec import parse_duration

log = logging.getLogger("sparkpoint.spark")

# The sink decides what a batch means: the transactional and console sinks emit final rows
# (append), the upsert sink emits changed keys as soon as they change (update).
OUTPUT_MODE = {"transactional": "append", "delta": "append", "console": "append", "upsert": "update"}


@dataclass(frozen=True)
class BatchProgress:
    batch_id: int
    duration_seconds: float
    input_rows: int
    state_rows: int
    # Where the batch's time went, in seconds, by Spark's phase names (addBatch: the state operators and
    # the sink; walCommit and commitOffsets: the offset and commit logs in the hot dir; ...).
    phases: dict[str, float] = field(default_factory=dict)


def progress_from_json(p: dict[str, Any]) -> BatchProgress:
    """Pure: Spark's StreamingQueryProgress JSON -> the few numbers the runtime reports."""
    durations = p.get("durationMs") or {}
    return BatchProgress(
        batch_id=int(p.get("batchId", -1)),
        duration_seconds=float(durations.get("triggerExecution", 0)) / 1000.0,
        input_rows=int(p.get("numInputRows", 0)),
        state_rows=sum(int(op.get("numRowsTotal", 0)) for op in p.get("stateOperators", [])),
        phases={k: float(v) / 1000.0 for k, v in sorted(durations.items()) if k != "triggerExecution"},
    )


def install_progress_listener(spark: Any, on_progress: Callable[[BatchProgress], None]) -> Any:
    import json

    from pyspark.sql.streaming import StreamingQueryListener

    class _Listener(StreamingQueryListener):
        def onQueryStarted(self, event):  # noqa: N802 (Spark's names)
            pass

        def onQueryProgress(self, event):  # noqa: N802
            try:
                on_progress(progress_from_json(json.loads(event.progress.json)))
            except Exception:  # a metrics bug must never kill the query
                log.exception("progress listener failed")

        def onQueryIdle(self, event):  # noqa: N802
            pass

        def onQueryTerminated(self, event):  # noqa: N802
            pass

    listener = _Listener()
    spark.streams.addListener(listener)
    return listener


def remove_listener(spark: Any, listener: Any) -> None:
    if spark is not None and listener is not None:
        spark.streams.removeListener(listener)


def start_query(df: Any, *, hot_dir: str, sink_kind: str, write_batch: Callable[[Any, int], None],
                trigger_interval: str, query_name: str) -> Any:
    """writeStream owned by the runtime: foreachBatch into our sink, checkpointLocation = hot dir."""
    interval_ms = int(round(parse_duration(trigger_interval) * 1000))
    return (df.writeStream
            .queryName(query_name)
            .outputMode(OUTPUT_MODE[sink_kind])
            .option("checkpointLocation", hot_dir)
            .trigger(processingTime=f"{interval_ms} milliseconds")
            .foreachBatch(write_batch)
            .start())
