"""What a full output GC pass knows about a path, on disk instead of in memory (docs/design.md §7).

A full pass decides every key of a path against the entries and files its needed histories hold, and
a transactional history holds every batch the job ever published: a set of those in memory grows with
the job's age (568.8 MiB at a month before this module). The sets here live in one SQLite file in a
temporary folder (the sidecar's `gc-tmp` emptyDir), with a small page cache, so a pass's memory is
bounded whatever the history's length, and its disk is about 16 bytes per entry or file:

- `IdSet`: entry ids, exact (a checkpoint id by its number, a continuation by its attempt); a deletion
  follows from an entry NOT being in it, so it must never answer yes by mistake.
- `KeySet`: file keys by a 64-bit hash. A collision can only answer "needed" for a key that is not,
  which keeps a garbage file (the safe side): about one in 10^7 passes at a year's history.
- `PathSet`: paths, exact, with deletes (a Delta table's live files replayed from its log, and the
  files its commits removed inside the retention: delta_log_read.py).
- `CommitIds`: the ids listed in `_commits/`, with the ordered look-ups a walk needs (the newest
  checkpoint, the newest continuation, the checkpoint before a number, for entries from before lineage).
"""

from __future__ import annotations

import hashlib
import sqlite3
import tempfile
from collections.abc import Iterable, Iterator
from pathlib import Path
from types import TracebackType

from sparkpoint.runtime.store.layout import CHECKPOINT_ID

from .lineage import CONTINUATION_ID

_BATCH = 2_000  # rows buffered before an insert (a set holds at most these in memory)
_CACHE_KIB = 4096  # SQLite's page cache per connection


def _code(entry_id: str) -> int | None:
    """An entry id as one integer (checkpoints >= 0, continuations < 0); None for any other spelling."""
    if (m := CHECKPOINT_ID.match(entry_id)) and f"chk-{int(m.group(1)):06d}" == entry_id:
        return int(m.group(1))
    if (m := CONTINUATION_ID.match(entry_id)) and f"continue-a{int(m.group(1)):06d}" == entry_id:
        return -1 - int(m.group(1))
    return None


def _id(code: int) -> str:
    return f"chk-{code:06d}" if code >= 0 else f"continue-a{-1 - code:06d}"


def _hash(key: str) -> int:
    return int.from_bytes(hashlib.blake2b(key.encode(), digest_size=8).digest(), "big", signed=True)


class Spill:
    """One pass's file of sets: `with Spill() as spill: spill.ids("entries")`. Deleted on exit."""

    def __init__(self, folder: str | None = None):
        self._tmp = tempfile.TemporaryDirectory(prefix="sparkpoint-gc-", dir=folder)
        self.db = sqlite3.connect(Path(self._tmp.name) / "pass.sqlite", isolation_level=None)
        for pragma in ("journal_mode=OFF", "synchronous=OFF", "temp_store=FILE", f"cache_size=-{_CACHE_KIB}"):
            self.db.execute(f"PRAGMA {pragma}")
        self._tables = 0

    def table(self) -> str:
        self._tables += 1
        name = f"t{self._tables}"
        self.db.execute(f"CREATE TABLE {name} (k INTEGER PRIMARY KEY)")
        return name

    def ids(self) -> IdSet:
        return IdSet(self)

    def keys(self) -> KeySet:
        return KeySet(self)

    def commit_ids(self, ids: Iterable[str]) -> CommitIds:
        return CommitIds(self, ids)

    def paths(self) -> PathSet:
        return PathSet(self)

    def file(self, name: str) -> str:
        """A path in the spill's folder for a temporary file of the pass (deleted with the spill)."""
        return str(Path(self._tmp.name) / name)

    def __enter__(self) -> Spill:
        return self

    def __exit__(self, kind: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None) -> None:
        self.db.close()
        self._tmp.cleanup()


class _IntSet:
    """A set of integers in a table of the spill, inserts buffered."""

    def __init__(self, spill: Spill):
        self._db, self._table = spill.db, spill.table()
        self._buffer: list[tuple[int]] = []
        self._size = 0

    def _add(self, code: int) -> None:
        self._buffer.append((code,))
        if len(self._buffer) >= _BATCH:
            self._flush()

    def _flush(self) -> None:
        if self._buffer:
            self._buffer.sort()  # in key order: each B-tree page is touched once per batch, not per row
            cur = self._db.executemany(f"INSERT OR IGNORE INTO {self._table} (k) VALUES (?)", self._buffer)
            self._size += max(cur.rowcount, 0)
            self._buffer.clear()

    def _has(self, code: int) -> bool:
        self._flush()
        return self._db.execute(f"SELECT 1 FROM {self._table} WHERE k = ?", (code,)).fetchone() is not None

    def __len__(self) -> int:
        self._flush()
        return self._size

    def __bool__(self) -> bool:
        return len(self) > 0


