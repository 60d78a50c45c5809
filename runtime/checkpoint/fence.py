"""Zombie fencing: each attempt claims its number atomically; only the newest attempt may commit.

Claims are conditional creates of `attempts/<n>.json` (put_if_absent), so two starters can never
hold the same number. A starter tries `read_fence() + 1, + 2, ...` until one create succeeds, which
keeps the claimed numbers contiguous: "is there a newer attempt than n?" is one request for
`attempts/<n+1>.json`. `fence.json` (docs/design.md section 3) names the current attempt; a claimer
rewrites it until a check after its own write finds no newer claim, so the last write always names
the newest claim. Readers treat it as a starting point and probe the claims above it.
"""

from __future__ import annotations

import uuid

from sparkpoint.runtime.store import JobRef, ObjectStore, StoreError
from sparkpoint.runtime.store.layout import attempt_claim_key, fence_key
from sparkpoint.runtime.store.manifest import Fence, utcnow

from .concurrent_calls import concurrently

_MAX_CLAIM_TRIES = 1000


class FencedError(StoreError):
    """A newer attempt has started; this (zombie) attempt must stop committing."""


def _fence_hint(store: ObjectStore, job: JobRef) -> int:
    key = fence_key(job)
    if store.stat(key) is None:
        return 0
    return Fence.from_json(store.get_bytes(key), where=key).attempt


def _newest_claim_from(store: ObjectStore, job: JobRef, start: int) -> int:
    """The highest contiguous claim at or above `start` (start itself if none is above it)."""
    newest = start
    while store.stat(attempt_claim_key(job, newest + 1)) is not None:
        newest += 1
    return newest


def read_fence(store: ObjectStore, job: JobRef) -> int:
    """The current (newest) attempt number (0 if no attempt ever started)."""
    return _newest_claim_from(store, job, _fence_hint(store, job))


def write_fence(store: ObjectStore, job: JobRef, incarnation: str | None = None, launch: int | None = None) -> int:
    """Start a new attempt: claim the next free number atomically and return it.

    `launch` is the operator's attempt number of this pod (every start of its runtime, in-place
    restarts too, claims a new number). A pod of an older launch of the same incarnation (a zombie:
    its node was lost, the operator started the next attempt, then its container restarted) must not
    fence off the newer pod: it raises FencedError without claiming."""
    owner = uuid.uuid4().hex  # makes our claim's bytes unique (a retried create recognises its own)
    number = read_fence(store, job) + 1
    _refuse_if_superseded(store, job, number - 1, incarnation, launch)
    for _ in range(_MAX_CLAIM_TRIES):
        claim = Fence(attempt=number, updated=utcnow(), owner=owner, incarnation=incarnation, launch=launch).to_json()
        if store.put_if_absent(attempt_claim_key(job, number), claim):
            _publish_fence(store, job, number)
            return number
        _refuse_if_superseded(store, job, number, incarnation, launch)
        number += 1
    raise StoreError(f"job {job}: could not claim an attempt number near {number}")


def _refuse_if_superseded(store: ObjectStore, job: JobRef, number: int, incarnation: str | None,
                          launch: int | None) -> None:
    """FencedError if claim `number` was made by a newer launch of this incarnation."""
    if number < 1 or incarnation is None or launch is None:
        return
    key = attempt_claim_key(job, number)
    try:
        claim = Fence.from_json(store.get_bytes(key), where=key)
    except (StoreError, ValueError):
        return  # unreadable or gone: no evidence of a newer launch (the claim order still holds)
    if claim.incarnation == incarnation and claim.launch is not None and claim.launch > launch:
        raise FencedError(f"job {job}: attempt {claim.launch} of this job has started since; this pod is attempt "
                          f"{launch} (a zombie restarted late) and does not start")


def restarts_before(store: ObjectStore, job: JobRef, start: int, incarnation: str | None, launch: int | None,
                    limit: int = 1000) -> int:
    """How many starts of the same operator attempt (incarnation and launch) claimed the numbers just
    below `start`: 0 for a pod's first start, k for its k-th restart in place. Claims are contiguous and
    a pod's starts follow each other (a newer launch fences older pods off), so the walk back stops at
    the first claim of another attempt; `limit` bounds it for a container that restarted endlessly.
    Without a launch (a local run) every start is an attempt of its own: 0."""
    if incarnation is None or launch is None:
        return 0
    count = 0
    for number in range(start - 1, max(0, start - 1 - limit), -1):
        key = attempt_claim_key(job, number)
        try:
            claim = Fence.from_json(store.get_bytes(key), where=key)
        except (StoreError, ValueError):
            break
        if claim.incarnation != incarnation or claim.launch != launch:
            break
        count += 1
    return count


def _publish_fence(store: ObjectStore, job: JobRef, value: int) -> None:
    """Write fence.json until no claim newer than what we wrote exists after our write."""
    while True:
        store.put_bytes(fence_key(job), Fence(attempt=value, updated=utcnow()).to_json())
        newest = _newest_claim_from(store, job, value)
        if newest == value:
            return
        value = newest


def check_fence(store: ObjectStore, job: JobRef, attempt: int) -> None:
    """Raise FencedError unless `attempt` is the newest attempt.

    Claims are contiguous from 1 and never deleted, so "newest" is: `attempt`'s own claim exists and
    no claim of `attempt + 1` does (attempt 0: no claim at all). The two probes run at once, one
    round trip on a checkpoint's commit path (read_fence would take three in a row); the fence is
    read in full only to name the newer attempt in the error."""
    newer, own = concurrently(
        lambda: store.stat(attempt_claim_key(job, attempt + 1)) is not None,
        lambda: attempt == 0 or store.stat(attempt_claim_key(job, attempt)) is not None)
    if newer or not own:
        current = read_fence(store, job)
        raise FencedError(
            f"job {job}: attempt {attempt} is fenced off by attempt {current}; not committing")


def claim_incarnation(store: ObjectStore, job: JobRef, attempt: int) -> str | None:
    """The job uid that claimed `attempt` (None: no claim, or one from before claims named it)."""
    key = attempt_claim_key(job, attempt)
    try:
        return Fence.from_json(store.get_bytes(key), where=key).incarnation
    except (StoreError, ValueError):
        return None
