"""Small in-memory caches that keep the operator's API and store calls per job few (all bounded).

Nothing here is a source of truth: the CR status and the store are. Each cache only saves a call
whose answer is known (a Secret read a moment ago, a manifest that never changes once written, the
status this operator wrote itself before its watch delivered it back).
"""

from __future__ import annotations

import copy
import hashlib
import time
from collections import OrderedDict
from collections.abc import Callable, Hashable
from typing import Any, Generic, TypeVar

V = TypeVar("V")


class TtlCache(Generic[V]):
    """key -> value for `ttl` seconds, at most `size` entries (the least recently used go first)."""

    def __init__(self, ttl: float, size: int, clock: Callable[[], float] = time.monotonic):
        self.ttl, self.size, self.clock = ttl, size, clock
        self._items: OrderedDict[Hashable, tuple[float, V]] = OrderedDict()

    def get(self, key: Hashable) -> V | None:
        item = self._items.get(key)
        if item is None:
            return None
        if self.clock() >= item[0]:
            del self._items[key]
            return None
        self._items.move_to_end(key)
        return item[1]

    def put(self, key: Hashable, value: V) -> V:
        self._items[key] = (self.clock() + self.ttl, value)
        self._items.move_to_end(key)
        while len(self._items) > self.size:
            self._items.popitem(last=False)
        return value

    def invalidate(self, key: Hashable) -> None:
        self._items.pop(key, None)

    def __len__(self) -> int:
        return len(self._items)


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


class FactCache(Generic[V]):
    """Facts of immutable store objects (a checkpoint's manifest never changes once written),
    keyed by object, the least recently used dropped beyond `size`."""

    def __init__(self, size: int):
        self.size = size
        self._items: OrderedDict[Hashable, V] = OrderedDict()

    def get_or_load(self, key: Hashable, load: Callable[[], V]) -> V:
        if key in self._items:
            self._items.move_to_end(key)
            return self._items[key]
        value = load()
        self._items[key] = value
        while len(self._items) > self.size:
            self._items.popitem(last=False)
        return value

    def __len__(self) -> int:
        return len(self._items)


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
