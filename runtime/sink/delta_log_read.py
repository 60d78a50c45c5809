"""A delta table's state read from its log in bounded memory, for the full output GC pass
(docs/design.md §7, "A delta sink's table").

The full pass needs three things of a table: the files of its current version, the files its commits
removed inside the Delta retention, and the log's state a cursor records (delta_cursor.py). delta-rs
loads the whole table state to answer the first (199 MiB of RSS at a week of 10 s checkpoints), and a
Python set of every live file and a list of the whole log listing came on top. Here the log itself is
read, as the Delta protocol defines a version: the newest classic checkpoint (`<v>.checkpoint.parquet`,
or all parts of `<v>.checkpoint.<i>.<n>.parquet`), read in row batches with pyarrow, then every commit
after it applied in order; both sets live in the pass's spill (gc_spill.PathSet, exact, with deletes)
and the log is listed as a stream, twice (once to find the checkpoint, once to read).

What cannot be read exactly raises TableUnreadableError, and the pass keeps that path whole: a commit
missing after the checkpoint (a version gap, or a log without checkpoint that does not start at 0), a
commit that vanished while read, a checkpoint holding sidecar actions (a v2 checkpoint under a classic
name), an add with a deletion vector. A v2 checkpoint under its own name (`<v>.checkpoint.<uuid>.*`)
is not read: the classic checkpoint before it and the commits after that describe the same version.
"""

from __future__ import annotations

import json
import os
import re
from dataclasses import dataclass, field
from urllib.parse import unquote

from sparkpoint.runtime.store import ObjectInfo, ObjectStore
from sparkpoint.runtime.store.base import ObjectNotFoundError

from .gc_spill import PathSet, Spill

_VERSIONED = re.compile(r"/_delta_log/(\d{20})\.")
_COMMIT = re.compile(r"/_delta_log/(\d{20})\.json$")
_CLASSIC = re.compile(r"/_delta_log/(\d{20})\.checkpoint(?:\.(\d{10})\.(\d{10}))?\.parquet$")
_BATCH_ROWS = 4096  # checkpoint rows decoded at a time
# A commit file is stored after its removals were stamped (same pod, same clock); this margin only
# decides which commit files are read for removals, and errs on reading more.
LISTING_MARGIN_SECONDS = 600.0
FOREVER_MS = 2**62  # a remove without a deletionTimestamp: always inside the retention


class TableUnreadableError(ValueError):
    """The table's current version cannot be read exactly: the pass deletes nothing of that path."""


@dataclass
class LogRead:
    live: PathSet  # paths (relative to the table's root) of the current version's files
    removed: PathSet  # paths a commit removed inside the retention
    newest: ObjectInfo | None = None  # the newest commit file (the table's version); None: no table
    version: int = -1
    objects: int = 0  # the log's objects sorting before the newest version's (a cursor's metrics)
    bytes: int = 0
    removing: dict[int, int] = field(default_factory=dict)  # version -> newest stamp inside the retention


@dataclass
class _Memo:
    """What an earlier pass of this process read of a log: every commit <= version was read, and only
    those in `removing` hold a removal inside its retention (commit files never change; the newest
    one's size and time show a log written anew)."""
    version: int
    size: int
    modified: float
    retention: float
    removing: dict[int, int]


_MEMOS: dict[str, _Memo] = {}  # one per log: a few ints per commit that removed files, not per commit


def removals(commit: bytes) -> list[tuple[str, int | None]]:
    """The (path relative to the table's root, deletionTimestamp in ms) of one commit file's removes."""
    out: list[tuple[str, int | None]] = []
    for line in commit.splitlines():
        if line.strip() and (remove := json.loads(line).get("remove")) is not None:
            stamp = remove.get("deletionTimestamp")
            out.append((unquote(remove["path"]), None if stamp is None else int(stamp)))
    return out


def newest_stamp(removed: list[tuple[str, int | None]]) -> int | None:
    return max((FOREVER_MS if s is None else s for _, s in removed), default=None)


def newest_checkpoint(store: ObjectStore, prefix: str) -> tuple[int, list[str]] | None:
    """The newest complete classic checkpoint in a streamed listing of the log: (version, part keys)."""
    best: tuple[int, list[str]] | None = None
    version, parts = -1, dict[int, dict[int, str]]()  # one version's checkpoint files at a time: parts[n][i] = key
    for info in store.list(prefix):
        m = _CLASSIC.search(info.key)
        if m is None:
            continue
        v = int(m.group(1))
        if v != version:
            best = _complete(version, parts) or best
            version, parts = v, {}
        i, n = (1, 1) if m.group(2) is None else (int(m.group(2)), int(m.group(3)))
        parts.setdefault(n, {})[i] = info.key
    return _complete(version, parts) or best


def _complete(version: int, parts: dict[int, dict[int, str]]) -> tuple[int, list[str]] | None:
    for n, keys in sorted(parts.items()):
        if len(keys) == n and set(keys) == set(range(1, n + 1)):
            return version, [keys[i] for i in range(1, n + 1)]
    return None


