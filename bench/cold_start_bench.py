"""The cold path of a recovery (issue 43): where the seconds of a runtime start go, from the process's
start to its first new batch committed, as the runtime records them (`start phases`,
runtime/service/start_phases.py). No cluster: `sparkpoint run` as a local process against a local
MinIO, as `make demo` runs it; each start is on a new pod (an empty work dir: the state comes from the
store, as for a new attempt) and is SIGKILLed once its first new batch has committed, so the next one
restores from the store again. Two variants, alternating: `serial` (the JVM starts after the restore,
`--serial-start`: the order before issue 43) and `overlap` (the JVM starts beside the restore).

    python bench/cold_start_bench.py                    # 3 starts per variant, docs/benchmarks.md
    python bench/cold_start_bench.py --starts 5 --keys 200000 --payload 256
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import report  # bench/report.py; bench/ is on sys.path when this runs as a script
import yaml

from harness.minio_server import MinioServer
from harness.runtime_job import RuntimeProcess, WindowedJob, wait_until
from sparkpoint.runtime.service.start_phases import ORDER
from sparkpoint.runtime.store import JobRef, open_store

START, END = "<!-- cold-start-bench:start -->", "<!-- cold-start-bench:end -->"
BUCKET = "bench"
SEED_BATCHES = 8  # every key is in the state after 5 batches


def write_job(job: WindowedJob, path: Path, store: str, payload: int) -> Path:
    doc = job.spec(store)
    doc["spec"]["job"]["args"]["payload_bytes"] = payload
    doc["spec"]["spark"]["shufflePartitions"] = 4
    path.write_text(yaml.safe_dump(doc, sort_keys=False))
    return path


def one_start(job_file: Path, base: Path, env: dict[str, str], tag: str, serial: bool) -> dict[str, Any]:
    log = base / f"{tag}.log"
    p = RuntimeProcess(job_file, base / f"{tag}-pod", log, until_batch=None, env=env,
                       extra_args=("--serial-start",) if serial else ()).start()
    try:
        wait_until(lambda: report.log_events(log, "start phases"), 600, f"{tag}'s first new batch", p)
        # Spark's own account of that batch (its progress event comes a moment after the commit)
        deadline = time.monotonic() + 20
        while time.monotonic() < deadline and not report.log_events(log, "batch completed"):
            time.sleep(0.2)
    finally:
        p.kill()
    line = report.log_events(log, "start phases")[0]
    running = (report.log_events(log, "query running") or [{}])[0]
    first = (report.log_events(log, "batch completed") or [{}])[0]
    return {"tag": tag, "variant": "serial" if serial else "overlap", "phases": line["phases"],
            "restore": line.get("restore"), "restore_seconds": running.get("restore_seconds"),
            "restored_batch": running.get("batch"), "first_batch": first.get("phaseSeconds")}


def seed(job: WindowedJob, job_file: Path, base: Path, env: dict[str, str], store: str) -> None:
    """A first run that leaves a few checkpoints of the grown state in the store."""
    p = RuntimeProcess(job_file, base / "seed-pod", base / "seed.log", until_batch=SEED_BATCHES, env=env).start()
    code = p.wait(3600)
    if code != 0:
        raise RuntimeError(f"the seed run exited {code}; see {base / 'seed.log'}")
    listed = open_store(store, env=env).list(f"{JobRef('default', job.name).root}/checkpoints/")
    assert any(o.key.endswith(".json") for o in listed), "the seed run left no checkpoint"


def render(results: list[dict[str, Any]], job: WindowedJob, payload: int, load: str) -> str:
    variants = ("serial", "overlap")
    rows = ["| phase (s since process start) | " + " | ".join(f"{v} (median of {sum(r['variant'] == v for r in results)})"
                                                          for v in variants) + " |",
            "| --- | " + " | ".join("---" for _ in variants) + " |"]
    for name in ORDER:
        cells = []
        for v in variants:
            got = [r["phases"][name] for r in results if r["variant"] == v and name in r["phases"]]
            cells.append(f"{statistics.median(got):.2f} ({min(got):.2f}-{max(got):.2f})" if got else "n/a")
        rows.append(f"| {name} | " + " | ".join(cells) + " |")
    restore = [r["restore_seconds"] for r in results if r.get("restore_seconds") is not None]
    spark_phases = sorted({k for r in results for k in (r.get("first_batch") or {})})
    first = [f"{k} {statistics.median([r['first_batch'][k] for r in results if k in (r.get('first_batch') or {})]):.2f}"
             for k in spark_phases]
    return "\n".join([
        START, f"Measured {time.strftime('%Y-%m-%d')} at commit `{report.commit()}`: `sparkpoint run` as a local process "
        f"(Spark local[2], 4 shuffle partitions) against a local MinIO, {job.keys} keys with "
        f"{payload} bytes of payload each, a remote restore on every start (new work dir), "
        f"restore medians {statistics.median(restore):.2f} s. Load: {load}. Each cell: median (min-max) "
        "over the starts, seconds since the process started.", "", *rows, "",
        "The first batch after the restore as Spark times it (its progress event's durationMs, median "
        "over every start, s): " + (", ".join(first) or "not reported") + ".", END])


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--starts", type=int, default=3, help="starts per variant (alternating)")
    parser.add_argument("--keys", type=int, default=50000)
    parser.add_argument("--payload", type=int, default=256, help="bytes of payload per key (state size)")
    parser.add_argument("--small", action="store_true", help="a quick pass: 5000 keys, 64 bytes (make bench's --small)")
    parser.add_argument("--no-write", action="store_true")
    args = parser.parse_args(argv)
    if args.small:
        args.keys, args.payload = min(args.keys, 5000), min(args.payload, 64)
    base = Path(tempfile.mkdtemp(prefix="sparkpoint-cold-start-"))
    # input that does not end (each start's first batch has rows); windows that never close (the state grows)
    job = WindowedJob(name="cold", rows_per_batch=args.keys // 5, keys=args.keys, total_batches=100000,
                      window_seconds=3600, watermark_seconds=3600)
    server = MinioServer().start()
    results = []
    try:
        server.make_bucket(BUCKET)
        env, store = server.env(), f"s3://{BUCKET}/cold"
        job_file = write_job(job, base / "cold.yaml", store, args.payload)
        seed(job, job_file, base, env, store)
        for i in range(args.starts):
            for serial in (True, False):
                r = one_start(job_file, base, env, f"{'serial' if serial else 'overlap'}-{i}", serial)
                results.append(r)
                print(json.dumps(r), flush=True)
    finally:
        server.stop()
    load = f"load average {os.getloadavg()[0]:.1f} on {os.cpu_count()} cores at the end"
    (base / "results.json").write_text(json.dumps(results))
    print(f"raw results: {base / 'results.json'}", flush=True)
    return report.publish(START, END, render(results, job, args.payload, load), write=not args.no_write)


if __name__ == "__main__":
    sys.exit(main())
