"""The runtime's control API and /metrics (DESIGN.md §8, a contract), served by aiohttp on its own
thread and event loop so the Spark driver thread is never blocked by HTTP.

  GET  /healthz            200 while the process is healthy, 503 once the query failed
  GET  /readyz             200 while the query runs
  GET  /status             attempt, phase, restore, latest committed batch and checkpoint
  POST /checkpoints        trigger a checkpoint; body {"wait": "id"|"complete"|"none"} (default "id")
  GET  /checkpoints/<id>   a request by checkpoint id (chk-NNNNNN) or request id (req-NNNNNN)
  POST /savepoints         body {"name": optional, "wait": ...}
  POST /stop               body {"savepoint": bool|name, "checkpoint": bool}: drain and exit 0
  GET  /metrics            Prometheus text format
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
import threading
import time
from typing import Any

from aiohttp import web
from prometheus_client import CONTENT_TYPE_LATEST

from sparkpoint.runtime.checkpoint.coordinator import FINAL, CheckpointRequest

log = logging.getLogger("sparkpoint.api")
_WAIT_MODES = ("none", "id", "complete")


async def _body(request: web.Request) -> dict[str, Any]:
    if not request.can_read_body:
        return {}
    try:
        data = await request.json()
    except (ValueError, json.JSONDecodeError):
        raise web.HTTPBadRequest(text=json.dumps({"error": "body is not JSON"}),
                                 content_type="application/json") from None
    if not isinstance(data, dict):
        raise web.HTTPBadRequest(text=json.dumps({"error": "body must be a JSON object"}),
                                 content_type="application/json")
    return data


async def _wait_for(req: CheckpointRequest, mode: str, timeout: float) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if req.status in FINAL or (mode == "id" and req.checkpoint_id):
            return
        await asyncio.sleep(0.02)


def build_app(runtime: Any) -> web.Application:
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
        body = await _body(request)
        mode = body.get("wait", "id")
        if mode not in _WAIT_MODES:
            return web.json_response({"error": f"wait must be one of {_WAIT_MODES}"}, status=400)
        if runtime.coordinator is None or runtime.phase != "running":
            return web.json_response({"error": f"runtime is {runtime.phase}, not running"}, status=409)
        name = body.get("name")
        if name is not None and not isinstance(name, str):
            return web.json_response({"error": "name must be a string"}, status=400)
        req = runtime.coordinator.request(kind=kind, trigger="api", savepoint_name=name)
        await _wait_for(req, mode, float(body.get("timeout", 600 if mode == "complete" else 10)))
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
        body = await _body(request)
        runtime.request_stop(savepoint=body.get("savepoint"), checkpoint=bool(body.get("checkpoint", True)))
        return web.json_response({"stopping": True}, status=202)

    @routes.get("/metrics")
    async def metrics(_: web.Request) -> web.Response:
        return web.Response(body=runtime.metrics.render(), headers={"Content-Type": CONTENT_TYPE_LATEST})

    app = web.Application()
    app.add_routes(routes)
    return app


class ControlServer:
    """Runs the aiohttp app on a daemon thread; `start()` returns once the port is bound."""

    def __init__(self, runtime: Any, host: str, port: int):
        self.runtime, self.host, self.port = runtime, host, port
        self._loop = asyncio.new_event_loop()
        self._runner: web.AppRunner | None = None
        self._started = threading.Event()
        self._error: BaseException | None = None
        self._thread = threading.Thread(target=self._serve, name="control-api", daemon=True)

    def _serve(self) -> None:
        asyncio.set_event_loop(self._loop)
        try:
            self._runner = web.AppRunner(build_app(self.runtime), access_log=None)
            self._loop.run_until_complete(self._runner.setup())
            site = web.TCPSite(self._runner, self.host, self.port)
            self._loop.run_until_complete(site.start())
            if self.port == 0:
                self.port = site._server.sockets[0].getsockname()[1]  # type: ignore[union-attr]
        except BaseException as exc:
            self._error = exc
            self._started.set()
            return
        self._started.set()
        log.info("control API listening", extra={"host": self.host, "port": self.port})
        self._loop.run_forever()

    def start(self) -> None:
        self._thread.start()
        self._started.wait(30)
        if self._error:
            raise RuntimeError(f"control API cannot listen on {self.host}:{self.port}: {self._error}")

    def stop(self) -> None:
        if self._runner is not None and self._loop.is_running():
            fut = asyncio.run_coroutine_threadsafe(self._runner.cleanup(), self._loop)
            with contextlib.suppress(Exception):  # shutting down anyway
                fut.result(timeout=5)
            self._loop.call_soon_threadsafe(self._loop.stop)
        self._thread.join(timeout=5)
