"""Where a promoted standby's first batch goes (issue 43): an active runtime runs the job, a warmed standby
(`--standby-warmup`) follows it; the active is SIGKILLed after `--batches` batches and the standby promoted
at once. Its first batch is broken down from Spark's own event log (uncompressed for this bench): the
progress event's durationMs and state operator metrics, and each stage's wall time and its tasks' CPU,
the stateful stage beside the same stage of the next batch. Two variants per round, in alternating order:
`deltas-50` (Spark snapshots each state store every 50 versions, the runtime's default) and `deltas-10`
(the job's spec has `spec.standby.warmup`, so every 10: runtime/spark/session.py, DELTAS_PER_SNAPSHOT_FAST_RESTORE).
No cluster: local processes against a local MinIO, as bench/standby_bench.py. Prints one JSON line per
round; docs/benchmarks.md's section "The promoted first batch" is written by hand from them.

    python bench/promoted_batch_bench.py --rounds 2
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import report  # bench/report.py; bench/ is on sys.path when this runs as a script
import yaml
from cold_start_bench import write_job
from standby_bench import promote, status

from harness.minio_server import MinioServer
from harness.runtime_job import RuntimeProcess, WindowedJob, committed, state_replays, wait_until
from sparkpoint.runtime.checkpoint.catalog import list_checkpoint_ids, load_manifest
from sparkpoint.runtime.store import JobRef, open_store

BUCKET = "bench"
VARIANTS = ("deltas-50", "deltas-10")


# --- pure: what the event log and the manifest say ----------------------------------------------------
def batch_breakdown(events: list[dict[str, Any]], batch: int) -> dict[str, Any]:
    """A batch as Spark's event log has it: durationMs, the state operators' times and RocksDB's load and
    commit metrics, and per stage its wall seconds and its tasks' run and CPU seconds."""
    progress = next((e["progress"] for e in events if e["Event"].endswith("QueryProgressEvent")
                     and e["progress"]["batchId"] == batch), None)
    out: dict[str, Any] = {"batch": batch}
    if progress is not None:
        out["durationMs"] = progress["durationMs"]
        out["state"] = [{k: op.get(k) for k in ("numRowsTotal", "allUpdatesTimeMs", "allRemovalsTimeMs", "commitTimeMs")}
                        | {k: v for k, v in (op.get("customMetrics") or {}).items()
                           if k.startswith(("rocksdbLoad", "rocksdbReplay", "rocksdbNumReplay", "rocksdbCommit"))}
                        for op in progress.get("stateOperators", [])]
    jobs = [e for e in events if e["Event"] == "SparkListenerJobStart"
            and (e.get("Properties") or {}).get("streaming.sql.batchId") == str(batch)]
    stage_ids = {s for j in jobs for s in j["Stage IDs"]}
    stages = {e["Stage Info"]["Stage ID"]: e["Stage Info"] for e in events
              if e["Event"] == "SparkListenerStageCompleted" and e["Stage Info"]["Stage ID"] in stage_ids}
    tasks: dict[int, list[dict[str, Any]]] = {}
    for e in events:
        if e["Event"] == "SparkListenerTaskEnd" and e["Stage ID"] in stages and e.get("Task Metrics"):
            tasks.setdefault(e["Stage ID"], []).append(e["Task Metrics"])
    out["stages"] = [{"tasks": s["Number of Tasks"],
                      "wall_s": (s.get("Completion Time", 0) - s.get("Submission Time", 0)) / 1000,
                      "run_s": sum(t["Executor Run Time"] for t in tasks.get(sid, [])) / 1000,
                      "cpu_s": round(sum(t["Executor CPU Time"] for t in tasks.get(sid, [])) / 1e9, 3)}
                     for sid, s in sorted(stages.items())]
    return out


def read_event_log(work_dir: Path) -> list[dict[str, Any]]:
    events = []
    for path in sorted((work_dir / "event-log").glob("*/*/events_*")):  # Spark's rolled files, in order
        events += [json.loads(line) for line in path.read_text().splitlines() if line.strip()]
    return events


# --- one round ------------------------------------------------------------------------------------------
def job_file(base: Path, job: WindowedJob, url: str, payload: int, variant: str) -> Path:
    path = write_job(job, base / f"{job.name}.yaml", url, payload)
    doc = yaml.safe_load(path.read_text())
    doc["spec"]["spark"]["conf"] = {"spark.eventLog.compress": "false"}  # the breakdown reads it
    if variant == "deltas-10":
        doc["spec"]["standby"] = {"enabled": True, "warmup": True}
    path.write_text(yaml.safe_dump(doc, sort_keys=False))
    return path


