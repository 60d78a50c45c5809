"""The UI front (issue 30, runtime/service/ui_front.py): requests under the Ingress path reach Spark's
UI with the path stripped, others pass unchanged, Spark's redirects come back under the path, and it
is read-only. Here a real aiohttp server stands in for Spark's UI and records what it was asked; the
same front before real Spark: tests/runtime/test_ui_spark.py."""

from __future__ import annotations

import asyncio
import threading
import urllib.error
import urllib.request

import pytest
from aiohttp import web

from sparkpoint.runtime.service.ui_front import UiFront, front_location, upstream_path

BASE = "/sparkpoint/team/clicks"


def test_upstream_path_strips_only_the_base() -> None:
    assert upstream_path(f"{BASE}/jobs/?id=1", BASE) == "/jobs/?id=1"
    assert upstream_path(BASE, BASE) == "/" and upstream_path(f"{BASE}?x=1", BASE) == "/?x=1"
    assert upstream_path("/jobs/", BASE) == "/jobs/"  # port-forward at the root: unchanged
    assert upstream_path(f"{BASE}-other/jobs/", BASE) == f"{BASE}-other/jobs/"  # another job's prefix


def test_front_location_puts_sparks_redirects_under_the_base() -> None:
    up = "http://127.0.0.1:4555"
    assert front_location(f"{up}/jobs/", up, BASE) == f"{BASE}/jobs/"
    assert front_location("/jobs/", up, BASE) == f"{BASE}/jobs/"
    assert front_location(f"{BASE}/jobs/", up, BASE) == f"{BASE}/jobs/"  # already under it
    assert front_location("https://elsewhere.example/x", up, BASE) == "https://elsewhere.example/x"


@pytest.fixture
def spark_stand_in():
    """An HTTP server on loopback answering like Spark's UI: a page, a redirect, a JSON answer."""
    seen: list[str] = []
    loop = asyncio.new_event_loop()
    ready = threading.Event()
    box: dict = {}

    async def handle(request: web.Request) -> web.StreamResponse:
        seen.append(request.rel_url.raw_path_qs)
        if request.path == "/":
            raise web.HTTPFound(f"http://127.0.0.1:{box['port']}/jobs/")
        creds = [k for k in ("Authorization", "Cookie", "Proxy-Authorization") if k in request.headers]
        return web.Response(text=f"<a href='{BASE}/stages/'>stages</a> at {request.rel_url.raw_path_qs} "
                                 f"credentials={creds}",
                            content_type="text/html")

    def serve() -> None:
        asyncio.set_event_loop(loop)
        app = web.Application()
        app.router.add_route("*", "/{tail:.*}", handle)
        runner = web.AppRunner(app)
        loop.run_until_complete(runner.setup())
        site = web.TCPSite(runner, "127.0.0.1", 0)
        loop.run_until_complete(site.start())
        box["port"] = site._server.sockets[0].getsockname()[1]
        ready.set()
        loop.run_forever()

    threading.Thread(target=serve, daemon=True).start()
    ready.wait(10)
    yield box["port"], seen
    loop.call_soon_threadsafe(loop.stop)


class _NoRedirect(urllib.request.HTTPRedirectHandler):
    def redirect_request(self, *args, **kwargs):  # noqa: ANN002, ANN003 - urllib's signature
        return None


def test_the_front_strips_the_base_passes_the_root_and_refuses_writes(spark_stand_in) -> None:
    port, seen = spark_stand_in
    front = UiFront("127.0.0.1", 0, f"http://127.0.0.1:{port}", BASE).start()
    try:
        url = f"http://127.0.0.1:{front.port}"
        with urllib.request.urlopen(f"{url}{BASE}/jobs/?id=3", timeout=10) as r:
            assert r.status == 200 and b"at /jobs/?id=3" in r.read()
        with urllib.request.urlopen(f"{url}/jobs/", timeout=10) as r:  # kubectl sparkpoint ui: the root
            assert b"at /jobs/" in r.read()
        opener = urllib.request.build_opener(_NoRedirect)
        with pytest.raises(urllib.error.HTTPError) as redirect:
            opener.open(f"{url}{BASE}/", timeout=10)
        assert redirect.value.code == 302 and redirect.value.headers["Location"] == f"{BASE}/jobs/"
        with pytest.raises(urllib.error.HTTPError) as refused:
            urllib.request.urlopen(urllib.request.Request(f"{url}{BASE}/jobs/job/kill/", data=b"id=1"), timeout=10)
        assert refused.value.code == 405
        assert seen == ["/jobs/?id=3", "/jobs/", "/"]  # the POST never reached Spark
    finally:
        front.stop()


def test_a_taken_ui_port_moves_the_front_to_the_next_like_spark(monkeypatch, spark_stand_in) -> None:
    import socket
    from types import SimpleNamespace

    from sparkpoint.runtime.service.ui_front import start_if_proxied
    from sparkpoint.runtime.spec.rules import SPARK_UI_PORT_ENV, SPARK_UI_PROXY_BASE_ENV

    upstream_port, _ = spark_stand_in
    spark = SimpleNamespace(sparkContext=SimpleNamespace(uiWebUrl=f"http://vm:{upstream_port}"))
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        monkeypatch.setenv(SPARK_UI_PORT_ENV, str(port))
        monkeypatch.setenv(SPARK_UI_PROXY_BASE_ENV, BASE)
        front = start_if_proxied(spark, True, "127.0.0.1")
        assert front is not None and front.port > port
        front.stop()
        assert start_if_proxied(spark, False, "127.0.0.1") is None  # UI off: no front


@pytest.mark.parametrize("path", [
    "/jobs/job/kill/?id=1", "/stages/stage/kill/?id=1&terminate=true", f"{BASE}/jobs/job/kill/?id=1",
    "/jobs/job/%6Bill/?id=1", "/jobs/job/%256Bill/?id=1", "/jobs/job/KILL/?id=1", "/jobs/job/kill;x=y/?id=1",
    "/stages/stage/kill"])
def test_the_front_refuses_sparks_kill_endpoints_on_get(spark_stand_in, path) -> None:
    port, seen = spark_stand_in
    front = UiFront("127.0.0.1", 0, f"http://127.0.0.1:{port}", BASE).start()
    try:
        with pytest.raises(urllib.error.HTTPError) as refused:
            urllib.request.urlopen(f"http://127.0.0.1:{front.port}{path}", timeout=10)
        assert refused.value.code == 403
        assert seen == []  # never reached Spark
    finally:
        front.stop()


def test_the_front_never_passes_the_ingress_users_credentials_to_spark(spark_stand_in) -> None:
    port, _ = spark_stand_in
    front = UiFront("127.0.0.1", 0, f"http://127.0.0.1:{port}", BASE).start()
    try:
        request = urllib.request.Request(f"http://127.0.0.1:{front.port}{BASE}/jobs/", headers={
            "Authorization": "Bearer the-users-sso-token", "Cookie": "session=abc",
            "Proxy-Authorization": "Basic eDp5"})
        with urllib.request.urlopen(request, timeout=10) as r:
            assert b"credentials=[]" in r.read()
    finally:
        front.stop()
