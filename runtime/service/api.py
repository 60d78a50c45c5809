"""The runtime's control API and /metrics (docs/design.md §8, a contract), served by aiohttp on its own
thread and event loop so the Spark driver thread is never blocked by HTTP.

  GET  /healthz            200 while the process is healthy, 503 once the query failed
  GET  /readyz             200 while the query runs
  GET  /status             attempt, phase, restore, latest committed batch and checkpoint
  POST /checkpoints        trigger a checkpoint; body {"wait": "id"|"complete"|"none"} (default "id")
  GET  /checkpoints/<id>   a request by checkpoint id (chk-NNNNNN) or request id (req-NNNNNN)
  POST /savepoints         body {"name": optional, "wait": ...}
  POST /stop               body {"savepoint": bool|name, "checkpoint": bool}: drain and exit 0
  POST /promote            a standby (standby.py) starts as the next attempt; body {"attempt": n} optional
  GET  /metrics            Prometheus text format (also alone on the metrics port, 9091 in a pod)

Everything but /healthz, /readyz and /metrics needs the job's bearer token when the runtime has one;
bodies are checked strictly (api_guard.py).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import threading
import time
from typing import Any

from aiohttp import web
from prometheus_client import CONTENT_TYPE_LATEST

from sparkpoint.runtime.checkpoint.coordinator import FINAL, CheckpointRequest

from .api_guard import (
    MAX_BODY_BYTES,
    CheckpointBody,
    PromoteBody,
    SavepointBody,
    StopBody,
    auth_middleware,
    read_body,
)

log = logging.getLogger("sparkpoint.api")


async def _wait_for(req: CheckpointRequest, mode: str, timeout: float) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if req.status in FINAL or (mode == "id" and req.checkpoint_id):
            return
        await asyncio.sleep(0.02)


def build_metrics_app(runtime: Any) -> web.Application:
    """Only /metrics, for the dedicated metrics port a NetworkPolicy can open to Prometheus alone."""
    async def metrics(_: web.Request) -> web.Response:
        return web.Response(body=runtime.metrics.render(), headers={"Content-Type": CONTENT_TYPE_LATEST})

    app = web.Application(client_max_size=1024)
    app.router.add_get("/metrics", metrics)
    return app


def build_app(runtime: Any, token: str | None = None) -> web.Application:
    routes = web.RouteTableDef()

    @routes.get("/healthz")
    async def healthz(_: web.Request) -> web.Response:
        ok = runtime.healthy()
        return web.json_response({"status": "ok" if ok else "failed", "phase": runtime.phase},
                                 status=200 if ok else 503)

    @routes.get("/readyz")
    async def readyz(_: web.Request) -> web.Response:
        ok = runtime.ready()
        return web.json_response({"ready": ok, "phase": runtime.phase}, status=200 if ok else 503)

    @routes.get("/status")
    async def status(_: web.Request) -> web.Response:
        return web.json_response(await asyncio.to_thread(runtime.status))

    async def trigger(request: web.Request, kind: str) -> web.Response:
        body = await read_body(request, SavepointBody if kind == "savepoint" else CheckpointBody)
        if runtime.coordinator is None or runtime.phase != "running":
            return web.json_response({"error": f"runtime is {runtime.phase}, not running"}, status=409)
        name = body.name if isinstance(body, SavepointBody) else None
        req = runtime.coordinator.request(kind=kind, trigger="api", savepoint_name=name)
        await _wait_for(req, body.wait, body.wait_seconds)
        doc = req.to_json()
        doc["id"] = req.checkpoint_id or req.request_id
        code = 200 if req.status == "completed" else 500 if req.status in ("failed", "timed_out") else 202
        return web.json_response(doc, status=code)

    @routes.post("/checkpoints")
    async def post_checkpoint(request: web.Request) -> web.Response:
        return await trigger(request, "checkpoint")

    @routes.post("/savepoints")
    async def post_savepoint(request: web.Request) -> web.Response:
        return await trigger(request, "savepoint")

    @routes.get("/checkpoints/{id}")
    async def get_checkpoint(request: web.Request) -> web.Response:
        coord = runtime.coordinator
        req = coord.find(request.match_info["id"]) if coord else None
        if req is None:
            return web.json_response({"error": f"no checkpoint request {request.match_info['id']!r} "
                                               "in this attempt"}, status=404)
        return web.json_response(req.to_json())

    @routes.post("/stop")
    async def stop(request: web.Request) -> web.Response:
        body = await read_body(request, StopBody)
        runtime.request_stop(savepoint=body.savepoint, checkpoint=body.checkpoint)
        return web.json_response({"stopping": True}, status=202)

    @routes.post("/promote")
    async def promote(request: web.Request) -> web.Response:
        body = await read_body(request, PromoteBody)
        standby = getattr(runtime, "standby", None)
        if standby is None:
            return web.json_response({"error": "not a standby (started as an attempt)"}, status=409)
        code, doc = standby.request_promotion(body.attempt, runtime.launch, runtime.phase)
        return web.json_response(doc, status=code)

    @routes.get("/metrics")
    async def metrics(_: web.Request) -> web.Response:
        return web.Response(body=runtime.metrics.render(), headers={"Content-Type": CONTENT_TYPE_LATEST})

    app = web.Application(client_max_size=MAX_BODY_BYTES, middlewares=[auth_middleware(token)])
    app.add_routes(routes)
    return app


class ControlServer:
    """Runs the aiohttp apps on a daemon thread; `start()` returns once the ports are bound.
    `metrics_port` None serves no separate metrics port (a local run); 0 picks a free one."""

    def __init__(self, runtime: Any, host: str, port: int, token: str | None = None,
                 metrics_port: int | None = None):
        self.runtime, self.host, self.port, self.token = runtime, host, port, token
        self.metrics_port = metrics_port
        self._loop = asyncio.new_event_loop()
        self._runners: list[web.AppRunner] = []
        self._started = threading.Event()
        self._error: BaseException | None = None
        self._thread = threading.Thread(target=self._serve, name="control-api", daemon=True)

    def _listen(self, app: web.Application, port: int) -> int:
        runner = web.AppRunner(app, access_log=None)
        self._loop.run_until_complete(runner.setup())
        self._runners.append(runner)
        site = web.TCPSite(runner, self.host, port)
        self._loop.run_until_complete(site.start())
        return site._server.sockets[0].getsockname()[1] if port == 0 else port  # type: ignore[union-attr]

    def _serve(self) -> None:
        asyncio.set_event_loop(self._loop)
        try:
            self.port = self._listen(build_app(self.runtime, self.token), self.port)
            if self.metrics_port is not None:
                self.metrics_port = self._listen(build_metrics_app(self.runtime), self.metrics_port)
        except BaseException as exc:
            self._error = exc
            self._started.set()
            return
        self._started.set()
        log.info("control API listening", extra={"host": self.host, "port": self.port,
                                                 "metricsPort": self.metrics_port, "auth": self.token is not None})
        self._loop.run_forever()

    def start(self) -> None:
        self._thread.start()
        self._started.wait(30)
        if self._error:
            raise RuntimeError(f"control API cannot listen on {self.host}:{self.port}: {self._error}")

    def stop(self) -> None:
        if self._runners and self._loop.is_running():
            for runner in self._runners:
                fut = asyncio.run_coroutine_threadsafe(runner.cleanup(), self._loop)
                with contextlib.suppress(Exception):  # shutting down anyway
                    fut.result(timeout=5)
            self._loop.call_soon_threadsafe(self._loop.stop)
        self._thread.join(timeout=5)
