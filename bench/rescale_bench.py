"""Rescale benchmark: what changing spark.shufflePartitions of a stateful job costs (issue 26).

A windowed aggregation with an incompressible payload per key grows its state at 4 partitions
(`sparkpoint run`, store = a local MinIO) and drains with a final checkpoint. Then, each on a new
pod (empty work dir: a remote restore, as after an upgrade), it starts again with 2 partitions,
then 6, then 6 once more (no rescale: the baseline). Per start: the remote restore, Spark's
repartition, the checkpoint taken at once, and the time from the process start to the first batch
with input after the restore (JVM start included).

    python bench/rescale_bench.py                          # ~100 MiB checkpoint, updates docs/benchmarks.md
    python bench/rescale_bench.py --keys 60000,1000000     # ~100 MiB, then ~1 GiB of state rows (make bench-rescale)
    python bench/rescale_bench.py --flink                  # and Flink's stop-with-savepoint + restore at 4 -> 2 -> 6
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile
import time
import uuid
from pathlib import Path
from typing import Any

import report  # bench/report.py; bench/ is on sys.path when this runs as a script
import yaml

from harness.minio_server import MinioServer
from harness.runtime_job import RuntimeProcess, WindowedJob, committed

REPO = Path(__file__).resolve().parents[1]
START, END = "<!-- rescale-bench:start -->", "<!-- rescale-bench:end -->"
BUCKET = "bench"
MIB = 1024 * 1024
PAYLOAD = 1024


def write_job(job: WindowedJob, path: Path, store: str, partitions: int) -> Path:
    doc = job.spec(store)
    doc["spec"]["spark"]["shufflePartitions"] = partitions
    doc["spec"]["spark"]["master"] = "local[2]"
    path.write_text(yaml.safe_dump(doc, sort_keys=False))
    return path


def start(job: WindowedJob, base: Path, store: str, env: dict[str, str], tag: str, partitions: int,
          until: int) -> dict[str, Any]:
    """One start on a new pod; drains once `until` has committed. What the log says it cost."""
    log, pod = base / f"{tag}.log", base / f"{tag}-pod"
    began = time.time()
    p = RuntimeProcess(write_job(job, base / f"{tag}.yaml", store, partitions), pod, log, until_batch=until,
                       env=env).start()
    code = p.wait(7200)
    if code != 0:
        raise RuntimeError(f"{tag} exited {code}; see {log}")
    running = (report.log_events(log, "query running") or [{}])[0]
    rescaled = (report.log_events(log, "state rescaled") or [None])[0]
    restored_batch = running.get("batch") or -1
    first_input = min((e["ts"] for e in report.log_events(log, "batch completed")
                       if e["batchId"] > restored_batch and e.get("inputRows", 0) > 0), default=None)
    cps = [e["request"] for e in report.log_events(log, "checkpoint request finished") if e["request"]["status"] == "completed"]
    at_once = [c for c in cps if c["trigger"] == "rescale"]
    return {"tag": tag, "partitions": partitions, "restore_seconds": running.get("restore_seconds"),
            "restored_batch": restored_batch, "rescale": rescaled and {k: rescaled[k] for k in ("from", "to", "seconds")},
            "rescale_checkpoint": at_once[0] if at_once else None,
            "first_input_batch_seconds": round(first_input - began, 1) if first_input else None,
            "last_checkpoint_bytes": cps[-1]["bytes"] if cps else None, "committed": committed(pod)}


def run(keys: int, flink: bool, base: Path, env: dict[str, str]) -> dict[str, Any]:
    """One size: Spark's starts at 4 -> 2 -> 6 -> 6 partitions, then (flink) Flink's 4 -> 2 -> 6."""
    rows = min(keys, 20000)
    grow = max(1, keys // rows)
    job = WindowedJob(name="rescale", rows_per_batch=rows, keys=keys, total_batches=100000, window_seconds=86400,
                      watermark_seconds=60, trigger="100ms", checkpoint_interval="30s",
                      extra_args={"payload_bytes": PAYLOAD})
    store = f"s3://{BUCKET}/rescale-{uuid.uuid4().hex[:8]}"
    base = base / f"keys-{keys}"
    base.mkdir(parents=True)
    print(f"growing the state: {keys} keys at 4 partitions", flush=True)
    runs = [start(job, base, store, env, "p4", 4, grow + 2)]
    for tag, partitions in (("p2", 2), ("p6", 6), ("p6-again", 6)):
        print(f"start with {partitions} partitions ({tag})", flush=True)
        runs.append(start(job, base, store, env, tag, partitions, runs[-1]["committed"] + 3))
        print(json.dumps(runs[-1]), flush=True)
    result: dict[str, Any] = {"keys": keys, "rows_per_batch": rows, "runs": runs, "load": [os.getloadavg()[0]]}
    if flink:  # the same keys and payload, the same MinIO, right after: side by side in one run
        from peers import flink as flink_peer
        from peers import flink_rescale

        why = flink_peer.unavailable()
        if why:
            result["flink_skipped"] = why
        else:
            print("Flink: grow at parallelism 4, stop with a savepoint, restore at 2, then 6", flush=True)
            result["flink"] = flink_rescale.run(base, env, env["SPARKPOINT_S3_ENDPOINT"], BUCKET, keys, PAYLOAD)
    result["load"].append(os.getloadavg()[0])
    return result


def state_mib(keys: int) -> float:
    return keys * (PAYLOAD + 64) / MIB


def render(results: list[dict[str, Any]]) -> str:
    lines = [START, "## Rescaling state (`bench/rescale_bench.py`)", "",
             f"Measured {time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime())} at commit `{report.commit()}` on "
             f"{os.cpu_count()} cores{report.pinned()}; MinIO on localhost; Spark local[2], RocksDB with changelog "
             f"checkpointing, pyspark {_pyspark()}; state of N keys x {PAYLOAD} B payload, grown at 4 partitions; "
             "each start is a new pod (remote restore of the previous start's final checkpoint), as after an "
             "upgrade. Sizes ran one after the other, Spark then Flink for each.", ""]
    if len(results) > 1 or any(r.get("flink") for r in results):
        lines += summary(results)
    for r in results:
        lines += ["", f"### {r['keys']} keys (~{state_mib(r['keys']):.0f} MiB of state rows)", "",
                  "| start | restored checkpoint (MiB) | restore | repartition (Spark) | checkpoint at once (MiB, s) "
                  "| process start -> first batch with input |", "| --- | --- | --- | --- | --- | --- |"]
        prev = None
        for run_ in r["runs"]:
            if prev is not None:
                rs, ck = run_["rescale"], run_["rescale_checkpoint"]
                repartition = f"{rs['seconds']:.2f} s" if rs else "none (same count)"
                at_once = f"{ck['bytes'] / MIB:.0f}, {ck['syncSeconds'] + ck['asyncSeconds']:.2f}" if ck else "-"
                lines.append(
                    f"| {prev['partitions']} -> {run_['partitions']} partitions | "
                    f"{(prev['last_checkpoint_bytes'] or 0) / MIB:.0f} | {run_['restore_seconds']:.2f} s | "
                    f"{repartition} | {at_once} | {run_['first_input_batch_seconds']} s |")
            prev = run_
        lines += render_flink(r)
    lines += ["", "A rescale adds Spark's repartition (it reads every state row of the restored version and writes "
              "them into the new partitions as batch N+1) and one checkpoint of the rewritten state, which shares no "
              "file with the one before it; the 6 -> 6 start is the baseline, the same restart without a rescale. "
              "Flink redistributes key groups while its tasks restore: \"from the job's submission\" is the "
              "counterpart of Spark's repartition plus restore.", END]
    return "\n".join(lines)


def summary(results: list[dict[str, Any]]) -> list[str]:
    """Per size and step: Spark's restore + repartition beside Flink's submission -> every task RUNNING,
    and the whole restart of each (process start to work)."""
    lines = ["| state rows | step | Spark: restore + repartition | Flink: submission -> tasks RUNNING | ratio "
             "| Spark: process start -> first batch with input | Flink: process start -> tasks RUNNING |",
             "| --- | --- | --- | --- | --- | --- | --- |"]
    for r in results:
        flink_by = {f["tag"]: f for f in r.get("flink") or []}
        for run_ in r["runs"][1:3]:
            rs = run_["rescale"]
            if not rs:
                continue
            spark = run_["restore_seconds"] + rs["seconds"]
            f = flink_by.get(f"p{run_['partitions']}")
            flink_s = submit_seconds(f) if f else None
            ratio = f"{spark / flink_s:.1f}x" if flink_s else "-"
            lines.append(f"| ~{state_mib(r['keys']):.0f} MiB | {rs['from']} -> {rs['to']} | {spark:.1f} s | "
                         f"{'-' if flink_s is None else f'{flink_s:.1f} s'} | {ratio} | "
                         f"{run_['first_input_batch_seconds']} s | "
                         f"{'-' if not f else str(f['process_to_running_seconds']) + ' s'} |")
    return lines


def render_flink(r: dict[str, Any]) -> list[str]:
    """Flink's rescale path beside Sparkpoint's, from the same run (bench/peers/flink_rescale.py)."""
    if "flink_skipped" in r:
        return ["", f"Flink: not run ({r['flink_skipped']})."]
    if not r.get("flink"):
        return []
    lines = ["", f"Flink 2.2 (PyFlink MiniCluster, RocksDB, incremental checkpoints to the same MinIO), the same "
             f"{r['keys']} keys x {PAYLOAD} B in keyed state (a GROUP BY per key), right after the runs above "
             f"(load average {r['load'][0]:.1f} before the Spark runs, {r['load'][1]:.1f} after Flink's):", "",
             "| step | stop-with-savepoint before it | process start -> every task RUNNING (state restored and "
             "redistributed) | first checkpoint at the new parallelism (MiB, s) |", "| --- | --- | --- | --- |"]
    prev = None
    for run_ in r["flink"]:
        if prev is not None:
            ck = run_["first_checkpoint"]
            first = f"{ck['fullSize'] / MIB:.0f}, {ck['durationMs'] / 1000:.2f}" if ck else "-"
            lines.append(f"| parallelism {prev['tag'][1:]} -> {run_['tag'][1:]} | {prev['savepoint']['seconds']:.2f} s "
                         f"| {run_['process_to_running_seconds']} s (from the job's submission: "
                         f"{submit_to_running(run_)}) | {first} |")
        prev = run_
    return lines


def submit_seconds(run_: dict[str, Any]) -> float | None:
    """flink_job.py times both events from the start of its SQL statements: the difference is the
    job's submission to every task RUNNING (state restored and redistributed)."""
    running, submitted = run_.get("tasks_running_seconds"), run_.get("submitted_seconds")
    return running - submitted if running is not None and submitted is not None else None


