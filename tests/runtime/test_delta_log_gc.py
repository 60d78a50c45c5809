"""A delta sink's expired Delta log (runtime/sink/delta_log_gc.py): the GC pass deletes the log files
older than the log retention and below the newest checkpoint older than it, as Delta's own metadata
cleanup does (before, `_delta_log/` was never collected: a commit per checkpoint and a checkpoint of
the whole table per 100 commits, for the job's life); every version from that checkpoint on, and the
table readers see, read the same with delta-rs."""

from __future__ import annotations

import os
import time

from sparkpoint.runtime.sink.delta_log_gc import CLEAN_EVERY, LOG_RETENTION_SECONDS, expired_log
from sparkpoint.runtime.sink.gc_cursor import read_cursor
from sparkpoint.runtime.sink.output_gc import output_gc_pass
from sparkpoint.runtime.sink.reader import read_committed
from sparkpoint.runtime.store import ObjectInfo

from .test_delta_gc_cursor import aged_delta_store
from .test_output_gc import later

LOG = "job/outputs/p/_delta_log/"


def _info(name: str, age_days: float, now: float = 1e9) -> ObjectInfo:
    return ObjectInfo(key=LOG + name, size=10, last_modified=now - age_days * 86400)


def test_only_files_below_the_newest_expired_checkpoint_go_and_the_listing_stops_at_the_first_young_file():
    listing = [_info(f"{v:020d}.json", 40 - v / 50) for v in range(0, 600)]  # v >= 500: younger than 30 days
    listing += [_info(f"{v:020d}.checkpoint.parquet", 40 - v / 50) for v in (100, 200, 300, 400, 550)]
    listing.sort(key=lambda o: o.key)
    listing.append(_info("_last_checkpoint", 0))
    seen: list[str] = []

    def lazily():  # type: ignore[no-untyped-def]
        for info in listing:
            seen.append(info.key)
            yield info
    gone = [o.key[len(LOG):] for o in expired_log(lazily(), 1e9 - 30 * 86400)]
    # checkpoint 400 is 32 days old, 550 is 29: everything below 400 goes, 400 itself and on stays
    assert gone == sorted([f"{v:020d}.json" for v in range(400)]
                          + [f"{v:020d}.checkpoint.parquet" for v in (100, 200, 300)])
    assert len(seen) < len(listing) - 1  # stopped at the first file younger than 30 days
    young = [_info(f"{v:020d}.json", 1) for v in range(5)] + [_info("00000000000000000003.checkpoint.parquet", 1)]
    assert list(expired_log(sorted(young, key=lambda o: o.key), 1e9 - 30 * 86400)) == []


def test_a_gc_pass_collects_the_expired_delta_log_and_the_table_reads_the_same(tmp_path):
    from deltalake import DeltaTable

    n = 300
    store, job = aged_delta_store(tmp_path, n)
    table = tmp_path / job.root / "outputs" / "default"
    log = table / "_delta_log"
    for version in (100, 200):
        DeltaTable(str(table), version=version).create_checkpoint()
    old = time.time() - LOG_RETENTION_SECONDS - 86400
    for name in os.listdir(log):  # versions up to 250 (and checkpoints 100 and 200) older than the retention
        if name[:20].isdigit() and int(name[:20]) <= 250:
            os.utime(log / name, (old, old))
    files_before = sorted(DeltaTable(str(table)).file_uris())
    rows_before = read_committed(store, job)

    result = output_gc_pass(store, job, grace_seconds=0, clock=later)
    left = sorted(os.listdir(log))
    assert result.deleted_log_files == 200 + 1  # commits 0..199 and checkpoint 100
    assert left[0] == f"{200:020d}.checkpoint.parquet" and f"{199:020d}.json" not in left
    assert sorted(DeltaTable(str(table)).file_uris()) == files_before
    for version in (200, 250, n - 1):  # every version from the kept checkpoint on still loads
        assert DeltaTable(str(table), version=version).version() == version
    assert read_committed(store, job) == rows_before
    cursor = read_cursor(store, job, "default").delta
    before_newest = [x for x in left if x < f"{n - 1:020d}"]  # what the cursor counts: the log before its version
    assert cursor and cursor["log_start"] == 200 and cursor["objects"] == len(before_newest) == 100

    steady = output_gc_pass(store, job, grace_seconds=0, clock=later)  # within the hour: the log is not listed
    assert steady.deleted_log_files == 0 and not steady.skipped_paths
    hour_later = output_gc_pass(store, job, grace_seconds=0, clock=lambda: later() + CLEAN_EVERY + 1)
    assert hour_later.deleted_log_files == 0 and sorted(os.listdir(log)) == left
