"""Retry with exponential backoff and jitter for transient store errors."""

from __future__ import annotations

import logging
import random
import time
from collections.abc import Callable
from typing import TypeVar

T = TypeVar("T")
log = logging.getLogger("sparkpoint.store")


def with_retries(
    fn: Callable[[], T],
    *,
    is_transient: Callable[[BaseException], bool],
    attempts: int = 4,
    base_delay: float = 0.2,
    max_delay: float = 5.0,
    what: str = "store call",
) -> T:
    """Call fn; on a transient error wait base*2^n (+-25% jitter) and try again, up to `attempts`."""
    for attempt in range(1, attempts + 1):
        try:
            return fn()
        except Exception as exc:
            if attempt == attempts or not is_transient(exc):
                raise
            delay = min(max_delay, base_delay * 2 ** (attempt - 1)) * random.uniform(0.75, 1.25)
            log.info(  # the caller reports the final failure; retries are detail
                "transient store error, retrying",
                extra={"what": what, "attempt": attempt, "delay_s": round(delay, 3),
                       "error": type(exc).__name__},
            )
            time.sleep(delay)
    raise AssertionError("unreachable")
