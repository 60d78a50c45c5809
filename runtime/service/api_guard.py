"""What stands in front of the control API's handlers: bearer-token authentication and strict
request bodies (issue 11). Kept apart from api.py so the rules are readable in one place.

  - Every path except /healthz, /readyz and /metrics needs `Authorization: Bearer <token>` when the
    runtime has a token: 401 without one, 403 with a wrong one (constant-time comparison).
  - A body is a JSON object of at most MAX_BODY_BYTES, read within BODY_TIMEOUT seconds, whose
    fields the endpoint knows and whose values have the right type; anything else is a 4xx that
    names the problem. The handlers never see a malformed request, so none can disturb the job.
"""

from __future__ import annotations

import asyncio
import hmac
import json
import math
from collections.abc import Awaitable, Callable
from typing import Any

from aiohttp import web

OPEN_PATHS = frozenset({"/healthz", "/readyz", "/metrics"})
MAX_BODY_BYTES = 64 * 1024
BODY_TIMEOUT = 10.0
MAX_WAIT_SECONDS = 3600.0
WAIT_MODES = ("none", "id", "complete")


_ERRORS: dict[int, type[web.HTTPException]] = {
    400: web.HTTPBadRequest, 401: web.HTTPUnauthorized, 403: web.HTTPForbidden, 408: web.HTTPRequestTimeout}


def error(status: int, message: str, **headers: str) -> web.HTTPException:
    return _ERRORS[status](text=json.dumps({"error": message}), content_type="application/json",
                           headers=headers or None)


def token_matches(header: str | None, token: str) -> bool | None:
    """None: no bearer credential at all; else whether it is the right one."""
    if not header or not header.startswith("Bearer "):
        return None
    return hmac.compare_digest(header[len("Bearer "):].strip().encode(), token.encode())


def auth_middleware(token: str | None) -> Callable[..., Awaitable[web.StreamResponse]]:
    @web.middleware
    async def authenticate(request: web.Request, handler: Any) -> web.StreamResponse:
        if token is not None and request.path not in OPEN_PATHS:
            ok = token_matches(request.headers.get("Authorization"), token)
            if ok is None:
                raise error(401, "missing bearer token (Authorization: Bearer <token>)",
                            **{"WWW-Authenticate": 'Bearer realm="sparkpoint"'})
            if not ok:
                raise error(403, "wrong bearer token")
        return await handler(request)

    return authenticate


# Field name -> check(value) returning an error message or None.
def _wait(v: Any) -> str | None:
    return None if v in WAIT_MODES else f"must be one of {list(WAIT_MODES)}"


def _timeout(v: Any) -> str | None:
    ok = isinstance(v, int | float) and not isinstance(v, bool) and math.isfinite(v) and 0 <= v <= MAX_WAIT_SECONDS
    return None if ok else f"must be a number of seconds between 0 and {MAX_WAIT_SECONDS:g}"


def _name(v: Any) -> str | None:
    ok = v is None or (isinstance(v, str) and 0 < len(v) <= 253)
    return None if ok else "must be a string of 1 to 253 characters"


def _savepoint(v: Any) -> str | None:
    return None if v is None or isinstance(v, bool) or _name(v) is None else "must be a boolean or a savepoint name"


def _bool(v: Any) -> str | None:
    return None if isinstance(v, bool) else "must be a boolean"


SCHEMAS: dict[str, dict[str, Callable[[Any], str | None]]] = {
    "checkpoint": {"wait": _wait, "timeout": _timeout},
    "savepoint": {"wait": _wait, "timeout": _timeout, "name": _name},
    "stop": {"savepoint": _savepoint, "checkpoint": _bool},
}


def validate(doc: Any, schema: dict[str, Callable[[Any], str | None]]) -> dict[str, Any]:
    """The body as a dict, or a 400 naming the first bad field (pure: unit-tested)."""
    if not isinstance(doc, dict):
        raise error(400, "body must be a JSON object")
    for key, value in doc.items():
        check = schema.get(key)
        if check is None:
            raise error(400, f"unknown field {key!r}; allowed: {sorted(schema)}")
        problem = check(value)
        if problem:
            raise error(400, f"field {key!r} {problem}")
    return doc


async def read_body(request: web.Request, endpoint: str) -> dict[str, Any]:
    if not request.body_exists:
        return {}
    try:
        async with asyncio.timeout(BODY_TIMEOUT):
            raw = await request.read()  # aiohttp answers 413 past the app's client_max_size
    except TimeoutError:
        raise error(408, f"body not received within {BODY_TIMEOUT:g} s") from None
    if not raw.strip():
        return {}
    try:
        doc = json.loads(raw.decode("utf-8"), parse_constant=_reject_constant)
    except (ValueError, UnicodeDecodeError):
        raise error(400, "body is not JSON (UTF-8)") from None
    return validate(doc, SCHEMAS[endpoint])


def _reject_constant(name: str) -> Any:
    raise ValueError(f"{name} is not JSON")
