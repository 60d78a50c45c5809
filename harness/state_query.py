"""A stateful query in a Spark JVM of its own, for the tests and the bench of the restore on N
executors (docs/design.md §4, "Restores on N executors"): the windowed aggregation over the
deterministic source (RocksDB, changelog checkpointing, state checkpoint format 2) on a checkpoint
location, until a committed batch, writing each batch's rows to `<out>/batch-<b>.json`. A JVM per run:
the lazy file system's jar must be on the class path when the JVM starts, and local-cluster needs its
own SparkContext. Exit 0 when the batch was reached, 2 with `<out>/error.txt` when the query failed.

    python -m harness.state_query '{"checkpoint": ..., "out": ..., "until": 8, "master": "local[2]",
                                    "partitions": 4, "local_dir": ..., "conf": {...}}'
"""

from __future__ import annotations

import contextlib
import json
import sys
import time
from pathlib import Path
from typing import Any


def main(args: dict[str, Any]) -> int:
    from pyspark.sql import SparkSession

    from sparkpoint.examples.windowed_aggregation import build

    out = Path(args["out"])
    out.mkdir(parents=True, exist_ok=True)
    conf = {
        "spark.ui.enabled": "false", "spark.ui.showConsoleProgress": "false",
        "spark.sql.shuffle.partitions": str(args.get("partitions", 4)),
        "spark.sql.streaming.stateStore.providerClass":
            "org.apache.spark.sql.execution.streaming.state.RocksDBStateStoreProvider",
        "spark.sql.streaming.stateStore.rocksdb.changelogCheckpointing.enabled": "true",
        "spark.sql.streaming.stateStore.checkpointFormatVersion": "2",
        "spark.sql.streaming.stateStore.minDeltasForSnapshot": "3",  # zips and SSTs soon
        "spark.sql.adaptive.enabled": "false",
        "spark.local.dir": args["local_dir"],
        "spark.driver.extraJavaOptions": f"-Djava.io.tmpdir={args['local_dir']}",
        "spark.executor.extraJavaOptions": f"-Djava.io.tmpdir={args['local_dir']}",
        **args.get("conf", {}),
    }
    builder = SparkSession.builder.master(args.get("master", "local[2]")).appName("state-query")
    for key, value in conf.items():
        builder = builder.config(key, value)
    spark = builder.getOrCreate()
    spark.sparkContext.setLogLevel("WARN")
    until = int(args["until"])
    seen: set[int] = set()

    def sink(df, batch: int) -> None:  # type: ignore[no-untyped-def]
        if not seen:  # the first batch's state was loaded: a restore's end, as the query sees it
            (out / "first-batch-seconds.txt").write_text(f"{time.monotonic() - started:.3f}")
        rows = sorted(json.dumps(r.asDict(recursive=True), default=str, sort_keys=True) for r in df.collect())
        (out / f"batch-{batch}.json").write_text(json.dumps(rows))
        seen.add(batch)

    df = build(spark, rows_per_batch=int(args.get("rows", 500)), keys=int(args.get("keys", 50)),
               window="3 seconds", watermark="1 seconds", payload_bytes=int(args.get("payload_bytes", 0)))
    started = time.monotonic()
    query = (df.writeStream.outputMode("append").option("checkpointLocation", args["checkpoint"])
             .foreachBatch(sink).trigger(processingTime="200 milliseconds").start())
    code = 0
    try:
        while max(seen, default=-1) < until:
            if not query.isActive:
                raise RuntimeError(str(query.exception()))
            if time.monotonic() - started > float(args.get("timeout", 600)):
                raise RuntimeError(f"batch {until} not reached in {args.get('timeout', 600)} s")
            time.sleep(0.1)
    except Exception as exc:  # noqa: BLE001 (the test reads the reason)
        (out / "error.txt").write_text(str(exc))
        code = 2
    finally:
        with contextlib.suppress(Exception):  # a failed query may refuse to stop
            query.stop()
        # The stores' maintenance outlives the query: stop it, so the location is quiet when copied.
        spark._jvm.org.apache.spark.sql.execution.streaming.state.StateStore.stop()  # type: ignore[union-attr]
        (out / "first-batch.txt").write_text(str(min(seen, default=-1)))
        spark.stop()
    return code


if __name__ == "__main__":
    sys.exit(main(json.loads(sys.argv[1])))


def state_fs_jar() -> str:
    """The lazy state file system's jar, built against this venv's pyspark into the cache (jvm/build.sh:
    only changed sources or a fresh machine pay the compile)."""
    import subprocess

    repo = Path(__file__).resolve().parents[1]
    out = subprocess.run([str(repo / "jvm" / "build.sh")], env={**__import__("os").environ, "PYTHON": sys.executable},
                         check=True, capture_output=True, text=True)
    return out.stdout.strip().splitlines()[-1]


def run_query(args: dict[str, Any], env: dict[str, str] | None = None, timeout: float = 900) -> tuple[int, str]:
    """Run `main` in a child process; its exit code and the end of its stderr."""
    import os
    import subprocess

    repo = Path(__file__).resolve().parents[1]
    import pyspark

    home = Path(pyspark.__file__).parent
    if str(args.get("master", "")).startswith("local-cluster"):
        # local-cluster's workers keep their work/ under SPARK_HOME: a home of links in the run's own dir
        # (bin/ launches, jars/ is the executors' class path) keeps it out of the venv.
        linked = Path(args["local_dir"]) / "spark-home"
        linked.mkdir(parents=True, exist_ok=True)
        for name in ("bin", "jars"):
            if not (linked / name).exists():
                (linked / name).symlink_to(home / name)
        home = linked
    child_env = {**os.environ, "SPARK_HOME": str(home), **(env or {})}
    done = subprocess.run([sys.executable, "-m", "harness.state_query", json.dumps(args)], cwd=repo, env=child_env,
                          capture_output=True, text=True, timeout=timeout)
    return done.returncode, done.stderr[-20000:]


def outputs(out: str | Path) -> dict[int, list[str]]:
    """The rows of each batch a run wrote."""
    return {int(p.stem.split("-")[1]): json.loads(p.read_text()) for p in Path(out).glob("batch-*.json")}
