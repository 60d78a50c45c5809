"""Operator metrics (docs/design.md §10, prefix sparkpoint_) and the /metrics + /healthz endpoint.

Labels carry namespace and job names only, never anything from a Secret.
"""

from __future__ import annotations

import contextlib
import time
from collections import Counter as Counter_

from aiohttp import web
from prometheus_client import (
    CONTENT_TYPE_LATEST,
    CollectorRegistry,
    Counter,
    Gauge,
    Histogram,
    generate_latest,
)

from .decisions.status import PHASES


class OperatorMetrics:
    def __init__(self) -> None:
        self.registry = CollectorRegistry()
        r = self.registry
        self.jobs = Gauge("sparkpoint_operator_jobs", "StreamingJobs by phase", ["phase"], registry=r)
        self.restarts = Counter("sparkpoint_operator_restarts", "job restarts: a new attempt (remote) or a "
                                "container restarted in place (local)", ["namespace", "job", "kind"], registry=r)
        self.trigger_lag = Histogram("sparkpoint_operator_checkpoint_trigger_lag_seconds",
                                     "how late a checkpoint trigger was against its schedule",
                                     buckets=(0.05, 0.1, 0.25, 0.5, 1, 2, 5, 10, 30, 60), registry=r)
        self.triggers = Counter("sparkpoint_operator_checkpoint_triggers", "checkpoint triggers by result",
                                ["result"], registry=r)
        self.reconcile_errors = Counter("sparkpoint_operator_reconcile_errors", "failed reconciles by error type",
                                        ["error"], registry=r)
        self.reconcile_seconds = Histogram("sparkpoint_operator_reconcile_duration_seconds", "one observe-decide-act",
                                           registry=r)
        self.checkpoint_unhealthy = Gauge("sparkpoint_operator_checkpoint_unhealthy",
                                          "1 while a job has no completed checkpoint for N intervals",
                                          ["namespace", "job"], registry=r)
        self._phases: dict[tuple[str, str], str] = {}
        self._counted = False
        self.started = time.time()

    def job_phase(self, namespace: str, name: str, phase: str | None) -> None:
        key = (namespace, name)
        old = self._phases.get(key)
        if phase is None:
            self._phases.pop(key, None)
            with contextlib.suppress(KeyError):  # a deleted job leaves no series behind
                self.checkpoint_unhealthy.remove(namespace, name)
        else:
            self._phases[key] = phase
        if old == phase and self._counted:
            return  # called every reconcile: recount only on a change (O(jobs) at 1,000 jobs)
        self._counted = True
        counts = Counter_(self._phases.values())
        for p in PHASES:
            self.jobs.labels(p).set(counts.get(p, 0))

    def render(self) -> bytes:
        return generate_latest(self.registry)


def build_app(metrics: OperatorMetrics) -> web.Application:
    async def metrics_view(_: web.Request) -> web.Response:
        return web.Response(body=metrics.render(), headers={"Content-Type": CONTENT_TYPE_LATEST})

    async def healthz(_: web.Request) -> web.Response:
        # Answering at all proves the event loop (where kopf runs) is not stuck.
        return web.json_response({"status": "ok", "uptimeSeconds": round(time.time() - metrics.started)})

    app = web.Application()
    app.router.add_get("/metrics", metrics_view)
    app.router.add_get("/healthz", healthz)
    return app


async def serve(metrics: OperatorMetrics, port: int, host: str = "0.0.0.0") -> web.AppRunner:
    runner = web.AppRunner(build_app(metrics), access_log=None)
    await runner.setup()
    await web.TCPSite(runner, host, port).start()
    return runner