def submit_to_running(run_: dict[str, Any]) -> str:
    seconds = submit_seconds(run_)
    return "-" if seconds is None else f"{seconds:.1f} s"


def _pyspark() -> str:
    import pyspark

    return pyspark.__version__


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--keys", default="60000",
                        help="state keys, comma-separated sizes run one after the other (60000: ~100 MiB checkpoint; "
                             "60000,1000000: ~100 MiB and ~1 GiB)")
    parser.add_argument("--no-write", action="store_true", help="print, do not update docs/benchmarks.md")
    parser.add_argument("--flink", action="store_true",
                        help="also Flink's stop-with-savepoint + restore at a new parallelism (bench/peers/flink_rescale.py)")
    parser.add_argument("--small", action="store_true", help="a quick pass: 6000 keys (make bench's --small)")
    args = parser.parse_args(argv)
    sizes = [int(k) for k in str(args.keys).split(",")]
    if args.small:
        sizes = [min(k, 6000) for k in sizes[:1]]
    base = Path(tempfile.mkdtemp(prefix="sparkpoint-rescale-bench-"))
    server = MinioServer().start()
    try:
        server.make_bucket(BUCKET)
        results = [run(keys, args.flink, base, server.env()) for keys in sizes]
    finally:
        server.stop()
    (base / "results.json").write_text(json.dumps(results))
    print(f"raw results: {base / 'results.json'}", flush=True)
    return report.publish(START, END, render(results), write=not args.no_write)


if __name__ == "__main__":
    sys.exit(main())
