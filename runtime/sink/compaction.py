"""Compaction records of a delta sink: which committed small files one compacted file replaces (docs/design.md §7).

Under `outputs/<path>/`:

  _compactions/<record id>.json    {"id", "attempt", "incarnation", "replaces", "key", "batch",
                                    "lastBatch", "batches", "rows", "size"}
  staging/attempt-<A>/compact-<record id>/part-00000.parquet   the compacted file (`key`)

`replaces` lists, in history order, the files of consecutive batch items (per item its keys; an item
may itself be an earlier record's file); the compacted file holds their rows in that order. A record
never changes what a history holds, only which files hold it: every view of a history (the Delta
table's sync, the entries' readers, output GC) applies the records, in id order, to the history's
batch items, replacing a run of items by the record's file exactly when the history holds every item
of the run, contiguous and in order (`apply_records`). A history that holds only some of them keeps
its small files, and output GC keeps those for it. The runtime compacts only batches that every
retained checkpoint's and savepoint's history shares (`shared_prefix`), so after a compaction every
restorable point applies the record and the small files are needed only for Delta's time travel,
until the Delta retention passes.

Only the runtime writes records (the single fenced writer of the table's log; the GC sidecar's
credential may not write). Records are immutable; ids sort in the order they were written.
"""

from __future__ import annotations

import json
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from sparkpoint.runtime.store import JobRef, ObjectStore
from sparkpoint.runtime.store.base import ObjectNotFoundError

from .keys import sink_root, staging_prefix


@dataclass(frozen=True)
class CompactionSettings:
    """`job.sink.compaction` of a delta sink (spec/sections.py): when and what the runtime compacts."""

    interval_seconds: float = 3600.0  # at most once per interval, after a checkpoint's publish
    target_bytes: int = 128 << 20  # files smaller than this are compacted into files up to this size
    min_files: int = 10  # a run of fewer small files is left as it is


def compaction_settings(spec: Any) -> CompactionSettings | None:
    """`job.sink.compaction` (config.Compaction, or None for its defaults) -> settings; None when off."""
    from sparkpoint.runtime.spec import Compaction, parse_duration, parse_quantity

    spec = spec if spec is not None else Compaction()
    if not spec.enabled:
        return None
    return CompactionSettings(interval_seconds=parse_duration(spec.interval),
                              target_bytes=int(parse_quantity(spec.target_file_size)), min_files=spec.min_files)


def compactions_prefix(job: JobRef, path: str) -> str:
    return f"{sink_root(job, path)}/_compactions/"


def record_id(attempt: int, seq: int) -> str:
    return f"cmp-{attempt:06d}-{seq:06d}"


def compacted_key(job: JobRef, path: str, attempt: int, rid: str) -> str:
    """In the writing attempt's staging folder, which GC spares whole while it is the newest."""
    return f"{staging_prefix(job, path)}attempt-{attempt}/compact-{rid}/part-00000.parquet"


def record_attempt(rid: str) -> int | None:
    parts = rid.split("-")
    return int(parts[1]) if len(parts) == 3 and parts[0] == "cmp" and parts[1].isdigit() else None


def load_records(store: ObjectStore, job: JobRef, path: str,
                 cache: dict[str, dict[str, Any]] | None = None) -> list[dict[str, Any]]:
    """Every record of the sink path, in id order (`cache`: records never change, read each once)."""
    cache = {} if cache is None else cache
    out = []
    for info in store.list(compactions_prefix(job, path)):
        if not info.key.endswith(".json"):
            continue
        if info.key not in cache:
            try:
                cache[info.key] = json.loads(store.get_bytes(info.key))
            except ObjectNotFoundError:
                continue  # collected meanwhile: it applied to no history anything needs
        out.append(cache[info.key])
    return sorted(out, key=lambda r: str(r["id"]))


def history_items(chain: Iterable[dict[str, Any]]) -> list[dict[str, Any]]:
    """The batch items of a chain of entries (or sink sections), oldest first, one per batch."""
    out: list[dict[str, Any]] = []
    seen: set[int] = set()
    for doc in chain:
        for item in doc.get("files", []):
            if item["batch"] not in seen:  # entries from before lineage could overlap
                seen.add(item["batch"])
                out.append(item)
    return out