class IdSet(_IntSet):
    """Entry ids, exact; ids of another spelling are held in memory (none are written today)."""

    def __init__(self, spill: Spill):
        super().__init__(spill)
        self._other: set[str] = set()

    def add(self, entry_id: str) -> None:
        code = _code(entry_id)
        if code is None:
            self._other.add(entry_id)
        else:
            self._add(code)

    def update(self, entry_ids: Iterable[str]) -> None:
        for entry_id in entry_ids:
            self.add(entry_id)

    def __contains__(self, entry_id: object) -> bool:
        if not isinstance(entry_id, str):
            return False
        code = _code(entry_id)
        return entry_id in self._other if code is None else self._has(code)

    def __len__(self) -> int:
        return super().__len__() + len(self._other)


class KeySet(_IntSet):
    """File keys by a 64-bit hash: "in" may be wrong only towards yes (module doc)."""

    def add(self, key: str) -> None:
        self._add(_hash(key))

    def update(self, keys: Iterable[str]) -> None:
        for key in keys:
            self.add(key)

    def __contains__(self, key: object) -> bool:
        return isinstance(key, str) and self._has(_hash(key))


class CommitIds(IdSet):
    """The entry ids of `_commits/`, filled from one listing."""

    def __init__(self, spill: Spill, ids: Iterable[str]):
        super().__init__(spill)
        self.update(ids)
        self._flush()

    def _max(self, where: str, args: tuple[int, ...] = ()) -> int | None:
        row = self._db.execute(f"SELECT max(k) FROM {self._table} WHERE {where}", args).fetchone()
        return None if row is None or row[0] is None else int(row[0])

    def newest_checkpoint(self) -> str | None:
        code = self._max("k >= 0")
        return None if code is None else _id(code)

    def newest_continuation(self) -> str | None:
        row = self._db.execute(f"SELECT min(k) FROM {self._table} WHERE k < 0").fetchone()
        return None if row is None or row[0] is None else _id(int(row[0]))

    def checkpoint_before(self, number: int) -> str | None:
        """The checkpoint entry with the largest number below `number` (a walk's pre-lineage step)."""
        code = self._max("k >= 0 AND k < ?", (number,))
        return None if code is None else _id(code)

    def checkpoints(self) -> Iterator[str]:
        for (code,) in self._db.execute(f"SELECT k FROM {self._table} WHERE k >= 0 ORDER BY k"):
            yield _id(int(code))

    def others(self) -> set[str]:
        """Ids listed that are neither a checkpoint nor a continuation (ignored by walks, kept by passes)."""
        return set(self._other)



class PathSet:
    """Strings, exact, with deletes: adds are buffered and applied in order with the deletes."""

    def __init__(self, spill: Spill):
        self._db = spill.db
        spill._tables += 1
        self._table = f"t{spill._tables}"
        self._db.execute(f"CREATE TABLE {self._table} (k TEXT PRIMARY KEY) WITHOUT ROWID")
        self._buffer: list[tuple[str]] = []

    def add(self, path: str) -> None:
        self._buffer.append((path,))
        if len(self._buffer) >= _BATCH:
            self._flush()

    def update(self, paths: Iterable[str]) -> None:
        for path in paths:
            self.add(path)

    def discard(self, path: str) -> None:
        self._flush()  # (an add buffered before this delete must not come back after it)
        self._db.execute(f"DELETE FROM {self._table} WHERE k = ?", (path,))

    def _flush(self) -> None:
        if self._buffer:
            self._buffer.sort()
            self._db.executemany(f"INSERT OR IGNORE INTO {self._table} (k) VALUES (?)", self._buffer)
            self._buffer.clear()

    def __contains__(self, path: object) -> bool:
        if not isinstance(path, str):
            return False
        self._flush()
        return self._db.execute(f"SELECT 1 FROM {self._table} WHERE k = ?", (path,)).fetchone() is not None

    def __iter__(self) -> Iterator[str]:
        self._flush()
        for (path,) in self._db.execute(f"SELECT k FROM {self._table} ORDER BY k"):
            yield str(path)

    def __len__(self) -> int:
        self._flush()
        return int(self._db.execute(f"SELECT count(*) FROM {self._table}").fetchone()[0])
