"""Stand-ins for the runtimes of many pods: the control API (runtime/service/api.py shapes) served
on every pod IP from one asyncio process, each POST /checkpoints completing at once and recorded.

A checkpoint completes instantly here: what is measured is the operator, not Spark or the store.
"""

from __future__ import annotations

import logging
import time
from collections import deque
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any

from aiohttp import web

log = logging.getLogger("operator-load")
RECENT = 10  # GET /status lists this many recent requests, as the real runtime does


def iso_now(ts: float) -> str:
    return datetime.fromtimestamp(ts, UTC).isoformat().replace("+00:00", "Z")


@dataclass
class PodRuntime:
    """One fake runtime process: a pod's attempt, its checkpoints, and when triggers arrived."""

    pod: str  # namespace/name
    attempt: int
    started: float = field(default_factory=time.time)
    stopping: bool = False
    next_id: int = 1
    recent: deque = field(default_factory=lambda: deque(maxlen=RECENT))
    latest: dict[str, Any] | None = None

    def trigger(self, now: float) -> dict[str, Any]:
        cid, rid = f"chk-{self.next_id:06d}", f"req-{self.next_id:06d}"
        self.next_id += 1
        doc = {"requestId": rid, "id": cid, "kind": "checkpoint", "trigger": "api", "savepoint": None,
               "status": "completed", "batchId": self.next_id, "error": None, "syncSeconds": 0.0,
               "asyncSeconds": 0.0, "created": now, "bytes": 1024, "newBytes": 0}
        self.recent.append(doc)
        self.latest = {"id": cid, "batchId": self.next_id, "completed": iso_now(now), "bytes": 1024, "newBytes": 0}
        return doc

    def status(self) -> dict[str, Any]:
        return {"job": self.pod, "attempt": self.attempt, "phase": "draining" if self.stopping else "running",
                "restore": None, "latestCommittedBatch": self.next_id, "lastProgress": None,
                "latestCheckpoint": self.latest, "checkpointsInFlight": 0, "recentCheckpoints": list(self.recent)}


class TriggerLog:
    """Arrival times of POST /checkpoints per pod (namespace/name: one attempt each)."""

    def __init__(self) -> None:
        self.arrivals: dict[str, list[float]] = {}

    def record(self, pod: str, at: float) -> None:
        self.arrivals.setdefault(pod, []).append(at)

    def lags(self, interval: float, since: float, until: float) -> list[float]:
        """Lags of triggers that arrived within [since, until] (the steady window)."""
        out: list[float] = []
        for times in self.arrivals.values():
            pairs = zip(times, times[1:], strict=False)
            out += [b - a - interval for a, b in pairs if since <= b <= until]
        return out


class RuntimeFleet:
    """The control API on many addresses: a site per pod IP, all in one aiohttp application.
    The request's local address tells which pod it was sent to."""

    def __init__(self, port: int, on_stop: Any = None):
        self.port = port
        self.by_ip: dict[str, PodRuntime] = {}
        self.sites: dict[str, web.TCPSite] = {}
        self.triggers = TriggerLog()
        self.on_stop = on_stop  # async (ip) -> None: the pod's runtime exited 0 after POST /stop
        self._runner: web.AppRunner | None = None

    async def start(self) -> None:
        self._runner = web.AppRunner(self._app(), access_log=None, shutdown_timeout=1.0)
        await self._runner.setup()

    async def add(self, ip: str, pod: str, attempt: int) -> None:
        self.by_ip[ip] = PodRuntime(pod, attempt)
        if ip not in self.sites:
            site = web.TCPSite(self._runner, ip, self.port, reuse_address=True)
            await site.start()
            self.sites[ip] = site

    async def remove(self, ip: str) -> None:
        self.by_ip.pop(ip, None)
        site = self.sites.pop(ip, None)
        if site is not None:
            await site.stop()

    async def close(self) -> None:
        for ip in list(self.sites):
            await self.remove(ip)
        if self._runner is not None:
            await self._runner.cleanup()

    def _runtime(self, request: web.Request) -> PodRuntime:
        sockname = request.transport.get_extra_info("sockname") if request.transport else None
        runtime = self.by_ip.get(sockname[0]) if sockname else None
        if runtime is None:
            raise web.HTTPServiceUnavailable(text='{"error": "no runtime on this address"}',
                                             content_type="application/json")
        return runtime

    def _app(self) -> web.Application:
        routes = web.RouteTableDef()

        @routes.get("/healthz")
        @routes.get("/readyz")
        async def health(request: web.Request) -> web.Response:
            return web.json_response({"status": "ok", "ready": True, "phase": self._runtime(request).status()["phase"]})

        @routes.get("/status")
        async def status(request: web.Request) -> web.Response:
            return web.json_response(self._runtime(request).status())

        @routes.post("/checkpoints")
        @routes.post("/savepoints")
        async def trigger(request: web.Request) -> web.Response:
            runtime, now = self._runtime(request), time.time()
            if request.path == "/checkpoints":
                self.triggers.record(runtime.pod, now)
            return web.json_response(runtime.trigger(now))

        @routes.get("/checkpoints/{id}")
        async def get_checkpoint(request: web.Request) -> web.Response:
            wanted = request.match_info["id"]
            for doc in self._runtime(request).recent:
                if wanted in (doc["id"], doc["requestId"]):
                    return web.json_response(doc)
            return web.json_response({"error": f"no checkpoint request {wanted!r}"}, status=404)

        @routes.post("/stop")
        async def stop(request: web.Request) -> web.Response:
            runtime = self._runtime(request)
            runtime.stopping = True
            if self.on_stop is not None:
                sockname = request.transport.get_extra_info("sockname")
                await self.on_stop(sockname[0])
            return web.json_response({"stopping": True}, status=202)

        app = web.Application()
        app.add_routes(routes)
        return app
