"""The delta sink's part of an aged store for bench/age_bench.py: the Delta log a job of 10 s checkpoints
leaves beside its commit entries (docs/design.md §6), written in Delta's documented layout.

One commit per checkpoint, `_delta_log/<version:020d>.json`: version 0 also holds the protocol and the
table's metadata; each adds that checkpoint's one Parquet part (by path relative to the table's root,
as the sink commits them in place), with the app transaction (incarnation, checkpoint number) and a
commitInfo naming the checkpoint, as DeltaSink.publish writes them. Each commit file is dated when
its checkpoint ran (10 s apart, the newest a minute ago), so the GC pass's Delta retention (168h)
holds the commits of the last week. delta-rs then writes the table's checkpoint at the last version
(what a table of that age has: delta-rs checkpoints every 100 commits by default), so loading the
table does not replay every commit.
"""

from __future__ import annotations

import json
import os
import time
from pathlib import Path

SCHEMA = {"type": "struct", "fields": [{"name": "v", "type": "long", "nullable": True, "metadata": {}}]}


def add_delta_log(table_root: Path, keys: list[str], job_root: str, incarnation: str = "uid") -> None:
    """Write the log of a table whose version i added the data file keys[i] (store keys under
    `job_root`/outputs/default/), then its checkpoint with delta-rs."""
    log = table_root / "_delta_log"
    log.mkdir(parents=True, exist_ok=True)
    now = time.time()
    prefix = f"{job_root}/outputs/default/"
    n = len(keys)
    for i, key in enumerate(keys):
        stamp = now - 60 - (n - 1 - i) * 10
        ms = int(stamp * 1000)
        actions = []
        if i == 0:
            actions += [{"protocol": {"minReaderVersion": 1, "minWriterVersion": 2}},
                        {"metaData": {"id": "00000000-0000-0000-0000-000000000001",
                                      "format": {"provider": "parquet", "options": {}},
                                      "schemaString": json.dumps(SCHEMA), "partitionColumns": [],
                                      "configuration": {}, "createdTime": ms}}]
        path = key[len(prefix):]
        size = (table_root / path).stat().st_size
        actions += [{"add": {"path": path, "partitionValues": {}, "size": size, "modificationTime": ms,
                             "dataChange": True, "stats": json.dumps({"numRecords": 1})}},
                    {"txn": {"appId": incarnation, "version": i + 1, "lastUpdated": ms}},
                    {"commitInfo": {"timestamp": ms, "operation": "WRITE",
                                    "sparkpoint.checkpoint": f"chk-{i + 1:06d}"}}]
        commit = log / f"{i:020d}.json"
        commit.write_text("\n".join(json.dumps(a) for a in actions) + "\n")
        os.utime(commit, (stamp, stamp))
    from deltalake import DeltaTable

    DeltaTable(f"file://{table_root}").create_checkpoint()


def aged_past_grace(root: Path) -> str:
    """Date every file under `root` an hour back (older than any grace a bench's passes use); its URL."""
    past = time.time() - 3600
    for dirpath, _, names in os.walk(root):
        for name in names:
            os.utime(os.path.join(dirpath, name), (past, past))
    return f"file://{root}"


HOUR = 360  # 10 s batches: an upsert sink snapshots hourly (job.sink.compaction.interval 1h)


class _Rows:
    """A batch as UpsertSink.write_batch takes it: rows and their columns."""

    def __init__(self, rows: list[dict[str, int]]):
        self.rows, self.columns = rows, ["k", "v"]


def _write_parquet(df: _Rows, directory: Path, fmt: str) -> int:
    import pyarrow as pa
    import pyarrow.parquet as pq

    directory.mkdir(parents=True)
    pq.write_table(pa.Table.from_pylist(df.rows), directory / "part-00000.parquet")
    return len(df.rows)


