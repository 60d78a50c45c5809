"""Spark's live UI under a path (the chart's uiIngress, docs/design.md §9): `spark.ui.proxyBase` only
makes Spark write its links with the path; Spark's server itself answers at `/` and nothing under
the path, so whatever is in front must strip it, which a plain Ingress cannot do (each controller
has its own rewrite annotation or resource). This front does it in the pod, for every controller:
it listens on the pod's UI port (4040) and forwards to Spark's UI on a loopback port of its own,
removing the path when a request carries it and passing others through unchanged (`kubectl
sparkpoint ui` keeps working at `/`). Redirects Spark sends to its own address come back under the
path. Read-only like the UI itself: GET and HEAD only, and no path with a `kill` segment (Spark
answers its kill links on GET). The Ingress user's credentials (Authorization, Cookie) are never
passed to Spark, which needs none. Without a proxy base (the default) none of
this runs and Spark serves 4040 directly.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import re
import threading
from urllib.parse import unquote, urlsplit

import aiohttp
from aiohttp import web

from sparkpoint.runtime.spec import SPARK_UI_PORT_ENV, SPARK_UI_PROXY_BASE_ENV

log = logging.getLogger("sparkpoint.ui")

_SESSION = web.AppKey("session", aiohttp.ClientSession)
_HOP_BY_HOP = {"connection", "keep-alive", "transfer-encoding", "te", "trailer", "upgrade", "content-length",
               "content-encoding"}

# The Ingress user's credentials: Spark's UI needs none, and must not see the caller's.
_CREDENTIALS = {"authorization", "cookie", "proxy-authorization"}


def is_kill(raw_path: str) -> bool:
    """Whether a request path names one of Spark's kill endpoints (/jobs/job/kill/, /stages/stage/kill/,
    or any other path with a `kill` segment), however it is encoded: percent-escapes decoded until
    stable (Jetty decodes them), Jetty's `;param` path parameters and case ignored."""
    path = raw_path.split("?", 1)[0]
    for _ in range(5):
        decoded = unquote(path)
        if decoded == path:
            break
        path = decoded
    return "kill" in re.split(r"[/;\\]", path.lower())


def upstream_path(raw_path: str, base: str) -> str:
    """The path Spark serves for a request path: `base` stripped when the path is under it."""
    if raw_path == base or raw_path.startswith(base + "/") or raw_path.startswith(base + "?"):
        rest = raw_path[len(base):]
        return rest if rest.startswith("/") else "/" + rest
    return raw_path


def front_location(location: str, upstream: str, base: str) -> str:
    """A redirect to Spark's own address (or to a bare path Spark made) goes back under `base`."""
    if location.startswith(upstream):
        location = location[len(upstream):] or "/"
    if location.startswith("/") and not location.startswith(base + "/") and location != base:
        return base + location
    return location


def build_front(upstream: str, base: str) -> web.Application:
    """upstream: 'http://127.0.0.1:<Spark's UI port>'; base: '/prefix/<namespace>/<job>'."""
    app = web.Application()

    async def on_startup(app: web.Application) -> None:
        app[_SESSION] = aiohttp.ClientSession(timeout=aiohttp.ClientTimeout(total=60), auto_decompress=False)

    async def on_cleanup(app: web.Application) -> None:
        await app[_SESSION].close()

    async def forward(request: web.Request) -> web.StreamResponse:
        if request.method not in ("GET", "HEAD"):
            return web.Response(status=405, text="the Spark UI behind Sparkpoint is read-only\n")
        if is_kill(request.rel_url.raw_path_qs):
            return web.Response(status=403, text="the Spark UI behind Sparkpoint kills nothing\n")
        target = upstream + upstream_path(request.rel_url.raw_path_qs, base)
        headers = {k: v for k, v in request.headers.items()
                   if k.lower() not in ("host", *_HOP_BY_HOP, *_CREDENTIALS)}
        try:
            async with app[_SESSION].request(request.method, target, headers=headers,
                                              allow_redirects=False) as answer:
                body = await answer.read()
                out = {k: v for k, v in answer.headers.items() if k.lower() not in _HOP_BY_HOP}
                if "Location" in out:
                    out["Location"] = front_location(out["Location"], upstream, base)
                if answer.headers.get("Content-Encoding"):  # the bytes stay as Spark compressed them
                    out["Content-Encoding"] = answer.headers["Content-Encoding"]
                return web.Response(status=answer.status, headers=out, body=body)
        except (TimeoutError, aiohttp.ClientError) as exc:
            return web.Response(status=502, text=f"Spark's UI did not answer: {type(exc).__name__}\n")

    app.router.add_route("*", "/{tail:.*}", forward)
    app.on_startup.append(on_startup)
    app.on_cleanup.append(on_cleanup)
    return app


