"""What stands in front of the control API's handlers: bearer-token authentication and strict
request bodies (issue 11). Kept apart from api.py so the rules are readable in one place.

  - Every path except /healthz, /readyz and /metrics needs `Authorization: Bearer <token>` when the
    runtime has a token: 401 without one, 403 with a wrong one (constant-time comparison).
  - A body is a JSON object of at most MAX_BODY_BYTES, read within BODY_TIMEOUT seconds, that its
    endpoint's pydantic model (CheckpointBody, SavepointBody, StopBody, PromoteBody) accepts; anything else is a
    4xx that names the problem. The handlers never see a malformed request, so none can disturb the job.
"""

from __future__ import annotations

import asyncio
import hmac
import json
from collections.abc import Awaitable, Callable
from typing import Annotated, Any, Literal, TypeVar

from aiohttp import web
from pydantic import BaseModel, ConfigDict, Field, StrictBool, StringConstraints, ValidationError

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
    """None: no bearer credential at all; else whether it is the right one. A value that is no
    UTF-8 (aiohttp hands its bytes on as surrogates) is a wrong one, never an error."""
    if not header or not header.startswith("Bearer "):
        return None
    try:
        given = header[len("Bearer "):].strip().encode()
    except UnicodeEncodeError:
        return False
    return hmac.compare_digest(given, token.encode())


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


# The request bodies (pydantic, strict: no coercion, so "yes" is no boolean and true no number).
# Each field's description is the rule a 400 states: "field 'timeout' must be <description>".
Name = Annotated[str, StringConstraints(min_length=1, max_length=253)]


class _Body(BaseModel):
    model_config = ConfigDict(extra="forbid", strict=True, allow_inf_nan=False, frozen=True)


B = TypeVar("B", bound=_Body)


class CheckpointBody(_Body):
    wait: Literal["none", "id", "complete"] = Field("id", description=f"one of {list(WAIT_MODES)}")
    # Explicit null is refused like any other non-number; when absent the wait depends on the mode.
    timeout: float = Field(10.0, ge=0, le=MAX_WAIT_SECONDS,
                           description=f"a number of seconds between 0 and {MAX_WAIT_SECONDS:g}")

    @property
    def wait_seconds(self) -> float:
        if "timeout" in self.model_fields_set:
            return self.timeout
        return 600.0 if self.wait == "complete" else 10.0


class SavepointBody(CheckpointBody):
    name: Name | None = Field(None, description="a string of 1 to 253 characters")


class StopBody(_Body):
    savepoint: StrictBool | Name | None = Field(None, description="a boolean or a savepoint name")
    checkpoint: StrictBool = Field(True, description="a boolean")


class PromoteBody(_Body):
    # The operator's attempt number it promotes this standby as: refused (409) unless it is the
    # pod's own (SPARKPOINT_ATTEMPT), so a promotion never reaches a standby meant for another attempt.
    attempt: int | None = Field(None, ge=1, description="a positive integer")


def validate(doc: Any, model: type[B]) -> B:
    """The body as its model, or a 400 naming the first bad field (pure: unit-tested)."""
    if not isinstance(doc, dict):
        raise error(400, "body must be a JSON object")
    try:
        return model.model_validate(doc)
    except ValidationError as exc:
        first = exc.errors()[0]
        key = first["loc"][0] if first["loc"] else None
        field = model.model_fields.get(key) if isinstance(key, str) else None
        if first["type"] == "extra_forbidden" or field is None:
            raise error(400, f"unknown field {key!r}; allowed: {sorted(model.model_fields)}") from None
        raise error(400, f"field {key!r} must be {field.description}") from None


async def read_body(request: web.Request, model: type[B]) -> B:
    if not request.body_exists:
        return model()
    try:
        async with asyncio.timeout(BODY_TIMEOUT):
            raw = await request.read()  # aiohttp answers 413 past the app's client_max_size
    except TimeoutError:
        raise error(408, f"body not received within {BODY_TIMEOUT:g} s") from None
    if not raw.strip():
        return model()
    try:
        doc = json.loads(raw.decode("utf-8"), parse_constant=_reject_constant)
    except (ValueError, UnicodeDecodeError):
        raise error(400, "body is not JSON (UTF-8)") from None
    return validate(doc, model)


def _reject_constant(name: str) -> Any:
    raise ValueError(f"{name} is not JSON")
