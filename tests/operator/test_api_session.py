"""kopf's session to the API server holds at most a bounded number of connections (kopf's own has
none: a 1,000-job ramp opened ~300 TLS connections, ~80 MiB of read buffers), with the same
credentials kopf would use."""

from __future__ import annotations

import asyncio

import kopf
import pytest
from aiohttp import web

from sparkpoint.operator.kube import api_session


def test_limit_counts_the_watches_of_every_namespace() -> None:
    one = api_session.connection_limit(["a"], environ={})
    three = api_session.connection_limit(["a", "b", "c"], environ={})
    assert three - one == 2 * api_session.WATCHES_PER_NAMESPACE
    assert api_session.connection_limit(None, environ={}) == one  # all namespaces: one watch per kind
    assert one > api_session.WATCHES_PER_NAMESPACE


def test_environment_overrides_the_limit() -> None:
    assert api_session.connection_limit(["a"], environ={api_session.ENV_LIMIT: "7"}) == 7
    assert api_session.connection_limit(["a"], environ={api_session.ENV_LIMIT: "0"}) == 0
    with pytest.raises(ValueError, match=api_session.ENV_LIMIT):
        api_session.connection_limit(["a"], environ={api_session.ENV_LIMIT: "-1"})


def test_requests_beyond_the_limit_wait_for_a_connection() -> None:
    asyncio.run(_concurrent_requests())


async def _concurrent_requests() -> None:
    in_flight, most, peers, headers = 0, 0, set(), set()

    async def slow(request: web.Request) -> web.Response:
        nonlocal in_flight, most
        in_flight += 1
        most = max(most, in_flight)
        peers.add(request.transport.get_extra_info("peername"))
        headers.add(request.headers.get("Authorization"))
        await asyncio.sleep(0.05)
        in_flight -= 1
        return web.json_response({})

    app = web.Application()
    app.router.add_get("/api", slow)
    runner = web.AppRunner(app)
    await runner.setup()
    site = web.TCPSite(runner, "127.0.0.1", 0)
    await site.start()
    port = site._server.sockets[0].getsockname()[1]
    try:
        login = api_session.session_for(
            kopf.ConnectionInfo(server=f"http://127.0.0.1:{port}", token="s3cret"), limit=3)
        assert login.server == f"http://127.0.0.1:{port}"
        async with login.aiohttp_session as session:
            async def get() -> int:
                async with session.get(f"{login.server}/api") as resp:
                    return resp.status
            assert await asyncio.gather(*(get() for _ in range(20))) == [200] * 20
    finally:
        await runner.cleanup()
    assert most == 3  # queued, not refused; and never more than the limit
    assert len(peers) == 3  # connections are reused
    assert headers == {"Bearer s3cret"}
