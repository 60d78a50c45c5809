"""The API server's refusals: which of its answers retrying will not change, and its words for them
(the attempt's pods, the hot volume's cleanup pod)."""

from __future__ import annotations

import json

from kubernetes.client.rest import ApiException


def refused(exc: ApiException) -> bool:
    """A refusal that retrying the same request will not change (403 quota or admission, 422
    invalid, 404 a missing ServiceAccount or namespace): not a conflict, throttling or outage."""
    return exc.status is not None and 400 <= exc.status < 500 and exc.status not in (408, 409, 429)


def refusal_message(exc: ApiException) -> str:
    """The API server's own message (its Status body), else the HTTP reason."""
    try:
        return str(json.loads(exc.body or "")["message"])[:500]
    except (ValueError, TypeError, KeyError):
        return f"{exc.status} {exc.reason}"
