"""Output bytes of an upsert sink with a constant key set, with and without snapshots + output GC.

Every batch updates every one of --keys keys (Parquet through the sink's own code; the part files
are written by pyarrow in place of Spark's executors); a checkpoint every --every batches, retention 3,
and after each checkpoint (with snapshots) a snapshot and an output GC pass with a zero grace. Prints
the bytes under upserts/ after --batches batches. Directory store (the byte counts are the store's).

    python bench/upsert_snapshot_bench.py --keys 1000 --batches 200
"""

from __future__ import annotations

import argparse
import os
import tempfile
import time
from pathlib import Path

from sparkpoint.runtime.checkpoint import gc_pass, write_fence
from sparkpoint.runtime.sink.compaction import CompactionSettings
from sparkpoint.runtime.sink.output_gc import output_gc_pass
from sparkpoint.runtime.sink.upsert import UpsertSink, read_upserted
from sparkpoint.runtime.store import JobRef, Manifest, open_store
from sparkpoint.runtime.store.layout import checkpoint_key
from sparkpoint.runtime.store.manifest import Totals, utcnow


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


def main() -> None:
    p = argparse.ArgumentParser()
    p.add_argument("--keys", type=int, default=1000)
    p.add_argument("--batches", type=int, default=200)
    p.add_argument("--every", type=int, default=10, help="batches per checkpoint")
    a = p.parse_args()
    print(f"keys {a.keys}, batches {a.batches}, a checkpoint every {a.every}, retain 3; "
          f"load average {os.getloadavg()[0]:.1f}")
    for snapshots in (False, True):
        with tempfile.TemporaryDirectory() as tmp:
            size, count, spent = run(Path(tmp), keys=a.keys, batches=a.batches, every=a.every, snapshots=snapshots)
        print(f"{'with' if snapshots else 'without'} snapshots: {size / 2**20:.2f} MiB in {count} objects"
              + (f" (snapshots + GC passes: {spent:.1f} s in all)" if snapshots else ""))


if __name__ == "__main__":
    main()
