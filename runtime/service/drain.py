"""The end of an attempt (POST /stop, SIGTERM, --until-batch): finish the running batch, stop the
query, take the final checkpoint or the savepoint asked for, and wait for the checkpoints in flight,
all within the grace period (the pod's terminationGracePeriodSeconds leaves room for it)."""

from __future__ import annotations

import logging
import time
from pathlib import Path
from typing import Any

from sparkpoint.runtime.checkpoint.coordinator import CheckpointCoordinator

from .names import batch_in_flight

log = logging.getLogger("sparkpoint.runtime")


def drain(query: Any, coord: CheckpointCoordinator, *, sink: Any, spark: Any, listener: Any, hot_dir: Path,
          grace_seconds: float, stop_request: dict[str, Any]) -> bool:
    """True when the final checkpoint or savepoint completed (or there was nothing to take)."""
    deadline = time.monotonic() + grace_seconds
    coord.pause_interval()
    stopping = getattr(sink, "stopping", None)
    if stopping is not None:
        stopping.set()  # a batch waiting for staging space or for the store gives up (it re-runs later)
    # Let the batch that is running finish (its offsets are logged, its commit is not yet), so
    # stopping does not interrupt it; the deadline keeps room for the final checkpoint.
    while query.isActive and batch_in_flight(hot_dir) and time.monotonic() < deadline - 5:
        time.sleep(0.01)
    # Unregister the Python listener first: otherwise the JVM delivers the query's termination
    # event after Python has closed the callback server and logs a py4j stack trace.
    from sparkpoint.runtime.spark.query import remove_listener

    remove_listener(spark, listener)
    query.stop()
    want_sp = stop_request.get("savepoint")
    ok = True
    if want_sp or stop_request.get("checkpoint", True):
        name = want_sp if isinstance(want_sp, str) else None
        req = coord.request(kind="savepoint" if want_sp else "checkpoint", trigger="stop", savepoint_name=name)
        req.done.wait(max(0.0, deadline - time.monotonic()))
        ok = req.status in ("completed", "skipped")
        if not ok:
            log.error("final checkpoint did not complete", extra={"request": req.to_json()})
    coord.wait_idle(max(0.0, deadline - time.monotonic()))
    coord.stop()
    return ok
