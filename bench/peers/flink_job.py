"""The Flink setup's job, run by PyFlink's own venv (see flink.py): the same windowed keyed aggregation
as sparkpoint/examples/windowed_aggregation.py (rate-like source: `rows` rows per event-time second,
key = value % keys, 10 s tumbling windows, 5 s watermark), RocksDB state backend, incremental
checkpoints to s3://. Runs until `--checkpoints` checkpoints completed, then prints its sustained
rows/s and each checkpoint's statistics (from the MiniCluster's REST API) as JSON lines."""

from __future__ import annotations

import argparse
import atexit
import json
import os
import shutil
import socket
import sys
import tempfile
import time
import urllib.request

# The source is NumberSequenceSource (lazy splits), not SQL datagen's `sequence`: that one materialises
# every value of its range in a deque when the task starts (SequenceGenerator.open), and fails outright
# past 2^31 - 1 values per subtask, so the job restarted forever and never checkpointed (seen here).
SEQUENCE_END = 10**15


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def rest(port: int, path: str) -> dict:
    with urllib.request.urlopen(f"http://127.0.0.1:{port}{path}", timeout=10) as resp:
        return json.loads(resp.read())


def main(argv: list[str]) -> int:
    p = argparse.ArgumentParser()
    p.add_argument("--checkpoint", required=True)
    p.add_argument("--endpoint", required=True)
    p.add_argument("--rows", type=int, required=True)
    p.add_argument("--keys", type=int, required=True)
    p.add_argument("--batches", type=int, required=True)
    p.add_argument("--payload-bytes", type=int, default=0)
    p.add_argument("--interval", default="10s")
    p.add_argument("--checkpoints", type=int, default=3)
    p.add_argument("--timeout", type=float, default=900)
    p.add_argument("--parallelism", type=int, default=1, help="1: one task slot, least JVM work on 2 cores")
    p.add_argument("--restore-from", default="", help="a retained checkpoint (.../chk-N) to start from")
    args = p.parse_args(argv)
    port = free_port()
    conf = {
        "state.backend.type": "rocksdb", "execution.checkpointing.incremental": "true",
        "execution.checkpointing.interval": args.interval, "execution.checkpointing.dir": args.checkpoint,
        "s3.endpoint": args.endpoint, "s3.path.style.access": "true",
        "s3.access-key": os.environ["AWS_ACCESS_KEY_ID"], "s3.secret-key": os.environ["AWS_SECRET_ACCESS_KEY"],
        "rest.port": str(port), "rest.address": "127.0.0.1", "parallelism.default": str(args.parallelism),
        "taskmanager.memory.process.size": "1g", "taskmanager.numberOfTaskSlots": str(args.parallelism),
        # Under backpressure aligned barriers can wait minutes: let them overtake the buffered records.
        "execution.checkpointing.unaligned.enabled": "true",
        "execution.checkpointing.timeout": f"{int(args.timeout)}s",
        "execution.checkpointing.min-pause": "0s",
        "execution.checkpointing.externalized-checkpoint-retention": "RETAIN_ON_CANCELLATION",
        **({"execution.state-recovery.path": args.restore_from} if args.restore_from else {}),
    }
    # The S3 filesystem reads its options when the cluster starts: give them in the conf dir too.
    conf_dir = tempfile.mkdtemp(prefix="flink-conf-")
    atexit.register(shutil.rmtree, conf_dir, True)
    with open(os.path.join(conf_dir, "config.yaml"), "w") as f:
        f.writelines(f"{k}: {json.dumps(v)}\n" for k, v in conf.items())
    os.environ["FLINK_CONF_DIR"] = conf_dir
    # The DataStream source goes through PyFlink's PythonConfigUtil, which reflects into java.util
    # (refused by Java 17+ unless opened); JVM_ARGS reaches the gateway JVM that hosts the MiniCluster.
    os.environ["JVM_ARGS"] = " ".join([os.environ.get("JVM_ARGS", ""), "--add-opens=java.base/java.util=ALL-UNNAMED",
                                       "--add-opens=java.base/java.lang=ALL-UNNAMED"]).strip()

    from pyflink.common import Configuration, WatermarkStrategy
    from pyflink.datastream import StreamExecutionEnvironment
    from pyflink.datastream.connectors.number_seq import NumberSequenceSource
    from pyflink.table import DataTypes, Schema, StreamTableEnvironment

    c = Configuration()
    for k, v in conf.items():
        c.set_string(k, v)
    env = StreamExecutionEnvironment.get_execution_environment(c)
    t_env = StreamTableEnvironment.create(env)
    # The local MiniCluster runs inside the gateway's JVM and loads no plugins: register the S3
    # filesystem (its jar is on the classpath, see scripts/ensure-flink.sh) with our options ourselves.
    from pyflink.java_gateway import get_gateway

    jvm = get_gateway().jvm
    jconf = jvm.org.apache.flink.configuration.Configuration()
    for k, v in conf.items():
        jconf.setString(k, v)
    jvm.org.apache.flink.core.fs.FileSystem.initialize(jconf, None)
    payload = ""
    if args.payload_bytes:
        parts = " || ".join(f"SHA256(CAST(`value` AS STRING) || '#{i}')" for i in range(max(1, args.payload_bytes // 64)))
        payload = f", MAX({parts}) AS payload"
    numbers = env.from_source(NumberSequenceSource(0, SEQUENCE_END), WatermarkStrategy.no_watermarks(), "events")
    t_env.create_temporary_view("events", t_env.from_data_stream(numbers, Schema.new_builder()
        .column("f0", DataTypes.BIGINT())
        .column_by_expression("value", "f0")
        .column_by_expression("ts", f"TO_TIMESTAMP_LTZ((f0 / {args.rows}) * 1000, 3)")
        .watermark("ts", "ts - INTERVAL '5' SECOND").build()))
    t_env.execute_sql(f"CREATE TABLE sink (w TIMESTAMP(3), k BIGINT, events BIGINT, value_sum BIGINT"
                      f"{', payload STRING' if payload else ''}) WITH ('connector' = 'blackhole')")
    started = time.monotonic()
    result = t_env.execute_sql(f"""
        INSERT INTO sink SELECT window_start, `value` % {args.keys}, COUNT(*), SUM(`value`){payload}
        FROM TABLE(TUMBLE(TABLE events, DESCRIPTOR(ts), INTERVAL '10' SECOND))
        GROUP BY window_start, window_end, `value` % {args.keys}""")
    job_id = str(result.get_job_client().get_job_id())
    print(json.dumps({"event": "started", "job": job_id, "seconds": round(time.monotonic() - started, 2)}), flush=True)
    deadline = time.monotonic() + args.timeout
    running_since = None
    while time.monotonic() < deadline:
        time.sleep(1)
        try:
            job = rest(port, f"/jobs/{job_id}")
            counts = rest(port, f"/jobs/{job_id}/checkpoints")["counts"]
        except OSError:
            continue
        if job["state"] == "RUNNING" and running_since is None:
            running_since = time.monotonic()
            print(json.dumps({"event": "running", "seconds": round(running_since - started, 2)}), flush=True)
        # One line a second: what a recovery measurement (and a human watching) needs.
        print(json.dumps({"event": "progress", "ts": round(time.time(), 3), "state": job["state"],
                          "records": job["vertices"][0]["metrics"].get("write-records", 0),
                          "completed": counts.get("completed", 0), "restored": counts.get("restored", 0),
                          "failed": counts.get("failed", 0)}), flush=True)
        if counts.get("completed", 0) >= args.checkpoints:
            break
    job = rest(port, f"/jobs/{job_id}")
    elapsed = time.monotonic() - (running_since or started)
    source = job["vertices"][0]
    rows = source["metrics"].get("write-records", 0)
    history = rest(port, f"/jobs/{job_id}/checkpoints")["history"]
    for cp in sorted(history, key=lambda h: h["id"]):
        if cp["status"] != "COMPLETED":
            continue
        sync, asyn = _phase(port, job_id, cp["id"], "sync"), _phase(port, job_id, cp["id"], "async")
        print(json.dumps({"event": "checkpoint", "id": cp["id"], "durationMs": cp["end_to_end_duration"],
                          "checkpointedSize": cp.get("checkpointed_size", cp.get("state_size", 0)),
                          "fullSize": cp.get("state_size", 0), "syncMs": sync, "asyncMs": asyn}), flush=True)
    for cp in sorted(history, key=lambda h: h["id"]):
        if cp["status"] == "FAILED":  # why (a failed checkpoint restarts the job: no tolerance set)
            print(json.dumps({"event": "checkpoint_failed", "id": cp["id"],
                              "reason": str(cp.get("failure_message") or "")[:500]}), flush=True)
    try:
        for exc in (rest(port, f"/jobs/{job_id}/exceptions").get("exceptionHistory") or {}).get("entries", [])[:5]:
            print(json.dumps({"event": "job_exception", "name": exc.get("exceptionName"),
                              "stack": str(exc.get("stacktrace") or "")[:800]}), flush=True)
    except OSError:
        pass
    print(json.dumps({"event": "finished", "rows": rows, "state": job["state"], "seconds": round(elapsed, 2),
                      "rows_per_s": rows / elapsed if elapsed > 0 else 0,
                      "completed": len([h for h in history if h["status"] == "COMPLETED"])}), flush=True)
    result.get_job_client().cancel()
    return 0


def _phase(port: int, job_id: str, cp_id: int, which: str) -> float:
    """Longest per-subtask sync or async phase (ms) of one checkpoint, over the job's vertices."""
    worst = 0.0
    for vertex in rest(port, f"/jobs/{job_id}")["vertices"]:
        try:
            sub = rest(port, f"/jobs/{job_id}/checkpoints/details/{cp_id}/subtasks/{vertex['id']}")
        except OSError:
            continue
        for s in sub.get("subtasks", []):
            worst = max(worst, float((s.get("checkpoint") or {}).get(which, 0) or 0))
    return worst


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
