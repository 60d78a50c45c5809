"""Output bytes of an upsert sink with a constant key set, with and without snapshots + output GC.

Every batch updates every one of --keys keys (Parquet through the sink's own code; the part files
are written by pyarrow in place of Spark's executors); a checkpoint every --every batches, retention 3,
and after each checkpoint (with snapshots) a snapshot and an output GC pass with a zero grace. Prints
the bytes under upserts/ after each --batches count. Directory store (the byte counts are the store's).

    python bench/upsert_snapshot_bench.py                            # 200 and 500 batches; updates docs/benchmarks.md
    python bench/upsert_snapshot_bench.py --small                    # 40 and 100 batches (make bench's --small)
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import report  # bench/report.py; bench/ is on sys.path when this runs as a script

from sparkpoint.runtime.checkpoint import gc_pass, write_fence
from sparkpoint.runtime.sink.compaction import CompactionSettings
from sparkpoint.runtime.sink.output_gc import output_gc_pass
from sparkpoint.runtime.sink.upsert import UpsertSink, read_upserted
from sparkpoint.runtime.store import JobRef, Manifest, open_store
from sparkpoint.runtime.store.layout import checkpoint_key
from sparkpoint.runtime.store.manifest import Totals, utcnow

START, END = "<!-- upsert-snapshot-bench:start -->", "<!-- upsert-snapshot-bench:end -->"
MIB = 2**20


class Batch:
    def __init__(self, rows):
        self.rows, self.columns = rows, ["k", "v", "payload"]


def write_parquet(df: Batch, directory: Path, fmt: str) -> int:
    import pyarrow as pa
    import pyarrow.parquet as pq

    directory.mkdir(parents=True)
    pq.write_table(pa.Table.from_pylist(df.rows), directory / "part-00000.parquet")
    return len(df.rows)


def run(root: Path, *, keys: int, batches: int, every: int, snapshots: bool) -> tuple[int, int, float]:
    store, job = open_store(f"file://{root}/store"), JobRef("bench", "upsert")
    sink = UpsertSink(store, job, path="agg", key_columns=["k"], attempt=write_fence(store, job),
                      staging_dir=root / "staging", write_files=write_parquet,
                      compaction=CompactionSettings(interval_seconds=0, min_files=2) if snapshots else None)
    sink.resume(None, None, batch=None)
    maintenance = 0.0
    for b in range(batches):
        sink.write_batch(Batch([{"k": k, "v": b, "payload": f"{k:08d}" * 8} for k in range(keys)]), b)
        if b % every == every - 1:
            now = utcnow()
            m = Manifest(id=f"chk-{b // every + 1:06d}", namespace=job.namespace, job=job.name, job_uid="u",
                         attempt=sink.attempt, batch_id=b, trigger_time=now, completion_time=now,
                         base_checkpoint=None, spark_version=None, state_provider=None, files=[],
                         totals=Totals(files=0, bytes=0, new_bytes=0, reused_bytes=0))
            store.put_bytes(checkpoint_key(job, m.id), m.to_json())
            gc_pass(store, job, retain=3, grace_seconds=0, clock=lambda: time.time() + 5)
            if snapshots:
                t0 = time.perf_counter()
                sink.maintain()
                output_gc_pass(store, job, grace_seconds=0, clock=lambda: time.time() + 5)
                maintenance += time.perf_counter() - t0
    objects = [o for o in store.list("") if "/upserts/" in o.key]
    assert len(read_upserted(store, job, "agg", ["k"])) == keys
    return sum(o.size for o in objects), len(objects), maintenance


def render(rows: list[dict[str, Any]], keys: int, every: int, loads: list[float]) -> str:
    lines = [START, "## Upsert output with a constant key set (`bench/upsert_snapshot_bench.py`)", "",
             f"Measured {time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime())} at commit `{report.commit()}` on "
             f"{os.cpu_count()} cores, load average {loads[0]:.1f} -> {loads[-1]:.1f} (the byte counts do not depend "
             f"on the load; the seconds do). Every batch updates all {keys:,} keys (a row: key, batch number, "
             f"64-character payload; Parquet), a checkpoint every {every} batches, retention 3; with snapshots, a "
             "snapshot (`compact`, interval 0) and an output GC pass (grace 0) after each checkpoint. Directory "
             "store; bytes under `upserts/` at the end:", "",
             "| batches | without snapshots | with snapshots | with / without | snapshots + GC passes, total time |",
             "| ---: | --- | --- | ---: | --- |"]
    for r in rows:
        lines.append(f"| {r['batches']} | {r['without'][0] / MIB:.2f} MiB in {r['without'][1]:,} objects | "
                     f"{r['with'][0] / MIB:.2f} MiB in {r['with'][1]:,} objects | "
                     f"{r['with'][0] / r['without'][0]:.3f} | {r['seconds']:.1f} s ({r['batches'] // every} of each) |")
    lines += ["", "Without snapshots the output grows by one batch per batch; with them it stays at one snapshot "
              "plus the batches after the oldest retained checkpoint, however many batches ran.", END]
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--keys", type=int, default=1000)
    p.add_argument("--batches", default="200,500", help="comma-separated batch counts, one pair of runs each")
    p.add_argument("--every", type=int, default=10, help="batches per checkpoint")
    p.add_argument("--small", action="store_true", help="40 and 100 batches")
    p.add_argument("--no-write", action="store_true", help="print, do not update docs/benchmarks.md")
    a = p.parse_args(argv)
    counts = [40, 100] if a.small else [int(b) for b in a.batches.split(",")]
    loads, rows = [os.getloadavg()[0]], []
    for batches in counts:
        row: dict[str, Any] = {"batches": batches}
        for snapshots in (False, True):
            with tempfile.TemporaryDirectory() as tmp:
                size, count, spent = run(Path(tmp), keys=a.keys, batches=batches, every=a.every, snapshots=snapshots)
            row["with" if snapshots else "without"] = (size, count)
            if snapshots:
                row["seconds"] = spent
        print(row, flush=True)
        rows.append(row)
        loads.append(os.getloadavg()[0])
    return report.publish(START, END, render(rows, a.keys, a.every, loads), write=not a.no_write)


if __name__ == "__main__":
    sys.exit(main())
