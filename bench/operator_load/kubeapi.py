"""A small asyncio client of the Kubernetes API (aiohttp, client certificates from a kubeconfig).

The harness plays a kubelet for a thousand pods and creates a thousand custom resources from one
event loop, so it cannot use the blocking `kubernetes` client; it needs only these few verbs.
"""

from __future__ import annotations

import asyncio
import json
import ssl
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import aiohttp

MERGE = "application/merge-patch+json"


class ApiError(Exception):
    def __init__(self, status: int, message: str):
        super().__init__(f"HTTP {status}: {message[:300]}")
        self.status = status


def _file_or_data(base: Path, entry: dict[str, Any], key: str) -> Path:
    if key not in entry:
        raise ValueError(f"kubeconfig entry lacks {key} (only file references are supported)")
    path = Path(entry[key])
    return path if path.is_absolute() else base / path


def load_kubeconfig(path: Path) -> tuple[str, ssl.SSLContext]:
    """(server URL, TLS context) of the current context of a JSON kubeconfig (the local cluster's)."""
    doc = json.loads(path.read_text())
    ctx = next(c["context"] for c in doc["contexts"] if c["name"] == doc["current-context"])
    cluster = next(c["cluster"] for c in doc["clusters"] if c["name"] == ctx["cluster"])
    user = next(u["user"] for u in doc["users"] if u["name"] == ctx["user"])
    tls = ssl.create_default_context(cafile=str(_file_or_data(path.parent, cluster, "certificate-authority")))
    tls.load_cert_chain(str(_file_or_data(path.parent, user, "client-certificate")),
                        str(_file_or_data(path.parent, user, "client-key")))
    return cluster["server"], tls


class KubeApi:
    def __init__(self, kubeconfig: Path, timeout: float = 90.0, connections: int = 16):
        self.server, tls = load_kubeconfig(kubeconfig)
        self._session = aiohttp.ClientSession(
            connector=aiohttp.TCPConnector(ssl=tls, limit=connections),
            timeout=aiohttp.ClientTimeout(total=timeout))

    async def close(self) -> None:
        await self._session.close()

    async def request(self, method: str, path: str, body: Any = None, content_type: str = "application/json",
                      **params: Any) -> dict[str, Any]:
        data = json.dumps(body) if body is not None else None
        async with self._session.request(method, self.server + path, data=data, params=params or None,
                                         headers={"Content-Type": content_type}) as resp:
            text = await resp.text()
            if resp.status >= 300:
                raise ApiError(resp.status, text)
            return json.loads(text) if text else {}

    async def get(self, path: str, tries: int = 3, **params: Any) -> dict[str, Any]:
        """A read is retried on a timeout: the API server of a loaded 2-core machine may stall."""
        for attempt in range(1, tries + 1):
            try:
                return await self.request("GET", path, **params)
            except (TimeoutError, aiohttp.ClientConnectionError, ApiError) as exc:
                if attempt == tries or (isinstance(exc, ApiError) and exc.status < 500):
                    raise
                await asyncio.sleep(2.0)
        raise AssertionError("unreachable")

    async def create(self, path: str, body: dict[str, Any], exist_ok: bool = True) -> dict[str, Any]:
        try:
            return await self.request("POST", path, body)
        except ApiError as exc:
            if exc.status == 409 and exist_ok:
                return {}
            raise

    async def merge_patch(self, path: str, patch: dict[str, Any]) -> dict[str, Any]:
        return await self.request("PATCH", path, patch, content_type=MERGE)

    async def delete(self, path: str, body: dict[str, Any] | None = None) -> None:
        try:
            await self.request("DELETE", path, body)
        except ApiError as exc:
            if exc.status != 404:
                raise

    async def watch(self, path: str, resource_version: str, timeout_seconds: int = 60,
                    **params: Any) -> AsyncIterator[dict[str, Any]]:
        """Events of one watch request (it ends after `timeout_seconds`; callers loop and relist)."""
        query = dict(params, watch="true", resourceVersion=resource_version,
                     timeoutSeconds=str(timeout_seconds), allowWatchBookmarks="false")
        timeout = aiohttp.ClientTimeout(total=timeout_seconds + 15, sock_read=timeout_seconds + 10)
        async with self._session.get(self.server + path, params=query, timeout=timeout) as resp:
            if resp.status >= 300:
                raise ApiError(resp.status, await resp.text())
            while True:
                line = await resp.content.readline()
                if not line:
                    return
                yield json.loads(line)
