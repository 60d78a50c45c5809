"""Restore on N executors (issue 42; docs/design.md §4, "Restores on N executors"): how long a
restore takes and how many bytes each executor fetches, with one and with two executor JVMs
(local-cluster, each with its own local root and agent), from one checkpoint in a throwaway MinIO.

The state: the windowed aggregation with many keys and a payload per key (RocksDB, format 2),
checkpointed by the single-process path. Each run restores the driver's share, then starts the query on
`sparkpoint://`; the executors fetch their partitions through their agents when they open them. Printed
per run: the driver's share (files, bytes, seconds), each executor's fetched partitions, bytes and the
sum of its materialize seconds, and the seconds from the query's start to its first batch. Links are
not capped here: on one machine the executors share the CPU and MinIO, so this shows the bytes split
and the per-executor fetch time, not a network-bound speed-up.

    .venv/bin/python bench/executor_restore_bench.py [--keys 20000] [--payload 512] [--partitions 8]
"""

from __future__ import annotations

import argparse
import json
import secrets
import shutil
import sys
import tempfile
import threading
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from harness.minio_server import MinioServer  # noqa: E402
from harness.state_query import run_query, state_fs_jar  # noqa: E402
from sparkpoint.runtime.checkpoint import CheckpointWriter  # noqa: E402
from sparkpoint.runtime.checkpoint.freeze import freeze, latest_committed_batch  # noqa: E402
from sparkpoint.runtime.executor_state.agent import Agent, serve  # noqa: E402
from sparkpoint.runtime.executor_state.client import AgentClient  # noqa: E402
from sparkpoint.runtime.executor_state.restore import restore_for_executors, spark_conf  # noqa: E402
from sparkpoint.runtime.store import JobRef  # noqa: E402

JOB = JobRef("default", "exec-restore-bench")


def one_run(store, manifest, executors: int, base: Path, jar: str, batch: int | None) -> dict:  # type: ignore[no-untyped-def]
    names = [str(i) for i in range(executors)]
    token = secrets.token_hex(16)
    base.mkdir(parents=True)
    (base / "token").write_text(token)
    servers, clients = [], {}
    for name in names:
        srv = serve(Agent(base / "roots" / name / "hot", base / "work" / name, store, JOB, executor=name, token=token),
                    "127.0.0.1", 0)
        threading.Thread(target=srv.serve_forever, daemon=True).start()
        servers.append(srv)
        (base / "agents" / name).mkdir(parents=True)
        (base / "agents" / name / "port").write_text(str(srv.server_address[1]))
        clients[name] = AgentClient(f"http://127.0.0.1:{srv.server_address[1]}", token)
    try:
        share = restore_for_executors(store, JOB, base / "roots" / "driver" / "hot", list(clients.values()),
                                      checkpoint_id=manifest.id)
        conf = spark_conf(jar) | {"spark.hadoop.fs.sparkpoint.root": f"{base}/roots/{{executor}}",
                                  "spark.executorEnv.SPARKPOINT_AGENT_PORT_FILE": f"{base}/agents/{{executor}}/port",
                                  "spark.executorEnv.SPARKPOINT_AGENT_TOKEN_FILE": f"{base}/token",
                                  "spark.executor.memory": "768m"}
        started = time.monotonic()
        code, err = run_query({"checkpoint": "sparkpoint:///hot", "out": str(base / "out"), "until": (batch or 0) + 1,
                               "master": f"local-cluster[{executors},1,1024]", "local_dir": str(base / "spark-tmp"),
                               "conf": conf, **ARGS})
        if code:
            raise SystemExit(f"the restored query failed: {err[-3000:]}")
        done = {name: c.materialized() for name, c in clients.items()}
    finally:
        for srv in servers:
            srv.shutdown()
            srv.server_close()
    return {"executors": executors, "driver_share": {"files": share.files, "bytes": share.bytes,
                                                     "seconds": share.seconds},
            "first_batch_seconds": float((base / "out" / "first-batch-seconds.txt").read_text()),
            "run_seconds": round(time.monotonic() - started, 1),
            "per_executor": {name: {"partitions": len(d["partitions"]), "fetched_bytes": d["fetched_bytes"],
                                    "fetch_seconds": round(sum(p["seconds"] for p in d["partitions"]), 3)}
                             for name, d in done.items()}}


ARGS: dict = {}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--keys", type=int, default=20000)
    parser.add_argument("--payload", type=int, default=512, help="bytes of payload per key")
    parser.add_argument("--partitions", type=int, default=8)
    parser.add_argument("--runs", default="1,2", help="executor counts, comma-separated")
    opts = parser.parse_args()
    ARGS.update(keys=opts.keys, rows=opts.keys, payload_bytes=opts.payload, partitions=opts.partitions, timeout=1500)
    base = Path(tempfile.mkdtemp(prefix="exec-restore-bench-"))
    jar = state_fs_jar()
    try:
        with MinioServer() as minio:
            minio.make_bucket("bench")
            store = minio.open("bench", "exec-restore")
            code, err = run_query({"checkpoint": str(base / "hot"), "out": str(base / "first"), "until": 5,
                                   "local_dir": str(base / "spark-tmp"), **ARGS}, timeout=1800)
            if code:
                raise SystemExit(f"the first query failed: {err[-3000:]}")
            batch = latest_committed_batch(base / "hot")
            freeze(base / "hot", base / "frozen")
            manifest = CheckpointWriter(store, JOB, attempt=0, job_uid="bench", reuse_window_seconds=0).take_checkpoint(
                base / "frozen", batch_id=batch).manifest
            state = sum(e.size for e in manifest.files if "/state/" in f"/{e.path}")
            print(json.dumps({"checkpoint": manifest.id, "batch": batch, "files": len(manifest.files),
                              "bytes": manifest.totals.bytes, "state_bytes": state, **ARGS}))
            for n in (int(x) for x in opts.runs.split(",")):
                print(json.dumps(one_run(store, manifest, n, base / f"run-{n}", jar, batch)), flush=True)
    finally:
        shutil.rmtree(base, ignore_errors=True)


if __name__ == "__main__":
    main()
