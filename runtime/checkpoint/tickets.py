"""Checkpoint ids in batch order with several checkpoints in flight (docs/design.md section 4).

A ticket is taken in the synchronous phase, in batch order, with no I/O (a store outage must only
delay checkpoints, never the freeze). The asynchronous phases then claim their store ids strictly
in ticket order: an operation waits for every older ticket to have claimed its id (or given up)
before it claims its own, so the highest id is always the newest batch.
"""

from __future__ import annotations

import threading
from collections.abc import Callable


class IdTickets:
    def __init__(self) -> None:
        self._cond = threading.Condition()
        self._issued = 0
        self._turn = 1  # the ticket allowed to claim next
        self._released: set[int] = set()

    def take(self) -> int:
        with self._cond:
            self._issued += 1
            return self._issued

    def wait_turn(self, ticket: int, stop_check: Callable[[], None] | None = None,
                  poll_seconds: float = 0.1) -> None:
        """Block until every older ticket is released; `stop_check` may raise to give up."""
        with self._cond:
            while self._turn < ticket:
                if stop_check is not None:
                    stop_check()
                self._cond.wait(poll_seconds)

    def release(self, ticket: int) -> None:
        """This ticket has claimed its id or given up; idempotent."""
        with self._cond:
            if ticket < self._turn:
                return
            self._released.add(ticket)
            while self._turn in self._released:
                self._released.discard(self._turn)
                self._turn += 1
            self._cond.notify_all()
