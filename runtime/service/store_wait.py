"""An attempt whose checkpoint store is unreachable when it starts waits for it instead of exiting.

Exiting would crash-loop the container: each restart counts against the job's restart budget, so
a store outage of a few minutes at the wrong moment (a node drain, an upgrade) would fail the job.
Waiting keeps the pod alive (its /healthz answers, /readyz does not) and starts the moment the
store is back. Only an unreachable store is waited for: wrong credentials, a missing bucket or a
store without conditional writes are configuration errors and exit at once with their message.
"""

from __future__ import annotations

import logging
import threading
import time

from sparkpoint.runtime.store import ObjectStore
from sparkpoint.runtime.store.base import StoreUnreachableError

log = logging.getLogger("sparkpoint.runtime")
FIRST_DELAY, MAX_DELAY = 1.0, 30.0


def wait_for_store(store: ObjectStore, stop: threading.Event, max_wait: float | None = None,
                   clock=time.monotonic, writes: bool = True) -> bool:  # type: ignore[no-untyped-def]
    """True once the store answers the write check (`writes` False: a read, for a standby, which
    writes nothing); False if a stop was requested meanwhile.
    After `max_wait` seconds (None: no limit) the last StoreUnreachableError is raised."""
    started, delay = clock(), FIRST_DELAY
    while True:
        try:
            store.check(writes=writes)
            if clock() - started > FIRST_DELAY:
                log.info("checkpoint store reachable", extra={"waitedSeconds": round(clock() - started, 1)})
            return True
        except StoreUnreachableError as exc:
            waited = clock() - started
            if max_wait is not None and waited >= max_wait:
                raise
            log.warning("checkpoint store unreachable at start; waiting for it",
                        extra={"error": str(exc)[:300], "retryInSeconds": delay, "waitedSeconds": round(waited, 1)})
        if stop.wait(delay):
            return False
        delay = min(delay * 2, MAX_DELAY)