def one_round(tag: str, variant: str, base: Path, env: dict[str, str], url: str, job: WindowedJob, payload: int,
              batches: int) -> dict[str, Any]:
    store, ref = open_store(url, env=env), JobRef("default", f"{job.name}-{tag}-{variant}")
    named = WindowedJob(**{**job.__dict__, "name": ref.name})
    tag = f"{tag}-{variant}"
    spec = job_file(base, named, url, payload, variant)
    active = RuntimeProcess(spec, base / f"{tag}-active", base / f"{tag}-active.log", until_batch=None, env=env).start()
    standby = RuntimeProcess(spec, base / f"{tag}-standby", base / f"{tag}-standby.log", until_batch=None, env=env,
                             extra_args=("--standby", "--standby-warmup")).start()
    try:
        wait_until(lambda: committed(active.work_dir) >= batches, 1800, "the active's batches", active)
        wait_until(lambda: (standby.work_dir / "standby.json").exists(), 300, "the standby's API", standby)
        wait_until(lambda: (status(standby.work_dir, "standby.json")["standby"]["warmup"] or {}).get("state")
                   not in (None, "pending"), 600, "the standby's warm-up", standby)

        def holds_the_newest() -> bool:
            held = status(standby.work_dir, "standby.json")["standby"]["checkpoint"]
            return held is not None and held == list_checkpoint_ids(store, ref)[-1]
        wait_until(holds_the_newest, 300, "the standby to hold the newest checkpoint", standby)
        manifests = [load_manifest(store, ref, c) for c in list_checkpoint_ids(store, ref)]
        warmup = status(standby.work_dir, "standby.json")["standby"]["warmup"]
        load_before = os.getloadavg()[0]
        active.kill()
        killed = time.monotonic()
        promote(standby.work_dir)
        wait_until(lambda: report.log_events(standby.log_path, "start phases"), 600, "the first batch", standby)
        phases = report.log_events(standby.log_path, "start phases")[0]["phases"]
        restored = status(standby.work_dir)["restore"]
        first = (restored.get("batchId") if restored.get("batchId") is not None else -1) + 1
        wait_until(lambda: committed(standby.work_dir) >= first + 1, 300, "the batch after it", standby)
        time.sleep(3)  # the event log's listener writes the second batch's events a moment after its commit
        load_after = os.getloadavg()[0]
    finally:
        active.kill()
        standby.kill()
    events = read_event_log(standby.work_dir)
    restored_manifest = load_manifest(store, ref, restored["checkpoint"])  # (may be newer than `manifests`)
    promoted = phases["promoted"]
    return {"round": tag, "variant": variant, "load": [round(load_before, 1), round(load_after, 1)], "warmup": warmup,
            "kill_to_first_batch_s": round(standby.started + phases["firstBatchCommitted"] - killed, 2),
            "after_promotion_s": {k: round(v - promoted, 2) for k, v in phases.items() if v >= promoted},
            "restored": restored["checkpoint"], "restored_batch": restored.get("batchId"),
            "replays": state_replays([f.path for f in restored_manifest.files], first),
            "checkpoint_new_mib": [round(m.totals.new_bytes / 2**20, 1) for m in manifests],
            "checkpoint_mib": [round(m.totals.bytes / 2**20, 1) for m in manifests],
            "first": batch_breakdown(events, first), "next": batch_breakdown(events, first + 1)}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rounds", type=int, default=2, help="rounds; each runs both variants, alternating order")
    parser.add_argument("--keys", type=int, default=50000, help="keys, and rows per batch (every batch rewrites each)")
    parser.add_argument("--payload", type=int, default=256, help="bytes of payload per key")
    parser.add_argument("--batches", type=int, default=25, help="the active's batches before its kill")
    args = parser.parse_args(argv)
    base = Path(tempfile.mkdtemp(prefix="sparkpoint-promoted-batch-"))
    # recovery_bench.py's job: every batch brings a row for each key, windows of an hour never close
    job = WindowedJob(name="promoted", rows_per_batch=args.keys, keys=args.keys, total_batches=100000,
                      window_seconds=3600, watermark_seconds=10)
    server = MinioServer().start()
    try:
        server.make_bucket(BUCKET)
        for i in range(args.rounds):
            for variant in (VARIANTS if i % 2 == 0 else VARIANTS[::-1]):
                r = one_round(f"r{i}", variant, base, server.env(), f"s3://{BUCKET}/promoted", job, args.payload,
                              args.batches)
                print(json.dumps(r), flush=True)
    finally:
        server.stop()
    print(f"work dirs: {base}", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
