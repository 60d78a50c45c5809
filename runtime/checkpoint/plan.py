"""Which objects a checkpoint uploads (writer.py, step 2), decided without I/O.

An object is reused only if the store holds it with the right size and it belongs to the base
checkpoint, or another marker of this writer offers it (own_markers.py), or it is younger than the
writer's reuse window. Everything else is uploaded. So an object that is in neither set, when the reuse
window is 0 (the runtime's setting), is uploaded whatever the listing says: those uploads may start
before the listing has been read, which hides the listing of a large job's objects behind them.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass

from sparkpoint.runtime.store import ObjectInfo


@dataclass(frozen=True)
class ReuseRules:
    base: frozenset[str]  # objects of the base checkpoint (GC always retains it)
    carried: frozenset[str]  # offered by this writer's other markers, read before the listing
    reuse_window_seconds: float
    full_upload: bool = False  # benchmark baseline: nothing is ever reused

    def upload_unlisted(self, sha: str) -> bool:
        """Uploaded whatever the listing will say."""
        return self.full_upload or (sha not in self.base and sha not in self.carried
                                    and self.reuse_window_seconds <= 0)

    def reusable(self, sha: str, size: int, held: ObjectInfo | None, now: float) -> bool:
        return (not self.full_upload and held is not None and held.size == size
                and (sha in self.base or sha in self.carried
                     or now - held.last_modified < self.reuse_window_seconds))


def early_uploads(rules: ReuseRules, shas: Iterable[str]) -> list[str]:
    return [sha for sha in shas if rules.upload_unlisted(sha)]


def needed_uploads(rules: ReuseRules, sizes: Mapping[str, int], held: Mapping[str, ObjectInfo], now: float) -> list[str]:
    """Every object to upload (early ones included), in the order of `sizes`."""
    return [sha for sha, size in sizes.items() if not rules.reusable(sha, size, held.get(sha), now)]
