"""A fake clock and a store wrapper whose timestamps follow it (for GC timing tests)."""

from __future__ import annotations

import time
from collections.abc import Collection, Iterator

from sparkpoint.runtime.store import ObjectInfo, ObjectStore


class FakeClock:
    """Real time plus a test-controlled offset, so store timestamps and 'now' stay coherent."""

    def __init__(self) -> None:
        self.offset = 0.0

    def __call__(self) -> float:
        return time.time() + self.offset


class ShiftedStore(ObjectStore):
    """Adds the fake clock's offset *at write time* to every object's timestamp, so the store's
    clock and the writer's and GC's clocks agree after time jumps (as on a real server)."""

    def __init__(self, inner: ObjectStore, clock: FakeClock):
        self.inner, self.clock, self.url = inner, clock, inner.url
        self.shift: dict[str, float] = {}

    def _wrote(self, key: str) -> None:
        self.shift[key] = self.clock.offset

    def _info(self, info):  # type: ignore[no-untyped-def]
        return info and ObjectInfo(info.key, info.size, info.last_modified + self.shift.get(info.key, 0.0))

    def check(self, *, writes: bool = False) -> None:
        self.inner.check(writes=writes)

    def put_bytes(self, key: str, data: bytes) -> None:
        self.inner.put_bytes(key, data)
        self._wrote(key)

    def get_bytes(self, key: str) -> bytes:
        return self.inner.get_bytes(key)

    def put_if_absent(self, key: str, data: bytes) -> bool:
        created = self.inner.put_if_absent(key, data)
        if created:
            self._wrote(key)
        return created

    def put_file(self, key: str, path: str) -> None:
        self.inner.put_file(key, path)
        self._wrote(key)

    def get_file(self, key: str, path: str, *, digests: Collection[str] = ()) -> dict[str, str]:
        return self.inner.get_file(key, path, digests=digests)

    def stat(self, key: str) -> ObjectInfo | None:
        return self._info(self.inner.stat(key))

    def list(self, prefix: str) -> Iterator[ObjectInfo]:
        return (self._info(i) for i in self.inner.list(prefix))

    def delete(self, key: str) -> None:
        self.inner.delete(key)

    def copy(self, src: str, dst: str) -> None:
        self.inner.copy(src, dst)
        self._wrote(dst)