def load_checkpoint(store: ObjectStore, spill: Spill, keys: list[str], live: PathSet) -> None:
    """Add the live files of a checkpoint's parts, read in row batches from a local copy."""
    import pyarrow.parquet as pq

    for n, key in enumerate(keys):
        local = spill.file(f"checkpoint-{n}.parquet")
        try:
            store.get_file(key, local)
        except ObjectNotFoundError as exc:
            raise TableUnreadableError(f"the delta log's checkpoint part {key} vanished while read") from exc
        try:
            # streamed: no row group buffered whole (pre_buffer), one reader thread
            parquet = pq.ParquetFile(local, pre_buffer=False, buffer_size=1 << 20)
            schema = parquet.schema_arrow
            if "sidecar" in schema.names:
                for batch in parquet.iter_batches(columns=["sidecar"], batch_size=_BATCH_ROWS, use_threads=False):
                    if batch.column(0).null_count != batch.num_rows:
                        raise TableUnreadableError(f"the delta log's checkpoint {key} names sidecar files (v2)")
            if "add" not in schema.names:
                continue
            columns = ["add.path"]
            if schema.field("add").type.get_field_index("deletionVector") >= 0:
                columns.append("add.deletionVector")
            for batch in parquet.iter_batches(columns=columns, batch_size=_BATCH_ROWS, use_threads=False):
                # (flatten carries a row's null `add` into its fields: no pyarrow.compute, 12 MiB of RSS)
                fields = batch.column(0).flatten()
                if len(fields) > 1 and fields[1].null_count != len(fields[1]):
                    raise TableUnreadableError(f"the delta log's checkpoint {key} holds deletion vectors")
                live.update(unquote(p) for p in fields[0].to_pylist() if p is not None)
            parquet.close()
        finally:
            os.remove(local)


def _apply(commit: bytes, key: str, live: PathSet) -> None:
    for line in commit.splitlines():
        if not line.strip():
            continue
        action = json.loads(line)
        if (add := action.get("add")) is not None:
            if add.get("deletionVector") is not None:
                raise TableUnreadableError(f"the delta log's commit {key} adds a file with a deletion vector")
            live.add(unquote(add["path"]))
        elif (remove := action.get("remove")) is not None:
            live.discard(unquote(remove["path"]))


def read_log(store: ObjectStore, spill: Spill, prefix: str, *, retention: float, now: float) -> LogRead:
    """The table's state at the newest commit the second listing sees (module doc)."""
    out = LogRead(spill.paths(), spill.paths())
    cutoff_ms = int((now - retention) * 1000)
    checkpoint = newest_checkpoint(store, prefix)
    if checkpoint is not None:
        load_checkpoint(store, spill, checkpoint[1], out.live)
    after = -1 if checkpoint is None else checkpoint[0]
    memo = _valid_memo(store, prefix, retention)
    objects, size = 0, 0
    starts: dict[int, tuple[int, int]] = {}  # the totals before each version's first key, from the newest commit's on
    for info in store.list(prefix):
        if (m := _VERSIONED.search(info.key)) is not None and int(m.group(1)) not in starts:
            starts[int(m.group(1))] = (objects, size)
        objects, size = objects + 1, size + info.size
        if (m := _COMMIT.search(info.key)) is None:
            continue
        v = int(m.group(1))
        removed: list[tuple[str, int | None]] | None = None
        if v > after:
            expected = after + 1 if out.version <= after else out.version + 1
            if v != expected:
                raise TableUnreadableError(f"the delta log lacks version {expected} before {v}")
            try:
                data = store.get_bytes(info.key)
            except ObjectNotFoundError as exc:
                raise TableUnreadableError(f"the delta log's version {v} vanished while read") from exc
            _apply(data, info.key, out.live)
            removed = removals(data)
        elif info.last_modified >= now - retention - LISTING_MARGIN_SECONDS:
            if memo is not None and v <= memo.version and v not in memo.removing:
                removed = []  # read by an earlier pass: no removal inside its retention
            else:
                try:
                    removed = removals(store.get_bytes(info.key))
                except ObjectNotFoundError:
                    continue  # removed by delta-rs's log cleanup (older than the log retention) meanwhile
        out.newest, out.version = info, v
        starts = {k: t for k, t in starts.items() if k >= v}
        if removed and (ms := newest_stamp(removed)) is not None and ms >= cutoff_ms:
            out.removing[v] = ms
            out.removed.update(p for p, s in removed if s is None or s >= cutoff_ms)
    if out.newest is not None:
        out.objects, out.bytes = starts.get(out.version, (objects, size))
        _MEMOS[f"{store.url}\n{prefix}"] = _Memo(out.version, out.newest.size, out.newest.last_modified,
                                                 retention, dict(out.removing))
    return out


def _valid_memo(store: ObjectStore, prefix: str, retention: float) -> _Memo | None:
    memo = _MEMOS.pop(f"{store.url}\n{prefix}", None)
    if memo is None or retention > memo.retention:
        return None
    info = store.stat(f"{prefix}{memo.version:020d}.json")
    if info is None or info.size != memo.size or abs(info.last_modified - memo.modified) > 1e-3:
        return None  # the log was written anew
    return memo
