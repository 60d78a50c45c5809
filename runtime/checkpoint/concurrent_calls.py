"""Store round trips that do not depend on each other, run at once (each one is a network wait).

A checkpoint's critical path is mostly round trips to the store; at 20 ms each, every sequential one
that can be overlapped is 20 ms of checkpoint duration saved (docs/benchmarks.md, checkpoint phases).
Plain threads, not a pool: a writer then owns nothing that must be shut down.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from concurrent.futures import Future, wait
from typing import Any, TypeVar

T = TypeVar("T")


def in_background(fn: Callable[[], T]) -> Future[T]:
    """Start `fn` on a daemon thread; its result (or exception) arrives through the future."""
    future: Future[T] = Future()

    def run() -> None:
        if not future.set_running_or_notify_cancel():
            return
        try:
            future.set_result(fn())
        except BaseException as exc:  # handed to whoever waits for the result
            future.set_exception(exc)
    threading.Thread(target=run, name="checkpoint-io", daemon=True).start()
    return future


def concurrently(*calls: Callable[[], Any]) -> list[Any]:
    """Run the calls at once (the first on this thread) and return their results in order. Every
    call finishes before this returns; then the first exception, in call order, is raised."""
    if not calls:
        return []
    others = [in_background(c) for c in calls[1:]]
    try:
        first = calls[0]()
    finally:
        wait(others)  # no call outlives this one, whatever the first one did
    return [first, *(f.result() for f in others)]
