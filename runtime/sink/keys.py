"""Where the sinks' output lives in the store (docs/design.md §3 and §6), and how a commit entry names its files.

Under `<job>/outputs/<path>/`:

  staging/attempt-<A>/batch-<B>-<run>/part-<i>.parquet|.json   one batch's files as uploaded by attempt A
  staging/attempt-<A>/batch-<B>.jsonl                           the same, written before executor-written files
  _commits/<entry-id>.json                                      commit entries (lineage.py)
  upserts/...                                                   the upsert sink (upsert.py)

A commit entry's `files` holds one item per batch: {"batch", "rows", "format", "keys"}; entries written
before executor-written files name a single JSON lines object as {"batch", "rows", "key"}.
"""

from __future__ import annotations

import re
from typing import Any

from sparkpoint.runtime.store import JobRef
from sparkpoint.runtime.store.layout import outputs_prefix

FORMATS = {"parquet": ".parquet", "jsonl": ".json"}  # Spark's JSON writer writes JSON lines
LEGACY_FORMAT = "legacy-jsonl"  # rows encoded by the driver (rows.encode_rows), before this layout
_ATTEMPT_DIR = re.compile(r"/staging/attempt-(\d+)/")


def sink_root(job: JobRef, path: str) -> str:
    return f"{outputs_prefix(job)}{path.strip('/')}"


def commits_prefix(job: JobRef, path: str) -> str:
    return f"{sink_root(job, path)}/_commits/"


def commit_key(job: JobRef, path: str, entry_id: str) -> str:
    return f"{commits_prefix(job, path)}{entry_id}.json"


def staging_prefix(job: JobRef, path: str) -> str:
    return f"{sink_root(job, path)}/staging/"


def batch_dir_key(job: JobRef, path: str, attempt: int, batch_id: int, run: str) -> str:
    """The folder of one staged run of a batch. The uploading attempt names it (not the one that ran
    the batch): GC spares the newest attempt's folder whole, so what a running checkpoint uploads is safe."""
    return f"{staging_prefix(job, path)}attempt-{attempt}/batch-{batch_id:09d}-{run}/"


def staged_attempt(key: str) -> int | None:
    """The attempt whose staging folder holds `key`, or None for a key outside staging/."""
    m = _ATTEMPT_DIR.search(key)
    return int(m.group(1)) if m else None


def file_keys(item: dict[str, Any]) -> list[str]:
    """The store keys one batch of a commit entry (or of a manifest's `extra.sink`) names."""
    return list(item["keys"]) if "keys" in item else [item["key"]]


def file_format(item: dict[str, Any]) -> str:
    return str(item.get("format", LEGACY_FORMAT)) if "keys" in item else LEGACY_FORMAT
