"""Where `sparkpoint run` gets its control API token, and whether it may listen where asked.

In a pod the operator mounts the job's token (Secret `<job>-control-token`, key `token`) at
/var/run/sparkpoint/control/token and sets $SPARKPOINT_CONTROL_TOKEN_FILE. A local run has no token
and listens on loopback only; listening elsewhere without a token needs --insecure-no-auth.
"""

from __future__ import annotations

import ipaddress
from collections.abc import Mapping
from pathlib import Path

TOKEN_FILE_ENV = "SPARKPOINT_CONTROL_TOKEN_FILE"
TOKEN_ENV = "SPARKPOINT_CONTROL_TOKEN"
MIN_TOKEN_CHARS = 16


class TokenError(ValueError):
    pass


def resolve_token(token_file: str | None, environ: Mapping[str, str]) -> str | None:
    """--token-file, else $SPARKPOINT_CONTROL_TOKEN_FILE, else $SPARKPOINT_CONTROL_TOKEN, else None.
    A named source that is missing, empty or too short is an error, never a silent "no auth"."""
    path = token_file or environ.get(TOKEN_FILE_ENV)
    if path:
        try:
            token = Path(path).read_text().strip()
        except OSError as exc:
            raise TokenError(f"control token file {path}: {exc.strerror or exc}") from None
        source = f"control token file {path}"
    elif environ.get(TOKEN_ENV) is not None:
        token, source = environ[TOKEN_ENV].strip(), f"${TOKEN_ENV}"
    else:
        return None
    if len(token) < MIN_TOKEN_CHARS:
        raise TokenError(f"{source}: the token must have at least {MIN_TOKEN_CHARS} characters")
    if any(c.isspace() for c in token):
        raise TokenError(f"{source}: the token must not contain whitespace")
    return token


def is_loopback(host: str) -> bool:
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host.strip("[]")).is_loopback
    except ValueError:
        return False  # a hostname may resolve anywhere


def check_bind(host: str, token: str | None, insecure: bool) -> None:
    if token is None and not insecure and not is_loopback(host):
        raise TokenError(f"refusing to serve the control API on {host} without a token: set "
                         f"${TOKEN_FILE_ENV} (or ${TOKEN_ENV}, or --token-file), listen on 127.0.0.1, "
                         "or pass --insecure-no-auth")