def build_upsert(root: Path, n: int, job_ref: tuple[str, str], keys: int = 100) -> str:
    """A directory store of an upsert sink aged `n` batches of 10 s (a checkpoint each, the last 3
    retained, `keys` keys updated by every batch) as its runtime and GC leave it: the newest hourly
    snapshot and the batches since. Only that last hour is written, by the sink itself (the snapshot
    folds four batches: the key set is constant, so a fold of every earlier batch holds the same rows);
    the GC passes between collect what the snapshot holds."""
    from sparkpoint.runtime.checkpoint import gc_pass, write_fence
    from sparkpoint.runtime.sink.compaction import CompactionSettings
    from sparkpoint.runtime.sink.output_gc import output_gc_pass
    from sparkpoint.runtime.sink.upsert import UpsertSink
    from sparkpoint.runtime.store import JobRef, Manifest, open_store
    from sparkpoint.runtime.store.layout import checkpoint_key
    from sparkpoint.runtime.store.manifest import Totals, utcnow

    store, job = open_store(f"file://{root}"), JobRef(*job_ref)
    sink = UpsertSink(store, job, path="default", key_columns=["k"], staging_dir=root / "upsert-staging",
                      attempt=write_fence(store, job, "uid"), incarnation="uid", write_files=_write_parquet,
                      compaction=CompactionSettings(interval_seconds=0, min_files=2))
    sink.resume(None, None, batch=None)
    snapshot_at = max(3, ((n - 1) // HOUR) * HOUR - 1)  # the newest hourly snapshot's batch

    def checkpoint(batch: int) -> None:
        now = utcnow()
        m = Manifest(id=f"chk-{batch + 1:06d}", namespace=job.namespace, job=job.name, job_uid="uid",
                     attempt=sink.attempt, batch_id=batch, trigger_time=now, completion_time=now,
                     base_checkpoint=None, spark_version=None, state_provider=None, files=[],
                     totals=Totals(files=0, bytes=0, new_bytes=0, reused_bytes=0))
        store.put_bytes(checkpoint_key(job, m.id), m.to_json())
        gc_pass(store, job, retain=3, grace_seconds=0, clock=lambda: time.time() + 5)

    for batch in range(snapshot_at - 3, n):
        sink.write_batch(_Rows([{"k": k, "v": batch} for k in range(keys)]), batch)
        checkpoint(batch)
        if batch == snapshot_at + 2:  # a snapshot folds up to the oldest retained point's batch
            assert sink.compact() is not None
            output_gc_pass(store, job, grace_seconds=0, clock=lambda: time.time() + 5)
    return aged_past_grace(root)


def store_bytes(root: Path, job_root: str) -> dict[str, int]:
    """Bytes under the job's output folder by kind: "data" (the part files of batches, compactions and
    upsert snapshots: what a retained point reads) and, outside data, per prefix of a sink path:
    "_commits", "_snapshots", "_delta_log", "_compactions", "_restores", "upserts" (an upsert sink's
    markers) and "other" (e.g. the GC cursors)."""
    out = root / job_root / "outputs"
    sizes: dict[str, int] = {}
    for dirpath, _, names in os.walk(out):
        rel = Path(dirpath).relative_to(out).parts
        for name in names:
            size = os.stat(os.path.join(dirpath, name)).st_size
            if name.startswith("part-"):
                kind = "data"
            else:
                kind = next((p for p in rel[1:] if p in ("_commits", "_snapshots", "_delta_log", "_compactions",
                                                          "_restores")), None) or (
                    "upserts" if "upserts" in rel else "other")
            sizes[kind] = sizes.get(kind, 0) + size
    return sizes


def add_compactions(table_root: Path, keys: list[str], job_root: str, shared: int, every: int = HOUR) -> int:
    """What a delta sink's default compaction (job.sink.compaction: hourly, 128Mi files) leaves in a
    store whose batch i wrote keys[i] (store keys under `job_root`/outputs/default/), over the Delta log
    add_delta_log wrote: per hour of the batches every retained point shares (< `shared`) a record
    replacing the previous compacted file and the hour's small files (all far below 128Mi: one file
    grows), its compacted file, and a Delta commit that removes the run's files and adds it, dated when
    it ran; then delta-rs's checkpoint of the table again. Only the newest compacted file holds real
    rows (one per batch, as the parts do); the older ones, which no history reads, are one file's links.
    The commits follow the batches' in the log instead of standing between them (the bench reads the
    table's state and the removals, not the order). Returns the number of records."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    prefix = f"{job_root}/outputs/default/"
    log = table_root / "_delta_log"
    version = len(keys)
    previous: list[str] = []
    rows = 0
    now = time.time()
    hours = [range(start, min(start + every, shared)) for start in range(0, shared, every)]
    hours = [h for h in hours if len(h) >= 10]  # a run of fewer than minFiles files stays
    dummy = table_root / "dummy-compacted.parquet"
    pq.write_table(pa.table({"v": pa.array([0], pa.int64())}), dummy)
    links = 0
    for seq, hour in enumerate(hours, start=1):
        rid = f"cmp-{1:06d}-{seq:06d}"
        key = f"{prefix}staging/attempt-1/compact-{rid}/part-00000.parquet"
        path = table_root / key[len(prefix):]
        path.parent.mkdir(parents=True)
        run = [previous] if previous else []
        run += [[keys[i]] for i in hour]
        rows += len(hour)
        if seq == len(hours):
            pq.write_table(pa.table({"v": pa.array([1] * rows, pa.int64())}), path)
        else:
            if links and links % 60_000 == 0:  # a file takes at most 65,000 hard links (ext4)
                dummy = table_root / f"dummy-compacted-{links}.parquet"
                pq.write_table(pa.table({"v": pa.array([0], pa.int64())}), dummy)
            os.link(dummy, path)
            links += 1
        size = path.stat().st_size
        record = {"id": rid, "attempt": 1, "incarnation": "uid", "replaces": run, "key": key, "batch": 0,
                  "lastBatch": hour[-1], "batches": rows, "rows": rows, "size": size}
        records = table_root / "_compactions"
        records.mkdir(exist_ok=True)
        (records / f"{rid}.json").write_text(json.dumps(record, sort_keys=True))
        stamp = now - 60 - (len(keys) - 1 - hour[-1]) * 10
        ms = int(stamp * 1000)
        actions = [{"remove": {"path": k[len(prefix):], "deletionTimestamp": ms, "dataChange": False}}
                   for keys_of_item in run for k in keys_of_item]
        actions += [{"add": {"path": key[len(prefix):], "partitionValues": {}, "size": size, "modificationTime": ms,
                             "dataChange": False, "stats": json.dumps({"numRecords": rows})}},
                    {"commitInfo": {"timestamp": ms, "operation": "OPTIMIZE", "sparkpoint.compaction": rid,
                                    # the checkpoint the table is at, as the sink's compaction commit names it
                                    "sparkpoint.checkpoint": f"chk-{len(keys):06d}"}}]
        commit = log / f"{version:020d}.json"
        commit.write_text("\n".join(json.dumps(a) for a in actions) + "\n")
        os.utime(commit, (stamp, stamp))
        version += 1
        previous = [key]
    dummy.unlink()
    for extra in table_root.glob("dummy-compacted-*.parquet"):
        extra.unlink()
    from deltalake import DeltaTable

    DeltaTable(f"file://{table_root}").create_checkpoint()
    return len(hours)
