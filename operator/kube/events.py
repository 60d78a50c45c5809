"""Kubernetes Events: the one way the operator posts them (both kinds of resource)."""

from __future__ import annotations

from typing import Any

import kopf


def post_event(body: Any, type_: str, reason: str, message: str) -> None:
    """An Event on the resource. kopf.event, not kopf.info/warn: those obey settings.posting.level,
    which the operator raises to WARNING to keep kopf's own handler logs out of Events."""
    kopf.event(body, type=type_, reason=reason, message=message[:1000])
