"""Reading what the transactional sink committed: exactly the rows of the history readers see (docs/design.md §6).

`read_committed` returns them as a list, `iter_committed` one at a time (a batch's files are read one
file at a time, so memory is bounded by the largest file, not the output), `committed_files` names
the store objects for tools that read Parquet themselves (pyarrow, DuckDB, polars, Spark).

Rows are JSON-compatible dicts, the form the sink's first format had: Parquet timestamps become ISO
8601 text in local time without a zone (what `collect()` and `isoformat` gave), dates ISO text,
decimals text, binary hex. JSON lines files (`job.sink.format: jsonl`) are read as Spark wrote them.
"""

from __future__ import annotations

import io
import json
from collections.abc import Iterable, Iterator
from datetime import UTC, date, datetime
from decimal import Decimal
from typing import Any

from sparkpoint.runtime.store import JobRef, ObjectStore

from .compaction import apply_records, history_items, load_records
from .history import SegmentReader
from .history import entry_ids as _entry_ids
from .history import entry_loader as _loader
from .keys import LEGACY_FORMAT, file_format, file_keys
from .lineage import follow_chain, head_entry
from .rows import decode_rows


def current_head(store: ObjectStore, job: JobRef, path: str) -> dict[str, Any] | None:
    return head_entry(_entry_ids(store, job, path), _loader(store, job, path))


def committed_history(store: ObjectStore, job: JobRef,
                      path: str) -> tuple[dict[str, Any] | None, list[dict[str, Any]]]:
    """(the head readers start from, the commit entries of its history oldest first): one listing of
    `_commits/`, one walk that reads whole snapshotted segments at a time (history.py)."""
    ids = _entry_ids(store, job, path)
    load = _loader(store, job, path)
    head = head_entry(ids, load)
    segments = SegmentReader(store, job, path, ids=set() if head is None else None, head=head)
    return head, follow_chain(head, ids, load, segments)


def committed_entries(store: ObjectStore, job: JobRef, path: str) -> list[dict[str, Any]]:
    """The commit entries of the history readers see, oldest first."""
    return committed_history(store, job, path)[1]


def committed_files(store: ObjectStore, job: JobRef, path: str = "default",
                    entries: list[dict[str, Any]] | None = None) -> list[dict[str, Any]]:
    """One item per committed batch, in batch order: {"batch", "rows", "format", "keys"}; a delta
    sink's compacted file stands for the consecutive batches it holds ("lastBatch", "batches": how
    many; compaction.py). `entries`: the history's entries if already read (committed_history)."""
    entries = committed_entries(store, job, path) if entries is None else entries
    items = apply_records(history_items(entries), load_records(store, job, path))
    return [as_file(f) for f in items]


def as_file(item: dict[str, Any]) -> dict[str, Any]:
    """A history's batch item (records applied) as committed_files gives it."""
    out = {"batch": item["batch"], "rows": item.get("rows"), "format": file_format(item), "keys": file_keys(item)}
    if "lastBatch" in item:
        out.update(lastBatch=item["lastBatch"], batches=item["batches"])
    return out


def iter_committed(store: ObjectStore, job: JobRef, path: str = "default",
                   files: Iterable[dict[str, Any]] | None = None) -> Iterator[dict[str, Any]]:
    """Every committed output row, in batch order (within a batch, in part-file order). `files`:
    committed_files' answer if already read; without it the history is streamed (history_stream.py:
    memory of one snapshot segment, not of the job's whole history)."""
    if files is None:
        from .history_stream import HistoryStream

        files = (as_file(item) for item in HistoryStream(store, job, path).items())
    for f in files:
        for key in f["keys"]:
            yield from decode_file(store.get_bytes(key), f["format"])


def read_committed(store: ObjectStore, job: JobRef, path: str = "default") -> list[dict[str, Any]]:
    """Every committed output row, in batch order: what a reader of the sink sees."""
    return list(iter_committed(store, job, path))


def decode_file(data: bytes, fmt: str, utc: set[str] | None = None) -> Iterator[dict[str, Any]]:
    """`utc`: Parquet timestamps (instants) in UTC instead of local time, and the names of the
    top-level columns that hold them added to the set (what an upsert snapshot stores)."""
    if fmt == "parquet":
        import pyarrow as pa
        import pyarrow.parquet as pq  # only readers of Parquet output need pyarrow

        parquet = pq.ParquetFile(io.BytesIO(data))
        if utc is not None:
            utc.update(f.name for f in parquet.schema_arrow if pa.types.is_timestamp(f.type) and f.type.tz)
        for group in range(parquet.num_row_groups):
            for row in parquet.read_row_group(group).to_pylist():
                yield {k: _plain(v, utc is not None) for k, v in row.items()}
    elif fmt == "jsonl":
        for line in data.decode().splitlines():
            if line.strip():
                yield json.loads(line)
    elif fmt == LEGACY_FORMAT:
        yield from decode_rows(data)
    else:
        raise ValueError(f"committed output in an unknown format {fmt!r} (written by a newer Sparkpoint?)")


def _plain(value: Any, utc: bool = False) -> Any:
    if isinstance(value, datetime):
        if value.tzinfo is not None:  # Spark's Parquet timestamps are instants: show them in local time
            value = value.astimezone(UTC if utc else None).replace(tzinfo=None)
        return value.isoformat(timespec="microseconds")
    if isinstance(value, date):
        return value.isoformat()
    if isinstance(value, Decimal):
        return str(value)
    if isinstance(value, bytes | bytearray):
        return value.hex()
    if isinstance(value, dict):
        return {k: _plain(v, utc) for k, v in value.items()}
    if isinstance(value, list):
        if value and all(isinstance(v, tuple) and len(v) == 2 for v in value):  # a map column
            return {str(k): _plain(v, utc) for k, v in value}
        return [_plain(v, utc) for v in value]
    return value


def utc_to_local(text: str) -> str:
    """A UTC timestamp as decode_file(utc=...) wrote it -> as decode_file writes it by default."""
    value = datetime.fromisoformat(text).replace(tzinfo=UTC).astimezone().replace(tzinfo=None)
    return value.isoformat(timespec="microseconds")
