"""`make bench`: run every benchmark in turn; each one rewrites its own section of docs/benchmarks.md.

    python bench/run_all.py            # full runs (tens of minutes on 2 cores)
    python bench/run_all.py --small    # quick passes, same code paths
    python bench/run_all.py --only peer_bench.py --small   # one of them
Benchmarks run one after the other, never side by side, so they do not share the two cores.
"""

from __future__ import annotations

import subprocess
import sys
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
# operator_bench.py brings the local cluster up itself (and down again if it started it).
# peer_bench.py: Sparkpoint vs vanilla Spark on s3a, Flink and the floor (fetches its peers on first use),
# then recovery after a kill, key churn and bucket bytes with GC (--small: tiny state, 1.5 min of GC;
# 1 GB / 4 GB churn only by hand: python bench/peer_bench.py --full --sizes 100m,1g,4g).
# ui_bench.py: the live UI's and event logs' batch-duration cost, on vs off side by side (issue 30).
# kafka_bench.py: Kafka -> Delta beside vanilla Spark's Kafka -> Parquet file sink (a local broker, 20 ms store).
# rescale_bench.py: Spark's repartition at 4 -> 2 -> 6 partitions beside Flink's stop-with-savepoint + restore
# at a new parallelism (~100 MiB of state; ~1 GiB too: make bench-rescale).
# upsert_snapshot_bench.py: an upsert sink's output bytes with and without snapshots + output GC (no Spark).
# age_bench.py: GC pass, `output read`, a start's sink resume, claim and restore, and a delta sink's compaction on
# stores of every sink kind aged 1 day, 1 week and 1 month of 10 s checkpoints (no Spark; --small: without the month).
# cold_start_bench.py: where a runtime start's seconds go, process start to first new batch (issue 43; local MinIO).
# standby_bench.py: kill -> first new batch, a cold start beside a promoted standby, and the standby's cost (issue 43).
# executor_bench.py: one stateful job at local[2] vs 1 and 2 executors at the same two task slots on the local
# cluster (brought up if down, as operator_bench.py does; skipped with a message when no cluster can be had).
# recovery_bench.py: a pod deleted, its runtime killed, its processes frozen -> the first new batch, through the
# operator on the local cluster's real node, cold and with a standby, Flink's restart beside (issue 43).
BENCHES = ["store_bench.py", "runtime_bench.py", "peer_bench.py", "operator_bench.py", "rescale_bench.py",
           "gc_memory_bench.py", "age_bench.py", "upsert_snapshot_bench.py", "kafka_bench.py",
           "ui_bench.py", "cold_start_bench.py", "standby_bench.py", "executor_bench.py", "recovery_bench.py"]
EXTRA = {"rescale_bench.py": ["--flink"], "recovery_bench.py": ["--flink"]}


def main(argv: list[str]) -> int:
    small = "--small" in argv
    only = argv[argv.index("--only") + 1].split(",") if "--only" in argv else BENCHES
    failed = []
    for name in [b for b in BENCHES if b in only]:
        started = time.monotonic()
        print(f"== {name}{' (small)' if small else ''}", flush=True)
        code = subprocess.call([sys.executable, str(HERE / name), *(["--small"] if small else []), *EXTRA.get(name, [])])
        print(f"== {name}: exit {code} after {time.monotonic() - started:.0f}s", flush=True)
        if code:
            failed.append(name)
    if failed:
        print(f"failed: {', '.join(failed)}", file=sys.stderr)
        return 1
    print("results: docs/benchmarks.md")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
