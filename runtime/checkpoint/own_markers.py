"""The pending markers one checkpoint writer wrote and has not deleted (writer.py, step 2).

A long-lived writer (the runtime's, `carry_failed`) keeps the marker of a failed operation that got as
far as its plan: GC treats what it lists as live, so the next operation may reuse those uploads instead
of sending them again, and deletes the kept marker once it has planned (its own marker then lists
everything it references). Only objects an operation reused or uploaded and re-checked are offered for
reuse, and only while the marker is younger than half the pending timeout (GC abandons a marker only
past the whole timeout).
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable
from dataclasses import dataclass, field

from sparkpoint.runtime.store import JobRef, ObjectStore, StoreError
from sparkpoint.runtime.store.layout import checkpoint_number, pending_key

log = logging.getLogger("sparkpoint.checkpoint")


@dataclass
class OwnMarker:
    created: float  # writer clock just before the marker was written (so never later than its age says)
    # What other operations may reuse: objects this one reused or uploaded and re-checked (not every
    # object the marker lists: an upload whose source changed may have left wrong bytes behind).
    shas: set[str] = field(default_factory=set)
    failed: bool = False


class OwnMarkers:
    def __init__(self, store: ObjectStore, job: JobRef, *, carry_failed: bool, pending_timeout_seconds: float,
                 clock: Callable[[], float]):
        self.store, self.job, self.carry_failed = store, job, carry_failed
        self.pending_timeout_seconds, self.clock = pending_timeout_seconds, clock
        self.entries: dict[str, OwnMarker] = {}
        self.lock = threading.Lock()

    def written(self, marker_id: str, created: float) -> None:
        with self.lock:
            self.entries[marker_id] = OwnMarker(created=created)

    def reusable(self, exclude: str) -> set[str]:
        """Objects the other markers offer that GC cannot have expired."""
        horizon = self.clock() - self.pending_timeout_seconds / 2
        with self.lock:
            return {sha for mid, m in self.entries.items() if mid != exclude and m.created > horizon
                    for sha in m.shas}

    def note_verified(self, marker_id: str, shas: set[str]) -> None:
        with self.lock:
            if marker_id in self.entries:
                self.entries[marker_id].shas |= shas

    def committed(self, marker_id: str) -> None:
        """The operation's manifest is written and its marker deleted by the writer."""
        with self.lock:
            self.entries.pop(marker_id, None)

    def give_up(self, marker_id: str, keep: bool | None = None) -> None:
        """Keep the marker (default: `carry_failed`) if the operation has something to reuse (it got as
        far as its plan); otherwise delete it now (best effort: GC would time it out anyway). So at most
        one failed marker per planned operation in flight stays behind, however many checkpoints fail
        before their plan."""
        keep = self.carry_failed if keep is None else keep
        with self.lock:
            own = self.entries.get(marker_id)
            if own is not None and keep and own.shas:
                own.failed = True
                return
            self.entries.pop(marker_id, None)
        self._delete([marker_id])

    def drop_failed(self, before: str | None = None) -> None:
        """Delete the kept markers of failed operations (those that claimed their id before `before`)."""
        with self.lock:
            gone = [mid for mid, m in self.entries.items() if m.failed
                    and (before is None or checkpoint_number(mid) < checkpoint_number(before))]
            for mid in gone:
                del self.entries[mid]
        self._delete(gone)

    def _delete(self, marker_ids: list[str]) -> None:
        for mid in marker_ids:
            try:
                self.store.delete(pending_key(self.job, mid))
            except StoreError as exc:
                log.warning("could not remove pending marker", extra={"id": mid, "error": str(exc)})
