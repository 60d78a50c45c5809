"""The liveness poll: between a job's rounds, GET /healthz of its current runtime whenever no request
reached it for decisions/liveness.poll_period(lostAfter), so a runtime that hangs is seen silent within
a period, not at the next checkpoint trigger (docs/design.md §11, "Lost attempts").

It runs inside the job's loop (Reconciler.run), in the wait between two rounds, so rounds and polls
never overlap. A wake-up or the stop ends a poll in flight (its outcome dropped: the woken round asks
itself). The next round's time ends it only once the runtime is silent already (the round then decides
on time; an answer would have come at once). Before that the round waits for the poll's outcome (at
most its timeout, the period or 5 s, and only while the runtime is slow to answer), or rounds coming
more often than a poll can time out (every 2 s while a trigger is followed) would drop every unanswered
poll and a hang would go unseen. A poll whose outcome starts or ends the runtime's silence ends the wait: the round
that follows sees it at once.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from .decisions.liveness import Liveness, poll_in, silent
from .runtime_client import RuntimeApiError, RuntimeClient

Key = tuple[str, str]
Note = Callable[[Key, str, RuntimeApiError | None, float], None]


@dataclass(frozen=True)
class Target:
    pod: str
    url: str
    period: float


class LivenessPoll:
    def __init__(self, client: RuntimeClient, clock: Callable[[], float], liveness: dict[Key, Liveness],
                 note: Note):
        self.client, self.clock, self.liveness, self.note = client, clock, liveness, note
        self.targets: dict[Key, Target] = {}
        self.polls = 0  # sent, for tests and the bench

    def aim(self, key: Key, target: Target | None) -> None:
        """Each round says which runtime to poll (None: none runs, or it is not ours to watch)."""
        if target is None:
            self.targets.pop(key, None)
        else:
            self.targets[key] = target

    async def wait(self, key: Key, wake: asyncio.Event, stop: Any, delay: float) -> bool:
        """Until the next round, `delay` from now; True when it is due early: a wake-up, the stop, or a
        poll that started or ended the runtime's silence (that round asks the runtime)."""
        loop = asyncio.get_running_loop()
        end = loop.time() + delay
        while True:
            left = end - loop.time()
            target = self.targets.get(key)
            due = poll_in(self.liveness.get(key), target.pod, target.period, self.clock()) if target else left
            if not await self._sleep(wake, stop, min(left, due)) or left <= due:
                return wake.is_set()
            if target is None:
                continue
            was_silent = silent(self.liveness.get(key), target.pod)
            changed = await self._poll(key, target, wake, stop, end - loop.time() if was_silent else None)
            if changed is None or changed:
                return True

    @staticmethod
    async def _sleep(wake: asyncio.Event, stop: Any, seconds: float) -> bool:
        """False if woken or stopped first."""
        if wake.is_set() or (stop is not None and stop.done()):
            return False
        waiting = asyncio.ensure_future(wake.wait())
        try:
            await asyncio.wait({waiting, stop} - {None}, timeout=max(0.0, seconds),
                               return_when=asyncio.FIRST_COMPLETED)
        finally:
            waiting.cancel()
        return not (wake.is_set() or (stop is not None and stop.done()))

    async def _poll(self, key: Key, target: Target, wake: asyncio.Event, stop: Any,
                    left: float | None) -> bool | None:
        """One GET /healthz; whether the runtime's silence began or ended with it (None: woken, stopped or
        past `left` seconds before its outcome, which is then dropped)."""
        before, sent = silent(self.liveness.get(key), target.pod), self.clock()
        self.polls += 1
        request = asyncio.ensure_future(self._ask(target))
        waiting = asyncio.ensure_future(wake.wait())
        try:
            await asyncio.wait({request, waiting, stop} - {None}, return_when=asyncio.FIRST_COMPLETED,
                               timeout=None if left is None else max(0.0, left))
        finally:
            waiting.cancel()
        if not request.done():
            request.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await request
            return None
        self.note(key, target.pod, request.result(), sent)
        return silent(self.liveness.get(key), target.pod) != before

    async def _ask(self, target: Target) -> RuntimeApiError | None:
        try:
            await self.client.healthz(target.url, timeout=target.period)
        except RuntimeApiError as exc:
            return exc
        return None
