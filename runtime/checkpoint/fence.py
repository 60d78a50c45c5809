"""Zombie fencing: each attempt bumps fence.json; a writer older than the fence must not commit."""

from __future__ import annotations

from sparkpoint.runtime.store import JobRef, ObjectStore, StoreError
from sparkpoint.runtime.store.layout import fence_key
from sparkpoint.runtime.store.manifest import Fence, utcnow


class FencedError(StoreError):
    """A newer attempt has started; this (zombie) attempt must stop committing."""


def read_fence(store: ObjectStore, job: JobRef) -> int:
    """The current attempt number (0 if no attempt ever started)."""
    key = fence_key(job)
    if store.stat(key) is None:
        return 0
    return Fence.from_json(store.get_bytes(key), where=key).attempt


def write_fence(store: ObjectStore, job: JobRef) -> int:
    """Start a new attempt: store and return current + 1.

    Only one runtime starts per job at a time (the operator serialises pod creation); two racing
    starters would both get a number, and the later write wins, fencing the other one out.
    """
    attempt = read_fence(store, job) + 1
    store.put_bytes(fence_key(job), Fence(attempt=attempt, updated=utcnow()).to_json())
    return attempt


def check_fence(store: ObjectStore, job: JobRef, attempt: int) -> None:
    current = read_fence(store, job)
    if current > attempt:
        raise FencedError(
            f"job {job}: attempt {attempt} is fenced off by newer attempt {current}; not committing")
