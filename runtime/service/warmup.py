"""A standby's warm-up (issue 43; docs/design.md §8 "Standby"): before any promotion, the job's query
runs on the standby's session for one batch, from a scratch checkpoint dir of its own into a sink that
writes nothing, then stops. The promoted query then starts on a JVM that has already loaded Spark's
classes for this plan, generated its code, made its state store provider and run its foreachBatch
callback: the first batch after a promotion took 14-27 s on a JVM new to the query, against 2-5 s for
the batches after it; with the warm-up 6-18 s (docs/benchmarks.md, "Recovery with a standby: the warm-up").

Nothing of it reaches what a start owns: no fence (the standby claims none), nothing in the store or the
hot dir (its checkpoint dir is `standby-warmup/`), nothing published (each batch goes to Spark's `noop`
format). That dir is emptied when a warm-up starts, not after one: Spark's state store maintenance still
visits a stopped query's loaded providers once (then unloads them), and a checkpoint dir gone under it
fails that maintenance, which unloads every provider, the promoted query's too. It starts from no state, so it loads none of the job's: that part of the first
batch stays. It reads its sources like a new query of the job would (a rate source's first rows, a
Kafka topic from the job's own starting offsets), which is why it is opt-in (`--standby-warmup`). A
promotion or a stop ends it at once (the query is stopped, its batch abandoned); it is bounded by
`timeout` in any case.
"""

from __future__ import annotations

import logging
import shutil
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

log = logging.getLogger("sparkpoint.standby")

WARMUP_DIR = "standby-warmup"
DEFAULT_TIMEOUT = 300.0


def for_runtime(runtime: Any, func: Callable[..., Any]) -> Callable[[], Warmup] | None:
    """How a standby of this runtime starts its warm-up (None: `--standby-warmup` is off, or its session is
    not made early: with spark.master k8s it waits for the promotion, early_start.py)."""
    if not runtime.opts.standby_warmup or not runtime.early.enabled:
        return None
    from sparkpoint.runtime.spark.entrypoint import build_stream
    from sparkpoint.runtime.spark.query import OUTPUT_MODE

    job = runtime.spec.job
    return lambda: Warmup(lambda: runtime.early.session(runtime._build_session),
                          lambda spark: build_stream(func, spark, job.args, job.entrypoint),
                          OUTPUT_MODE[job.sink.kind], runtime.work_dir / WARMUP_DIR).start()


def _discard(batch: Any, _batch_id: int) -> None:
    batch.write.format("noop").mode("overwrite").save()  # the whole plan runs; nothing is written


class Warmup:
    """One warm-up on a thread of its own; `end()` stops it (whatever it reached) and waits for it."""

    def __init__(self, session: Callable[[], Any], build: Callable[[Any], Any], output_mode: str,
                 scratch: Path, timeout: float = DEFAULT_TIMEOUT, clock: Callable[[], float] = time.monotonic):
        self.session, self.build, self.output_mode = session, build, output_mode
        self.scratch, self.timeout, self.clock = scratch, timeout, clock
        self.cancel = threading.Event()
        self.outcome: dict[str, Any] = {"state": "pending"}
        self._query: Any = None
        self._lock = threading.Lock()
        self._thread = threading.Thread(target=self._run, name="standby-warmup", daemon=True)

    def start(self) -> Warmup:
        self._thread.start()
        return self

    def end(self) -> dict[str, Any]:
        self.cancel.set()
        self._stop_query()
        self._thread.join()
        return dict(self.outcome)

    def _stop_query(self) -> None:
        with self._lock:
            query, self._query = self._query, None
        if query is not None:
            try:
                query.stop()
            except Exception as exc:  # noqa: BLE001 - a warm-up that cannot stop cleanly is only logged
                log.warning("standby warm-up: stopping its query failed", extra={"error": str(exc)[:300]})

    def _run(self) -> None:
        t0 = self.clock()
        try:
            spark = self.session()
            if self.cancel.is_set():
                self.outcome = {"state": "cancelled"}
                return
            shutil.rmtree(self.scratch, ignore_errors=True)
            query = (self.build(spark).writeStream.outputMode(self.output_mode)
                     .option("checkpointLocation", str(self.scratch)).foreachBatch(_discard).start())
            with self._lock:
                if self.cancel.is_set():
                    self._query = None
                    query.stop()
                    self.outcome = {"state": "cancelled"}
                    return
                self._query = query
            state = "timeout"
            while not self.cancel.wait(0.2) and self.clock() - t0 < self.timeout:
                if query.exception() is not None:
                    raise RuntimeError(str(query.exception())[:300])
                if query.lastProgress is not None:  # a batch completed: the path is warm
                    state = "warm"
                    break
            self._stop_query()
            if self.cancel.is_set() and state != "warm":
                state = "cancelled"
            self.outcome = {"state": state, "seconds": round(self.clock() - t0, 3)}
            log.info("standby warm-up ended", extra=self.outcome)
        except Exception as exc:  # noqa: BLE001 - the warm-up only saves time; the standby goes on without it
            self._stop_query()
            self.outcome = {"state": "failed", "error": str(exc)[:300], "seconds": round(self.clock() - t0, 3)}
            log.warning("standby warm-up failed; the promoted query starts cold", extra=self.outcome)