def item_keys(item: dict[str, Any]) -> list[str]:
    return list(item["keys"]) if "keys" in item else [item["key"]]


def last_batch(item: dict[str, Any]) -> int:
    return int(item.get("lastBatch", item["batch"]))


def merged_item(record: dict[str, Any]) -> dict[str, Any]:
    return {"batch": record["batch"], "lastBatch": record["lastBatch"], "batches": record["batches"],
            "rows": record["rows"], "format": "parquet",
            "keys": [record["key"]], "parts": [{"size": record["size"], "rows": record["rows"]}],
            "compaction": record["id"]}


def apply_records(items: list[dict[str, Any]], records: list[dict[str, Any]],
                  applied: set[str] | None = None) -> list[dict[str, Any]]:
    """Pure: the history's items with every record that applies whole replaced by its file. `applied`
    collects the ids of every record applied on the way, also those a later record's run consumed
    (the later one applies only after them)."""
    out = list(items)
    for record in records:
        runs = [list(r) for r in record["replaces"]]
        if not runs:
            continue
        first = next((i for i, it in enumerate(out) if item_keys(it) == runs[0]), None)
        if first is None or [item_keys(it) for it in out[first:first + len(runs)]] != runs:
            continue
        out[first:first + len(runs)] = [merged_item(record)]
        if applied is not None:
            applied.add(str(record["id"]))
    return out


def common_prefix(chains: list[list[str]]) -> list[str]:
    """Pure: the longest list of entry ids every chain starts with."""
    if not chains:
        return []
    prefix = chains[0]
    for chain in chains[1:]:
        n = 0
        while n < min(len(prefix), len(chain)) and prefix[n] == chain[n]:
            n += 1
        prefix = prefix[:n]
    return prefix


def item_size(item: dict[str, Any]) -> int | None:
    parts = item.get("parts")
    if not parts or item.get("format", "parquet") != "parquet" or "keys" not in item:
        return None  # written by kind transactional or in JSON lines: never compacted
    return sum(int(p["size"]) for p in parts)


def plan_runs(items: list[dict[str, Any]], *, up_to_batch: int, target_bytes: int,
              min_files: int) -> list[list[dict[str, Any]]]:
    """Pure: runs of consecutive items, all before `up_to_batch` and smaller than `target_bytes`,
    whose files add up to at most `target_bytes`; only runs of at least `min_files` files."""
    runs: list[list[dict[str, Any]]] = []
    run: list[dict[str, Any]] = []
    total = 0

    def close() -> None:
        if sum(len(item_keys(i)) for i in run) >= max(2, min_files):  # one file would be copied, not compacted
            runs.append(list(run))
        run.clear()

    for item in items:
        size = item_size(item)
        if last_batch(item) > up_to_batch or size is None or size >= target_bytes:
            close()
            total = 0
            if last_batch(item) > up_to_batch:
                break
            continue
        if total + size > target_bytes:
            close()
            total = 0
        run.append(item)
        total += size
    close()
    return runs


class SchemaChanged(Exception):
    """The run's files do not share one schema: left as they are."""


@dataclass(frozen=True)
class Compacted:
    path: Path
    size: int
    rows: int


def write_compacted(store: ObjectStore, run: list[dict[str, Any]], out: Path) -> Compacted:
    """Concatenate the run's Parquet files, in order, into `out`: one small file in memory at a time."""
    import io

    import pyarrow.parquet as pq

    writer = None
    rows = 0
    try:
        for item in run:
            for key in item_keys(item):
                table = pq.read_table(io.BytesIO(store.get_bytes(key)))
                if writer is None:
                    writer = pq.ParquetWriter(str(out), table.schema)
                elif not table.schema.equals(writer.schema):
                    raise SchemaChanged(f"{key} has another schema than the run's first file")
                writer.write_table(table)
                rows += table.num_rows
    finally:
        if writer is not None:
            writer.close()
    return Compacted(out, out.stat().st_size, rows)
