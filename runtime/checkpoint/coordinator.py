"""When checkpoints run: interval trigger, explicit requests, maxConcurrent, minPause, timeout.

The coordinator knows nothing about Spark or the store. It calls two functions per checkpoint:
`sync_phase(request)` on its own thread (the freeze: fast, never waits for a batch) and
`async_phase(request, frozen)` on a worker thread (hash, upload, manifest, publish). Scheduling
rules are in the pure `due_reason`, so they can be tested without threads.
"""

from __future__ import annotations

import itertools
import logging
import threading
import time
from collections import deque
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from typing import Any

log = logging.getLogger("sparkpoint.coordinator")

QUEUED, FREEZING, UPLOADING = "queued", "freezing", "uploading"
COMPLETED, FAILED, TIMED_OUT, SKIPPED = "completed", "failed", "timed_out", "skipped"
FINAL = (COMPLETED, FAILED, TIMED_OUT, SKIPPED)


class NothingToCheckpoint(Exception):
    """Raised by the sync phase when there is no new committed batch: skipped, not a failure."""


class Abandoned(Exception):
    """Raised inside the async phase when the request timed out: do not commit."""


@dataclass
class CheckpointRequest:
    request_id: str
    kind: str = "checkpoint"  # or "savepoint"
    trigger: str = "interval"  # interval | api | stop | sink-budget | rescale
    savepoint_name: str | None = None
    created: float = field(default_factory=time.time)
    status: str = QUEUED
    checkpoint_id: str | None = None
    batch_id: int | None = None
    error: str | None = None
    sync_seconds: float | None = None
    async_seconds: float | None = None
    details: dict[str, Any] = field(default_factory=dict)
    started_mono: float | None = None
    done: threading.Event = field(default_factory=threading.Event, repr=False)

    @property
    def abandoned(self) -> bool:
        return self.status == TIMED_OUT

    def check_not_abandoned(self) -> None:
        if self.abandoned:
            raise Abandoned(f"{self.request_id} timed out; not committing")

    def to_json(self) -> dict[str, Any]:
        return {"requestId": self.request_id, "id": self.checkpoint_id, "kind": self.kind,
                "trigger": self.trigger, "savepoint": self.savepoint_name, "status": self.status,
                "batchId": self.batch_id, "error": self.error, "syncSeconds": self.sync_seconds,
                "asyncSeconds": self.async_seconds, "created": self.created, **self.details}


RETRY_BACKOFF_CAP = 30.0  # seconds; the longest wait between retries (or the interval, if longer)


def retry_delay(failures: int, interval: float) -> float:
    """After `failures` consecutive failed checkpoints, how long the next interval trigger waits after
    the last one ended: interval, 2x, 4x, ... capped, so a store outage is not hammered and a
    checkpoint still follows soon after the store returns."""
    if failures <= 0 or interval <= 0:
        return 0.0
    return min(max(RETRY_BACKOFF_CAP, interval), interval * 2 ** (failures - 1))


FALLBACK_INTERVALS = 2  # with external triggers, the own timer wakes after this many silent intervals


def own_timer_due(*, now: float, interval: float, last_trigger: float | None,
                  external_triggers: bool = False, last_external: float | None = None) -> bool:
    """Whether the runtime's own interval timer fires now.

    Standalone (`sparkpoint run`): every `interval` after the last checkpoint start. Under the operator
    (`external_triggers`), the operator's API requests are the schedule; the own timer is only a
    fallback: it fires once no API request arrived for FALLBACK_INTERVALS intervals (an operator
    outage), and then every interval until requests come again."""
    if interval <= 0:
        return False
    if external_triggers and last_external is not None and now - last_external < FALLBACK_INTERVALS * interval:
        return False
    return last_trigger is None or now - last_trigger >= interval


