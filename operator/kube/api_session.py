"""kopf's HTTP session to the API server, with a bounded number of connections.

kopf's own session has no connection limit. When 1,000 StreamingJobs arrive at once, each of
their first rounds PATCHes its CR, so kopf opened about 300 TLS connections at the same time, and
each holds asyncio's 256 KiB TLS read buffer until the keep-alive timeout closes it: about 80 MiB
of the operator's peak RSS in a 1,000-job ramp came from those buffers alone. A bounded pool
queues requests instead of opening a connection per request in flight (the API server answers
them no faster either way).

Watch streams hold their connection for as long as they run, so the pool also counts them: the
limit is the requests in flight plus room for every watch the operator's namespaces need.
"""

from __future__ import annotations

import os
from typing import Any

import aiohttp
import kopf

REQUESTS_IN_FLIGHT = 48
# kopf watches per namespace: StreamingJobs, their savepoints, pods, the peering object, and
# namespaces themselves when a namespace pattern is given.
WATCHES_PER_NAMESPACE = 5
ENV_LIMIT = "SPARKPOINT_API_CONNECTIONS"  # 0: no limit (kopf's default)


def connection_limit(namespaces: list[str] | None, environ: Any = os.environ) -> int:
    """The connection pool's size for these namespaces (None: all namespaces, one watch per kind).
    $SPARKPOINT_API_CONNECTIONS overrides it; 0 means unlimited."""
    if environ.get(ENV_LIMIT, "").strip():
        value = int(environ[ENV_LIMIT])
        if value < 0:
            raise ValueError(f"{ENV_LIMIT} must be >= 0, got {value}")
        return value
    return REQUESTS_IN_FLIGHT + WATCHES_PER_NAMESPACE * max(1, len(namespaces or ()))


def session_for(info: kopf.ConnectionInfo, limit: int) -> kopf.AiohttpSession:
    """A kopf login result with the same server, credentials and TLS settings as `info`, over a
    pool of at most `limit` connections (must run on the event loop: the connector binds to it).
    kopf closes the session when it drops these credentials."""
    session = aiohttp.ClientSession(
        connector=aiohttp.TCPConnector(limit=limit, ssl=info.as_ssl_context()),
        headers=info.as_http_headers(),
        proxy=info.proxy_url,
        trust_env=info.trust_env,
    )
    return kopf.AiohttpSession(server=info.server, default_namespace=info.default_namespace,
                               priority=info.priority, expiration=info.expiration,
                               aiohttp_session=session)


async def login(namespaces: list[str] | None, **kwargs: Any) -> kopf.AiohttpSession | None:
    """kopf's login through the `kubernetes` client's configuration (in-cluster, then
    $KUBECONFIG), as kopf does by default, then the bounded session over it."""
    info = kopf.login_via_client(**kwargs)
    return None if info is None else session_for(info, connection_limit(namespaces))
