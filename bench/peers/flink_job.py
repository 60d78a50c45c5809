"""The Flink setup's job, run by PyFlink's own venv (see flink.py): the same windowed keyed aggregation
as sparkpoint/examples/windowed_aggregation.py (rate-like source: `rows` rows per event-time second,
key = value % keys, 10 s tumbling windows, 5 s watermark), RocksDB state backend, incremental
checkpoints to s3://. Runs until `--checkpoints` checkpoints completed, then prints its sustained
rows/s and each checkpoint's statistics (from the MiniCluster's REST API) as JSON lines.

`--query churn` runs churn.py's key-churn workload instead (see churn_sql): a fill that loads every key
once, then `rows` keys of a rotating window per trigger period, each rewriting its (count, sum, payload)
row in a SQL GROUP BY's keyed state. It stops once every batch is in and a later checkpoint completed."""

from __future__ import annotations

import argparse
import atexit
import json
import math
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


def fill_offsets(keys: int, rows: int) -> list[int]:
    """Batch 0's rows each fan out to this many keys (churn.ChurnWorkload.fill_fanout)."""
    return list(range(math.ceil(keys / rows)))


def churn_key_sql(keys: int, rows: int) -> tuple[str, str]:
    """(key expression of `v` and `j`, fill condition): value v < rows is a fill row that becomes keys
    v*fanout + j (j over fill_offsets, keys >= `keys` dropped); a later v becomes the one key (v - rows) % keys,
    the rotating window of churn.ChurnWorkload.keys_of_batch. Plain SQL: the unit tests run it in sqlite."""
    fill = f"v < {rows}"
    return f"CASE WHEN {fill} THEN v * {len(fill_offsets(keys, rows))} + j ELSE (v - {rows}) % {keys} END", fill


