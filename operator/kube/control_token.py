"""The operator's side of the control API token (issue 11): a new random token per job, and a
small cache of the tokens read back from the jobs' Secrets (`<job>-control-token`, key `token`).

The token lives only in that Secret and in the operator's memory; it is never logged, put in a
CR, a ConfigMap, an Event or a metric label.
"""

from __future__ import annotations

import secrets
from collections.abc import Awaitable, Callable

from kubernetes.client.rest import ApiException

from .builders import CONTROL_TOKEN_KEY

SecretReader = Callable[[str, str], Awaitable[dict[str, str] | None]]  # (namespace, name) -> data or None


def new_token() -> str:
    return secrets.token_urlsafe(32)


class ControlTokens:
    """namespace/job -> token, read once and cached; `forget` after the runtime refused it (the Secret
    may have been recreated with the job)."""

    def __init__(self, read_secret: SecretReader):
        self._read = read_secret
        self._cache: dict[tuple[str, str], str] = {}

    async def get(self, namespace: str, job: str) -> str | None:
        key = (namespace, job)
        if key not in self._cache:
            data = await self._read(namespace, f"{job}-control-token")
            token = (data or {}).get(CONTROL_TOKEN_KEY)
            if not token:
                return None  # not created yet: the call goes out without a token and gets a 401
            self._cache[key] = token
        return self._cache[key]

    def forget(self, namespace: str, job: str) -> None:
        self._cache.pop((namespace, job), None)


def missing_is_none(read: Callable[[str, str], Awaitable[dict[str, str]]]) -> SecretReader:
    """Wrap a Secret reader that raises ApiException(404) for a missing Secret."""
    async def reader(namespace: str, name: str) -> dict[str, str] | None:
        try:
            return await read(namespace, name)
        except ApiException as exc:
            if exc.status == 404:
                return None
            raise

    return reader