class UiFront:
    """The front on its own thread and event loop (the Spark driver thread never waits on HTTP). It
    listens on `host` (the pod IP, as the control API) and, if free, on 127.0.0.1 too: `kubectl
    port-forward` connects to the pod's loopback (on the local test cluster pods share the host's
    loopback, so a second pod's front finds it taken and does without)."""

    def __init__(self, host: str, port: int, upstream: str, base: str):
        self.host, self.port, self.upstream, self.base = host, port, upstream, base
        self._loop = asyncio.new_event_loop()
        self._runner: web.AppRunner | None = None
        self._ready = threading.Event()
        self._error: BaseException | None = None
        self._thread = threading.Thread(target=self._serve, name="ui-front", daemon=True)

    def _serve(self) -> None:
        asyncio.set_event_loop(self._loop)
        try:
            self._runner = web.AppRunner(build_front(self.upstream, self.base), access_log=None)
            self._loop.run_until_complete(self._runner.setup())
            site = web.TCPSite(self._runner, self.host, self.port)
            self._loop.run_until_complete(site.start())
            if self.port == 0:
                self.port = site._server.sockets[0].getsockname()[1]  # type: ignore[union-attr]
        except BaseException as exc:  # noqa: BLE001 - reported by start()
            self._error = exc
            with contextlib.suppress(Exception):
                self._loop.run_until_complete(self._runner.cleanup())  # type: ignore[union-attr]
            self._ready.set()
            return
        if self.host not in ("127.0.0.1", "localhost", "0.0.0.0"):  # noqa: S104 - a comparison, not a bind
            try:
                self._loop.run_until_complete(web.TCPSite(self._runner, "127.0.0.1", self.port).start())
            except OSError as exc:
                log.info("spark UI front not on loopback", extra={"port": self.port, "error": str(exc)})
        self._ready.set()
        log.info("spark UI front listening", extra={"host": self.host, "port": self.port, "base": self.base,
                                                    "upstream": self.upstream})
        self._loop.run_forever()

    def start(self) -> UiFront:
        self._thread.start()
        self._ready.wait(30)
        if self._error is not None:
            raise RuntimeError(f"Spark UI front cannot listen on {self.host}:{self.port}: {self._error}")
        return self

    def stop(self) -> None:
        if self._runner is not None and self._loop.is_running():
            done = asyncio.run_coroutine_threadsafe(self._runner.cleanup(), self._loop)
            with contextlib.suppress(Exception):  # shutting down anyway
                done.result(timeout=5)
            self._loop.call_soon_threadsafe(self._loop.stop)
        self._thread.join(timeout=5)


def start_if_proxied(spark: object, ui_enabled: bool, host: str) -> UiFront | None:
    """The front when the pod's UI sits behind a path (SPARKPOINT_SPARK_UI_PROXY_BASE, set by the
    operator with --ui-path-prefix) on the pod's UI port; else None (Spark serves that port itself)."""
    port, base = os.environ.get(SPARK_UI_PORT_ENV), os.environ.get(SPARK_UI_PROXY_BASE_ENV)
    if not (ui_enabled and port and base):
        return None
    # Like Spark's own UI (spark.port.maxRetries): the next ports when the pod's is taken, which only
    # happens where pods share a network (the local test cluster). The UI is never worth the job: with
    # no port free the job runs on without it.
    for candidate in range(int(port), int(port) + 17):
        try:
            return start_for(spark, host, candidate, base)
        except RuntimeError as exc:
            last = exc
    log.warning("no Spark UI under its Ingress path: no port free", extra={"error": str(last)})
    return None


def start_for(spark: object, host: str, port: int, base: str) -> UiFront:
    """The front for a running SparkSession whose UI listens on a port Spark chose (uiWebUrl)."""
    url = spark.sparkContext.uiWebUrl  # type: ignore[attr-defined]
    ui_port = urlsplit(str(url)).port
    if not ui_port:
        raise RuntimeError(f"Spark's UI has no port to front (uiWebUrl {url!r})")
    return UiFront(host, port, f"http://127.0.0.1:{ui_port}", base).start()