def due_reason(*, now: float, queued: int, in_flight: int, max_concurrent: int, interval: float,
               last_trigger: float | None, last_end: float | None, min_pause: float,
               failures: int = 0, external_triggers: bool = False,
               last_external: float | None = None) -> str | None:
    """Pure scheduling rule: why a checkpoint should start now ("request"/"interval") or None.
    `failures`: consecutive failed or timed-out checkpoints (interval triggers back off; requests do not).
    `external_triggers`/`last_external`: see own_timer_due."""
    if in_flight >= max_concurrent:
        return None
    if last_end is not None and now - last_end < min_pause:
        return None
    if queued:
        return "request"
    if failures and last_end is not None and now - last_end < retry_delay(failures, interval):
        return None
    if own_timer_due(now=now, interval=interval, last_trigger=last_trigger,
                     external_triggers=external_triggers, last_external=last_external):
        return "interval"
    return None


class CheckpointCoordinator:
    def __init__(self, *, sync_phase: Callable[[CheckpointRequest], Any],
                 async_phase: Callable[[CheckpointRequest, Any], None],
                 on_finished: Callable[[CheckpointRequest], None] = lambda r: None,
                 interval: float, timeout: float, min_pause: float = 0.0, max_concurrent: int = 1,
                 clock: Callable[[], float] = time.monotonic, history: int = 100,
                 external_triggers: bool = False):
        self.sync_phase, self.async_phase, self.on_finished = sync_phase, async_phase, on_finished
        self.interval, self.timeout, self.min_pause = interval, timeout, min_pause
        self.max_concurrent, self.clock = max_concurrent, clock
        self._cond = threading.Condition()
        self._queue: deque[CheckpointRequest] = deque()
        self._in_flight: dict[str, CheckpointRequest] = {}
        self._history: dict[str, CheckpointRequest] = {}
        self._history_limit = history
        self._ids = itertools.count(1)
        self._last_trigger: float | None = None
        self.external_triggers = external_triggers
        self._last_external: float | None = None  # when the last API request arrived
        self._last_end: float | None = None
        self._failures = 0  # consecutive failed or timed-out checkpoints (reset by a completed one)
        self._stopping = False
        self._paused = False
        # Extra workers absorb abandoned (timed-out) uploads that are still unwinding.
        self._pool = ThreadPoolExecutor(max_concurrent + 2, thread_name_prefix="checkpoint-upload")
        self._thread = threading.Thread(target=self._loop, name="checkpoint-coordinator", daemon=True)

    # --- public API -----------------------------------------------------------------------------
    def start(self) -> None:
        # The first interval checkpoint comes one interval after start; under the operator, the
        # fallback timer counts its silence from the start too.
        self._last_trigger = self._last_external = self.clock()
        self._thread.start()

    def request(self, kind: str = "checkpoint", trigger: str = "api",
                savepoint_name: str | None = None) -> CheckpointRequest:
        with self._cond:
            req = CheckpointRequest(request_id=f"req-{next(self._ids):06d}", kind=kind, trigger=trigger,
                                    savepoint_name=savepoint_name)
            if trigger == "api":
                self._last_external = self.clock()
            self._queue.append(req)
            self._remember(req)
            self._cond.notify_all()
        return req

    def find(self, any_id: str) -> CheckpointRequest | None:
        with self._cond:
            if any_id in self._history:
                return self._history[any_id]
            return next((r for r in self._history.values() if r.checkpoint_id == any_id), None)

    def request_unless_busy(self, trigger: str) -> CheckpointRequest | None:
        """A checkpoint for `trigger`, unless one is already queued or running (it will do)."""
        with self._cond:
            if self._queue or self._in_flight:
                return None
        return self.request(kind="checkpoint", trigger=trigger)

    def consecutive_failures(self) -> int:
        with self._cond:
            return self._failures

    def in_flight(self) -> int:
        with self._cond:
            return len(self._in_flight)

    def recent(self, n: int = 10) -> list[CheckpointRequest]:
        with self._cond:
            return list(self._history.values())[-n:]

    def pause_interval(self) -> None:
        """Stop interval triggers (during drain); explicit requests still run."""
        with self._cond:
            self._paused = True

    def wait_idle(self, timeout: float) -> bool:
        deadline = self.clock() + timeout
        with self._cond:
            while self._queue or self._in_flight:
                left = deadline - self.clock()
                if left <= 0:
                    return False
                self._cond.wait(min(left, 0.2))
        return True

    def stop(self) -> None:
        with self._cond:
            self._stopping = True
            self._cond.notify_all()
        self._thread.join(timeout=5)
        self._pool.shutdown(wait=False, cancel_futures=True)

    # --- internals ------------------------------------------------------------------------------
    def _remember(self, req: CheckpointRequest) -> None:
        self._history[req.request_id] = req
        while len(self._history) > self._history_limit:
            self._history.pop(next(iter(self._history)))

    def _loop(self) -> None:
        while True:
            with self._cond:
                if self._stopping:
                    return
                self._expire_timed_out()
                now = self.clock()
                reason = due_reason(now=now, queued=len(self._queue), in_flight=len(self._in_flight),
                                    max_concurrent=self.max_concurrent,
                                    interval=0.0 if self._paused else self.interval,
                                    last_trigger=self._last_trigger, last_end=self._last_end,
                                    min_pause=self.min_pause, failures=self._failures,
                                    external_triggers=self.external_triggers,
                                    last_external=self._last_external)
                if reason is None:
                    self._cond.wait(0.05)
                    continue
                if reason == "request":
                    req = self._queue.popleft()
                else:
                    req = CheckpointRequest(request_id=f"req-{next(self._ids):06d}", trigger="interval")
                    self._remember(req)
                self._last_trigger = now
                req.status, req.started_mono = FREEZING, now
                self._in_flight[req.request_id] = req
            self._run_sync(req)

    def _run_sync(self, req: CheckpointRequest) -> None:
        t0 = time.perf_counter()
        try:
            frozen = self.sync_phase(req)
        except NothingToCheckpoint as exc:
            req.sync_seconds = time.perf_counter() - t0
            self._finish(req, SKIPPED, str(exc))
            return
        except Exception as exc:
            req.sync_seconds = time.perf_counter() - t0
            self._finish(req, FAILED, f"freeze: {type(exc).__name__}: {exc}")
            return
        req.sync_seconds = time.perf_counter() - t0
        req.status = UPLOADING
        self._pool.submit(self._run_async, req, frozen)

    def _run_async(self, req: CheckpointRequest, frozen: Any) -> None:
        t0 = time.perf_counter()
        try:
            self.async_phase(req, frozen)
        except Abandoned:
            return  # already finished as timed out
        except Exception as exc:
            req.async_seconds = time.perf_counter() - t0
            log.exception("checkpoint failed", extra={"request": req.request_id})
            self._finish(req, FAILED, f"{type(exc).__name__}: {exc}")
            return
        req.async_seconds = time.perf_counter() - t0
        self._finish(req, COMPLETED, None)

    def _expire_timed_out(self) -> None:
        now = self.clock()
        for req in list(self._in_flight.values()):
            if req.started_mono is not None and now - req.started_mono > self.timeout:
                req.status, req.error = TIMED_OUT, f"not completed within {self.timeout:g}s"
                self._in_flight.pop(req.request_id, None)
                self._last_end = now
                self._failures += 1
                req.done.set()
                log.warning("checkpoint timed out", extra={"request": req.request_id})
                self.on_finished(req)

    def _finish(self, req: CheckpointRequest, status: str, error: str | None) -> None:
        with self._cond:
            if req.status == TIMED_OUT:
                return
            req.status, req.error = status, error
            self._in_flight.pop(req.request_id, None)
            self._last_end = self.clock()
            if status == COMPLETED:
                self._failures = 0
            elif status == FAILED:
                self._failures += 1
            self._cond.notify_all()
        req.done.set()
        self.on_finished(req)