def payload_sql(column: str, payload_bytes: int) -> str:
    """Hex sha256 digests of the value, payload_bytes // 64 of them (churn.ChurnWorkload.payload_chars)."""
    return " || ".join(f"SHA256(CAST(`{column}` AS STRING) || '#{i}')" for i in range(max(1, payload_bytes // 64)))


def churn_sql(keys: int, rows: int, batches: int, payload_bytes: int, trigger_ms: int) -> list[str]:
    """DDL and the INSERT of the churn query. The legacy datagen source emits `rows-per-second` rows in
    one burst and sleeps to the next second (DataGeneratorSource.run), so each second is one batch of
    sequential values, as Spark's rate-micro-batch gives. A second datagen that never passes its filter
    keeps the job RUNNING after the sequence ends: a finished job would take the MiniCluster's REST API
    (the checkpoint statistics) with it."""
    key, fill = churn_key_sql(keys, rows)
    offsets = ", ".join(map(str, fill_offsets(keys, rows)))
    rate = max(1, round(rows * 1000 / trigger_ms))
    payload = f", MAX({payload_sql('v', payload_bytes)}) AS payload" if payload_bytes else ""
    return [
        f"CREATE TABLE churn_source (v BIGINT) WITH ('connector' = 'datagen', 'rows-per-second' = '{rate}', "
        f"'fields.v.kind' = 'sequence', 'fields.v.start' = '0', 'fields.v.end' = '{rows * batches - 1}')",
        "CREATE TABLE churn_idle (v BIGINT) WITH ('connector' = 'datagen', 'rows-per-second' = '1', "
        "'fields.v.min' = '0', 'fields.v.max' = '9')",
        f"CREATE TABLE churn_sink (k BIGINT, events BIGINT, value_sum BIGINT{', payload STRING' if payload else ''}) "
        "WITH ('connector' = 'blackhole')",  # the payload goes out too, or the planner drops its MAX
        f"""INSERT INTO churn_sink SELECT k, COUNT(*) AS events, SUM(v) AS value_sum{payload} FROM (
            SELECT v, {key} AS k FROM (SELECT v FROM churn_source UNION ALL SELECT v FROM churn_idle WHERE v < 0)
            CROSS JOIN UNNEST(CASE WHEN {fill} THEN ARRAY[{offsets}] ELSE ARRAY[0] END) AS t(j)
        ) WHERE k < {keys} GROUP BY k"""]


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
    p.add_argument("--query", choices=["windowed", "churn"], default="windowed")
    p.add_argument("--trigger-ms", type=int, default=1000, help="churn: one batch of --rows rows per period")
    p.add_argument("--stop-with-savepoint", default="",
                   help="at the end, stop the job with a savepoint into this directory (Flink's rescale path)")
    p.add_argument("--restored-only", action="store_true",
                   help="with --restore-from: end once every task runs and --checkpoints more completed")
    args = p.parse_args(argv)
    churn = args.query == "churn"
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
    if churn:  # no backpressure in steady state: aligned, so checkpointed_size is keyed state, not in-flight data
        conf.update({"execution.checkpointing.unaligned.enabled": "false", "web.checkpoints.history": "1000",
                     "metrics.fetcher.update-interval": "100"})  # record counts fresh enough to place checkpoints
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

    from pyflink.common import Configuration
    from pyflink.datastream import StreamExecutionEnvironment
    from pyflink.table import StreamTableEnvironment

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
    if churn:
        started = time.monotonic()
        for stmt in churn_sql(args.keys, args.rows, args.batches, args.payload_bytes, args.trigger_ms):
            result = t_env.execute_sql(stmt)
    else:
        started, result = _windowed(env, t_env, args)
    job_id = str(result.get_job_client().get_job_id())
    print(json.dumps({"event": "started", "job": job_id, "seconds": round(time.monotonic() - started, 2)}), flush=True)
    deadline = time.monotonic() + args.timeout
    running_since = tasks_running = None
    # churn: every key row the aggregation is to read (fill: each key once; then `rows` per batch).
    expected, all_in_at = args.keys + args.rows * (args.batches - 1), None
    while time.monotonic() < deadline:
        time.sleep(0.2 if churn else 1)
        try:
            job = rest(port, f"/jobs/{job_id}")
            cps = rest(port, f"/jobs/{job_id}/checkpoints")
        except OSError:
            continue
        counts = cps["counts"]
        if job["state"] == "RUNNING" and running_since is None:
            running_since = time.monotonic()
            print(json.dumps({"event": "running", "seconds": round(running_since - started, 2)}), flush=True)
        if churn:  # key rows into the aggregation: the harness places each checkpoint's trigger among them
            agg = next((v for v in job["vertices"] if "GroupAggregate" in v["name"]), job["vertices"][-1])
            records = agg["metrics"].get("read-records", 0)
        else:
            records = job["vertices"][0]["metrics"].get("write-records", 0)
        # One line a second (churn: five): what a recovery measurement (and a human watching) needs.
        print(json.dumps({"event": "progress", "ts": round(time.time(), 3), "state": job["state"],
                          "records": records, "completed": counts.get("completed", 0),
                          "restored": counts.get("restored", 0), "failed": counts.get("failed", 0)}), flush=True)
        if tasks_running is None and job["state"] == "RUNNING" and all(
                v.get("status") == "RUNNING" for v in job["vertices"]):  # state restored (INITIALIZING is over)
            tasks_running = time.monotonic()
            print(json.dumps({"event": "tasks_running", "seconds": round(tasks_running - started, 2),
                              "ts": round(time.time(), 3)}), flush=True)
        if args.restored_only:
            if tasks_running is not None and counts.get("completed", 0) >= args.checkpoints:
                break
        elif churn:
            if all_in_at is None and records >= expected:
                all_in_at = time.time()
            latest = ((cps.get("latest") or {}).get("completed") or {}).get("trigger_timestamp", 0) / 1000
            if all_in_at is not None and latest > all_in_at and counts.get("completed", 0) >= args.checkpoints:
                break  # the last batch's changes are in a completed checkpoint
        elif counts.get("completed", 0) >= args.checkpoints:
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
                          "triggerMs": cp.get("trigger_timestamp"),
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
    if args.stop_with_savepoint:
        print(json.dumps({"event": "savepoint", **stop_with_savepoint(port, job_id, args.stop_with_savepoint)}),
              flush=True)
    else:
        result.get_job_client().cancel()
    return 0


def stop_with_savepoint(port: int, job_id: str, target: str, timeout: float = 3600) -> dict:
    """POST /jobs/<id>/stop (no drain: the state stays for the restore), then follow the trigger to
    its end. The savepoint's path and how long the stop took."""
    t0 = time.monotonic()
    body = json.dumps({"targetDirectory": target, "drain": False}).encode()
    req = urllib.request.Request(f"http://127.0.0.1:{port}/jobs/{job_id}/stop", data=body, method="POST",
                                 headers={"Content-Type": "application/json"})
    with urllib.request.urlopen(req, timeout=30) as resp:
        trigger = json.loads(resp.read())["request-id"]
    while time.monotonic() - t0 < timeout:
        status = rest(port, f"/jobs/{job_id}/savepoints/{trigger}")
        if status["status"]["id"] == "COMPLETED":
            op = status.get("operation") or {}
            if "failure-cause" in op:
                raise RuntimeError(f"stop-with-savepoint failed: {str(op['failure-cause'])[:500]}")
            return {"path": op["location"], "seconds": round(time.monotonic() - t0, 2)}
        time.sleep(0.2)
    raise RuntimeError(f"stop-with-savepoint not done after {timeout:g}s")


def _windowed(env, t_env, args: argparse.Namespace):  # type: ignore[no-untyped-def]
    from pyflink.common import WatermarkStrategy
    from pyflink.datastream.connectors.number_seq import NumberSequenceSource
    from pyflink.table import DataTypes, Schema

    payload = ""
    if args.payload_bytes:
        payload = f", MAX({payload_sql('value', args.payload_bytes)}) AS payload"
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
    return started, result


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
