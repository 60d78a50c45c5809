"""Keys and choices for the operator's in-memory caches, and the spec cache (the TTL and LRU caches
themselves are cachetools', in store/facts.py).

Nothing here is a source of truth: the CR status and the store are. Each cache only saves a call
whose answer is known (a Secret read a moment ago, a manifest that never changes once written, the
status this operator wrote itself before its watch delivered it back).
"""

from __future__ import annotations

import copy
import hashlib
from collections.abc import Callable, Hashable
from typing import Any


def secret_fingerprint(env: dict[str, str]) -> str:
    """A key for "the same credentials" that does not keep the credentials themselves as a key."""
    return hashlib.sha256(repr(sorted(env.items())).encode()).hexdigest()


def resource_version(body: dict[str, Any] | None) -> int | None:
    """metadata.resourceVersion as a number (etcd's revision), None when absent or not numeric."""
    try:
        return int(((body or {}).get("metadata") or {}).get("resourceVersion"))
    except (TypeError, ValueError):
        return None


def fresher_body(live: dict[str, Any], written: dict[str, Any] | None) -> dict[str, Any]:
    """The newer of the watched object and the one our own status PATCH returned.

    The watch may not have delivered our last write yet; deciding on the older status would repeat
    an action (a second trigger). resourceVersion is compared as a number: the API server's are
    etcd revisions. When either is not numeric, our own write wins (it was the server's answer)."""
    if written is None:
        return live
    live_rv, written_rv = resource_version(live), resource_version(written)
    if live_rv is not None and written_rv is not None and live_rv >= written_rv:
        return live
    return written


class SpecCache:
    """The parsed spec of each job, parsed again only when the CR's spec changes (a job's loop
    decides on it every round; validating it each time cost CPU at 1,000 jobs)."""

    def __init__(self, parse: Callable[[Any], Any]):
        self._parse = parse
        self._items: dict[Hashable, tuple[Any, Any]] = {}

    def get(self, key: Hashable, raw: Any) -> Any:
        """parse(raw), from the cache when `raw` equals what was parsed last for `key`; what
        parse raises (an invalid spec) is raised each time, never cached."""
        known = self._items.get(key)
        if known is not None and known[0] == raw:
            return known[1]
        parsed = self._parse(raw)
        self._items[key] = (copy.deepcopy(raw), parsed)
        return parsed

    def forget(self, key: Hashable) -> None:
        self._items.pop(key, None)
