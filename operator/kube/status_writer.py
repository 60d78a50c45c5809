"""One writer of a job's status: PATCHes run behind the job's loop, coalesced, in order.

At 1,000 jobs on a busy API server a status PATCH may take seconds; a loop that waited for each
one would trigger checkpoints late. The loop hands the decided status to the writer and goes on
deciding on it (`current`); the writer sends one merge patch at a time, computed against what the
server confirmed last, so a newer decision made meanwhile replaces an unsent one (coalesced) and
never reorders. A round whose actions create or delete things waits for `flush()` first (the
status must hold the intent before the pod exists). A failed PATCH drops everything unsent: the
next round decides on the watched body again, as after an operator restart.

A change that only `lazy(patch)` says may wait (the bookkeeping of a checkpoint trigger) is not
written on its own: it is kept as the job's current status and goes out with the next change that
must be written (the trigger's completion), so a checkpoint costs one PATCH, and one watch event
for kopf, instead of two. An operator that dies meanwhile loses only that bookkeeping.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable
from typing import Any

from .client import merge_patch

log = logging.getLogger("sparkpoint.operator")
PatchFn = Callable[[dict[str, Any]], Awaitable[dict[str, Any] | None]]


class StatusWriter:
    def __init__(self, patch: PatchFn, on_error: Callable[[Exception], None] | None = None,
                 lazy: Callable[[dict[str, Any]], bool] | None = None):
        self._patch, self._on_error, self._lazy = patch, on_error, lazy
        self.confirmed: dict[str, Any] | None = None  # our part of status as the server has it
        self.desired: dict[str, Any] | None = None  # the newest decided status not yet confirmed
        self.deferred: dict[str, Any] | None = None  # decided, differs from confirmed only lazily
        self.stored: dict[str, Any] | None = None  # the object as the last PATCH returned it
        self.failed = False
        self.urgent = False  # a round waits for the write (flush): its PATCHes are not routine
        self._task: asyncio.Task | None = None

    @property
    def pending(self) -> bool:
        return self.desired is not None or self.deferred is not None

    @property
    def writing(self) -> bool:
        return self.desired is not None

    def current(self) -> dict[str, Any] | None:
        """The status the next round decides on while a write is unsent, in flight or deferred."""
        return self.desired if self.desired is not None else self.deferred

    def submit(self, base: dict[str, Any], status: dict[str, Any]) -> None:
        """`status` was decided on `base` (what the server had, or `current()` while pending)."""
        if not self.pending:
            self.confirmed = base
        self.failed = False
        self.deferred = None
        idle = self._task is None or self._task.done()
        if status == self.confirmed and idle:  # (in flight: the write must be undone after it)
            self.desired = None
            return
        if self.desired is None and self._lazy is not None and self._lazy(merge_patch(self.confirmed, status)):
            self.deferred = status  # nothing in flight and nothing that must be written
            return
        self.desired = status
        if idle:
            self._task = asyncio.create_task(self._drain())

    async def flush(self) -> bool:
        """Wait until everything submitted is written; False if a write failed."""
        self.urgent = True
        try:
            while self._task is not None and not self._task.done():
                await asyncio.shield(self._task)
        finally:
            self.urgent = False
        return not self.failed

    async def _drain(self) -> None:
        while self.desired is not None and self.confirmed is not None:
            desired = self.desired
            try:
                stored = await self._patch(merge_patch(self.confirmed, desired))
            except Exception as exc:  # noqa: BLE001 - reported; the next round starts from the watch
                self.failed, self.desired, self.confirmed, self.stored = True, None, None, None
                self.deferred = None
                log.warning("status write failed", extra={"error": f"{type(exc).__name__}: {exc}"[:300]})
                if self._on_error is not None:
                    self._on_error(exc)
                return
            self.confirmed = desired
            if stored is not None:
                # Kept until the watch delivers it: a round needs its spec, metadata and status, not
                # the managedFields that were half of it (one such copy per job at 1,000 jobs).
                (stored.get("metadata") or {}).pop("managedFields", None)
                self.stored = stored
            if self.desired is desired:
                self.desired = None
