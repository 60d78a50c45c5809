"""A micro-batch written as files by Spark's executors, never collected on the driver (docs/design.md §6).

The sinks hand `write_batch_files` the batch's DataFrame and an empty local folder; Spark writes one
part file per non-empty partition there (Parquet, or JSON lines when `job.sink.format: jsonl`) and
counts the rows on the way with an Observation, so the driver holds neither the rows nor a second
pass over them. The folder is on the driver's local disk: with Spark in local mode the executors
are threads of the driver's JVM and write there directly, and the checkpoint uploads the files, so
the same path works for every store backend and a store outage never blocks a batch.

`write_checked` is what the sinks call: the rows in the part files the driver can see must equal the
rows Spark counted, or the batch is written again. With executors on other pods the folder is a
shared volume, and a directory listing there (NFS) may miss a file another node just wrote; adopting
what the listing shows would commit a batch with rows missing and no error (issue 42).
"""

from __future__ import annotations

import itertools
import logging
import os
import shutil
import threading
from collections.abc import Callable
from pathlib import Path
from typing import Any

log = logging.getLogger("sparkpoint.sink")

WRITE_TRIES = 3

_observations = itertools.count()

# Spark's JSON text for timestamps carries the session's zone offset by default; this keeps the
# microseconds and leaves the zone out, the form the driver-encoded JSON lines had.
JSON_OPTIONS = {"ignoreNullFields": "false", "timestampFormat": "yyyy-MM-dd'T'HH:mm:ss.SSSSSS",
                "timestampNTZFormat": "yyyy-MM-dd'T'HH:mm:ss.SSSSSS"}


def write_batch_files(df: Any, directory: Path, fmt: str) -> int:
    """Write `df` into `directory` (which must not exist) as `fmt` files; returns the row count."""
    from pyspark.sql import Observation
    from pyspark.sql import functions as F

    # Parquet timestamps as instants in microseconds (Spark's default INT96 is deprecated in Parquet
    # and read as zone-less by other tools). A session setting; the runtime owns the session.
    df.sparkSession.conf.set("spark.sql.parquet.outputTimestampType", "TIMESTAMP_MICROS")
    observation = Observation(f"sparkpoint_rows_{next(_observations)}")
    writer = df.observe(observation, F.count(F.lit(1)).alias("rows")).write.mode("errorifexists")
    if fmt == "parquet":
        writer.parquet(str(directory))
    elif fmt == "jsonl":
        writer.options(**JSON_OPTIONS).json(str(directory))
    else:
        raise ValueError(f"unknown sink format {fmt!r}")
    return int(observation.get["rows"])


class StagedOutputIncomplete(Exception):
    """The part files of a batch hold other than the rows Spark counted, on every try."""


def part_files(directory: Path) -> list[Path]:
    """The part files Spark wrote into `directory`, in name order (its _SUCCESS and .crc left out)."""
    parts = sorted(p for p in directory.iterdir() if p.name.startswith("part-") and not p.name.endswith(".crc"))
    return _stale_listing(parts)


# Fault injection for the reliability tests (unset in production): `SPARKPOINT_FAULT_STALE_LISTING=<n>`
# makes the first n listings of a batch folder that show two or more parts leave the last one out, as
# a stale NFS listing would. The check in write_checked is the real one; only the listing is stale.
_stale_lock = threading.Lock()
_stale_listings = 0


def _stale_listing(parts: list[Path]) -> list[Path]:
    global _stale_listings
    limit = int(os.environ.get("SPARKPOINT_FAULT_STALE_LISTING") or 0)
    if limit <= 0 or len(parts) < 2:
        return parts
    with _stale_lock:
        if _stale_listings >= limit:
            return parts
        _stale_listings += 1
    log.warning("fault injection: a stale listing hides a part file", extra={"hidden": parts[-1].name})
    return parts[:-1]


def part_rows(path: Path, fmt: str) -> int:
    """Rows in one part file: the Parquet footer's count, or the lines of a JSON lines file."""
    if fmt == "parquet":
        import pyarrow.parquet as pq

        return int(pq.read_metadata(path).num_rows)
    data = path.read_bytes()
    return data.count(b"\n") + (1 if data and not data.endswith(b"\n") else 0)


def try_folder(directory: Path, attempt: int) -> Path:
    """The folder try `attempt` writes into: `directory`, then `<directory>-r<n>`."""
    return directory if attempt == 1 else directory.with_name(f"{directory.name}-r{attempt}")


def remove_tries(directory: Path, tries: int = WRITE_TRIES) -> None:
    """Remove every try's folder that is left (best effort: a later sweep of the work dir gets the rest)."""
    for attempt in range(1, tries + 1):
        shutil.rmtree(try_folder(directory, attempt), ignore_errors=True)


def write_checked(write_files: Callable[[Any, Path, str], int], df: Any, directory: Path, fmt: str,
                  tries: int = WRITE_TRIES, on_short: Callable[[], None] | None = None) -> tuple[int, Path, list[Path]]:
    """`write_files` into `directory`, then check the parts' rows against Spark's count; on a mismatch
    write the batch again (a foreachBatch DataFrame may be evaluated more than once) and after `tries`
    raise StagedOutputIncomplete, which fails the batch: never stage a batch with rows missing.
    Each try writes a folder of its own (try_folder): Spark never writes into an existing folder, and
    a short try's folder may outlive its removal (on NFS the delete lists the folder as stale as the
    check did, and the folder it cannot empty stays). Returns the rows, the folder and the checked
    part files (the caller adopts these, not a later listing); remove_tries cleans up. `on_short` is
    called once per short try (the sinks count them for `sparkpoint_sink_short_writes_total`)."""
    for attempt in range(1, tries + 1):
        folder = try_folder(directory, attempt)
        rows = write_files(df, folder, fmt)
        parts = part_files(folder) if folder.exists() else []
        found = sum(part_rows(p, fmt) for p in parts)
        if found == rows:
            return rows, folder, parts
        log.warning("a batch's part files hold other than the rows Spark counted; writing it again",
                    extra={"counted_rows": rows, "rows_in_parts": found, "try": attempt, "tries": tries})
        if on_short is not None:
            on_short()
        shutil.rmtree(folder, ignore_errors=True)
    raise StagedOutputIncomplete(f"the part files in {directory} held {found} rows, Spark counted {rows}, "
                                 f"on each of {tries} tries; the batch is not staged")
