"""HTTP client of the runtime's control API (docs/design.md §8; the endpoints are documented in
sparkpoint/runtime/service/api.py). asyncio/aiohttp because kopf runs on an event loop.

Every call returns the decoded JSON object of a 2xx answer or raises RuntimeApiError: `.status` is
the HTTP status, or None when the runtime was unreachable or did not answer in time, so callers
can tell "the pod is not there" from "the pod said no".
"""

from __future__ import annotations

import errno
import json
from typing import Any

import aiohttp

from .kube.control_token import ControlTokens

DEFAULT_PORT = 8080


class Endpoint(str):
    """A runtime's base URL that also names its job, so the client can find the job's token."""

    namespace: str | None
    job: str | None

    def __new__(cls, url: str, namespace: str | None = None, job: str | None = None) -> Endpoint:
        self = super().__new__(cls, url)
        self.namespace, self.job = namespace, job
        return self


def base_url(pod_ip: str, port: int = DEFAULT_PORT, namespace: str | None = None, job: str | None = None) -> Endpoint:
    host = f"[{pod_ip}]" if ":" in pod_ip else pod_ip  # an IPv6 pod IP needs brackets
    return Endpoint(f"http://{host}:{port}", namespace, job)


class RuntimeApiError(Exception):
    """`unreachable`: no answer at all, the request timed out or found no route to the pod (a frozen
    runtime, a node that stopped answering); a refused connection is not (the pod's network answers)."""

    def __init__(self, message: str, status: int | None = None, body: dict[str, Any] | None = None,
                 unreachable: bool = False):
        super().__init__(message)
        self.status = status
        self.body = body or {}
        self.unreachable = unreachable


_NO_ROUTE = {errno.EHOSTUNREACH, errno.ENETUNREACH, errno.ETIMEDOUT, errno.EHOSTDOWN}


def _unreachable(exc: BaseException) -> bool:
    """A timeout (aiohttp's are TimeoutErrors) or no route (ClientConnectorError keeps the errno)."""
    return isinstance(exc, TimeoutError) or (isinstance(exc, OSError) and exc.errno in _NO_ROUTE)


class RuntimeClient:
    def __init__(self, timeout: float = 5.0, tokens: ControlTokens | None = None):
        self.timeout = timeout
        self.tokens = tokens
        self._session: aiohttp.ClientSession | None = None

    def _get_session(self) -> aiohttp.ClientSession:
        # Created on first use, inside the running loop (aiohttp binds a session to its loop).
        if self._session is None or self._session.closed:
            self._session = aiohttp.ClientSession(timeout=aiohttp.ClientTimeout(total=self.timeout))
        return self._session

    def _server_wait(self) -> float:
        # How long the runtime may hold a trigger waiting for a checkpoint id: less than our own
        # timeout, so a busy runtime answers 202 with the request id instead of timing us out.
        return max(0.5, self.timeout * 0.6)

    async def _headers(self, base: str) -> dict[str, str]:
        """The one place the bearer token is attached (issue 11)."""
        namespace, job = getattr(base, "namespace", None), getattr(base, "job", None)
        if self.tokens is None or namespace is None or job is None:
            return {}
        token = await self.tokens.get(namespace, job)
        return {"Authorization": f"Bearer {token}"} if token else {}

    async def _send(self, method: str, base: str, url: str, body: dict[str, Any] | None,
                    timeout: float | None = None) -> tuple[int, str]:
        session = self._get_session()  # (timeout=None would be no timeout at all to aiohttp)
        own = aiohttp.ClientTimeout(total=timeout) if timeout is not None else session.timeout
        async with session.request(method, url, json=body, headers=await self._headers(base), timeout=own) as resp:
            return resp.status, await resp.text()

    async def _call(self, method: str, base: str, path: str, body: dict[str, Any] | None = None,
                    request_doc_ok: bool = False, timeout: float | None = None) -> dict[str, Any]:
        url = f"{base}{path}"
        try:
            status, text = await self._send(method, base, url, body, timeout)
            if status in (401, 403) and self.tokens is not None and getattr(base, "job", None):
                # A cached token from a Secret since recreated: read it again, once.
                self.tokens.forget(base.namespace, base.job)  # type: ignore[attr-defined]
                status, text = await self._send(method, base, url, body)
        except (TimeoutError, aiohttp.ClientError, OSError) as exc:
            raise RuntimeApiError(f"{method} {url}: runtime unreachable: {type(exc).__name__}: {exc}",
                                  unreachable=_unreachable(exc)) from None
        try:
            doc = json.loads(text) if text else {}
        except ValueError:
            doc = {"raw": text[:500]}
        if not isinstance(doc, dict):
            doc = {"value": doc}
        if request_doc_ok and status == 500 and "requestId" in doc:
            return doc  # the request exists and already failed or timed out: an answer, not an error
        if not 200 <= status < 300:
            reason = doc.get("error") or doc.get("status") or text[:200]
            raise RuntimeApiError(f"{method} {url}: HTTP {status}: {reason}", status=status, body=doc)
        return doc

    async def status(self, base: str) -> dict[str, Any]:
        return await self._call("GET", base, "/status")

    async def healthz(self, base: str, timeout: float | None = None) -> dict[str, Any]:
        """GET /healthz, the liveness poll (decisions/liveness.py): the cheapest request the runtime answers
        (no token, no thread hop); a 503 (the query failed) raises with its .status, still an answer."""
        # str(base): a plain URL, so no token is looked up for it
        return await self._call("GET", str(base), "/healthz", timeout=min(timeout or self.timeout, self.timeout))

    async def trigger_checkpoint(self, base: str) -> dict[str, Any]:
        """Returns the request as the runtime knows it; `id` is the checkpoint id once assigned,
        else the request id (req-NNNNNN), both accepted by get_checkpoint. A request that failed
        at once comes back with status "failed" (HTTP 500 with the request document), not raised."""
        return await self._call("POST", base, "/checkpoints", {"wait": "id", "timeout": self._server_wait()},
                                request_doc_ok=True)

    async def get_checkpoint(self, base: str, any_id: str) -> dict[str, Any]:
        return await self._call("GET", base, f"/checkpoints/{any_id}")

    async def trigger_savepoint(self, base: str, name: str | None) -> dict[str, Any]:
        body: dict[str, Any] = {"wait": "id", "timeout": self._server_wait()}
        if name is not None:
            body["name"] = name
        return await self._call("POST", base, "/savepoints", body, request_doc_ok=True)

    async def stop(self, base: str, savepoint: bool | str | None = None, checkpoint: bool = True) -> dict[str, Any]:
        return await self._call("POST", base, "/stop", {"savepoint": savepoint, "checkpoint": checkpoint})

    async def promote(self, base: str, attempt: int) -> dict[str, Any]:
        """POST /promote: a standby starts as `attempt` (docs/design.md §8). 202 (promoting) and 200
        (promoted already: a repeated call) are success; a 409 (another attempt's standby, one that is
        stopping, or no standby) raises with .status 409."""
        return await self._call("POST", base, "/promote", {"attempt": attempt})

    async def close(self) -> None:
        if self._session is not None:
            await self._session.close()
            self._session = None
