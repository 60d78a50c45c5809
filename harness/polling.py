"""The one polling helper of the tests, e2e suite and benchmarks: call `check` until it returns
something truthy, failing with what was awaited (and the last value seen) on timeout.

Product code that waits keeps its own loop for a reason of its own: the runtime's store wait
(runtime/service/store_wait.py) backs off exponentially, stops on a stop event and reports metrics;
the plugin's savepoint wait reports each state as it changes. Neither is a test helper.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Awaitable, Callable
from typing import TypeVar

T = TypeVar("T")


class WaitTimeout(AssertionError):
    """A wait ran out of time. An AssertionError, so pytest reports it as a failed expectation."""


def wait_until(check: Callable[[], T], timeout: float, what: str, *, interval: float = 0.25,
               give_up: Callable[[], None] | None = None) -> T:
    """Poll `check()` every `interval` seconds until it returns a truthy value, and return that value.

    `give_up()`, if given, runs after each unsuccessful check and may raise to end the wait early
    (the process that should get there has exited). On timeout raises WaitTimeout naming `what`."""
    deadline = time.monotonic() + timeout
    while True:
        last = check()
        if last:
            return last
        if give_up is not None:
            give_up()
        if time.monotonic() >= deadline:
            raise WaitTimeout(f"timed out after {timeout:.0f}s waiting for {what}; last seen: {last!r}")
        time.sleep(interval)


async def wait_until_async(check: Callable[[], Awaitable[object]], timeout: float, *,
                           interval: float = 1.0) -> bool:
    """The same for an async `check`, answering instead of raising: True once it is truthy, False
    after `timeout` seconds (the operator load benchmark records a miss rather than failing)."""
    deadline = time.monotonic() + timeout
    while True:
        if await check():
            return True
        if time.monotonic() >= deadline:
            return False
        await asyncio.sleep(interval)
