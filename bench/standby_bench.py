"""A standby attempt against a cold start (issue 43): from the SIGKILL of the active runtime to the first
new batch committed by the next one, (a) a `sparkpoint run` started on a new pod (an empty work dir:
a remote restore) at the kill, (b) a standby (`sparkpoint run --standby`, runtime/service/standby.py)
started beforehand and promoted with POST /promote at the kill. The operator's reaction is left out
of both: the next runtime is started, or promoted, the moment the old one is killed. Each round kills
an active beside its standby and promotes it, lets the promoted one checkpoint, then kills it and starts
a cold one, so both variants restore the same state side by side under the same load. Also the standby's
cost while it follows: its processes' RSS (Python and the JVM) beside the active's, and its store
requests per hour. No cluster: local processes against a local MinIO, as bench/cold_start_bench.py.

    python bench/standby_bench.py                 # 3 rounds, docs/benchmarks.md
    python bench/standby_bench.py --rounds 5 --keys 200000
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
from cold_start_bench import seed, write_job

from harness.minio_server import MinioServer
from harness.runtime_job import RuntimeProcess, WindowedJob, wait_until
from sparkpoint.runtime.checkpoint.catalog import list_checkpoint_ids, load_manifest
from sparkpoint.runtime.store import JobRef, open_store

START, END = "<!-- standby-bench:start -->", "<!-- standby-bench:end -->"
BUCKET = "bench"


def status(work_dir: Path, name: str = "api.json") -> dict[str, Any]:
    from urllib.request import urlopen

    port = json.loads((work_dir / name).read_text())["port"]
    with urlopen(f"http://127.0.0.1:{port}/status", timeout=30) as resp:
        return json.loads(resp.read())


def promote(work_dir: Path) -> None:
    from urllib.request import Request, urlopen

    port = json.loads((work_dir / "standby.json").read_text())["port"]
    req = Request(f"http://127.0.0.1:{port}/promote", data=b"{}", method="POST",
                  headers={"Content-Type": "application/json"})
    with urlopen(req, timeout=30) as resp:
        assert resp.status == 202, resp.status


def rss_mib(proc: RuntimeProcess) -> float:
    """Resident memory of the runtime's process group (Python and its JVM)."""
    assert proc.proc is not None
    total = 0
    for pid in (p for p in os.listdir("/proc") if p.isdigit()):
        try:
            if os.getpgid(int(pid)) != proc.proc.pid:
                continue
            for line in Path(f"/proc/{pid}/status").read_text().splitlines():
                if line.startswith("VmRSS:"):
                    total += int(line.split()[1])
        except (OSError, ProcessLookupError, ValueError):
            continue
    return total / 1024


def first_new_batch(proc: RuntimeProcess, killed_at: float) -> tuple[float, dict[str, Any]]:
    """Seconds from the kill to the next runtime's first new batch, and its `start phases` line."""
    wait_until(lambda: report.log_events(proc.log_path, "start phases"), 600, "the first new batch", proc)
    line = report.log_events(proc.log_path, "start phases")[0]
    return proc.started + line["phases"]["firstBatchCommitted"] - killed_at, line


def first_batch_seconds(proc: RuntimeProcess, restored: int | None) -> dict[str, float]:
    """The first batch after the restored one as Spark times it (its progress event's durationMs, in s)."""
    after = -1 if restored is None else restored

    def done() -> list[dict[str, Any]]:  # (its progress event is logged a moment after the commit)
        return [e for e in report.log_events(proc.log_path, "batch completed") if e.get("batchId", -1) > after]
    wait_until(lambda: bool(done()), 120, "the first batch's progress event", proc)
    return dict(done()[0].get("phaseSeconds") or {})


def start(job_file: Path, base: Path, env: dict[str, str], tag: str, *extra: str) -> RuntimeProcess:
    return RuntimeProcess(job_file, base / f"{tag}-pod", base / f"{tag}.log", until_batch=None, env=env,
                          extra_args=extra).start()


def one_round(i: int, job_file: Path, base: Path, env: dict[str, str], store: Any, ref: JobRef,
              follow_seconds: float, warmup: bool = False) -> dict[str, Any]:
    active = start(job_file, base, env, f"active-{i}")
    standby = start(job_file, base, env, f"standby-{i}", "--standby", *(["--standby-warmup"] if warmup else []))
    cold = None
    try:
        wait_until(lambda: report.log_events(active.log_path, "start phases"), 600, "the active's first batch", active)
        attempt = status(active.work_dir)["attempt"]
        wait_until(lambda: (standby.work_dir / "standby.json").exists(), 300, "the standby's API", standby)

        def holds_the_actives() -> bool:
            held = status(standby.work_dir, "standby.json")["standby"]["checkpoint"]
            return held is not None and load_manifest(store, ref, held).attempt == attempt
        wait_until(holds_the_actives, 300, "the standby to hold a checkpoint of the active", standby)
        if warmup:
            wait_until(lambda: (status(standby.work_dir, "standby.json")["standby"]["warmup"] or {}).get("state")
                       not in (None, "pending"), 600, "the standby's warm-up", standby)
        before = status(standby.work_dir, "standby.json")["standby"]
        t0 = time.monotonic()
        time.sleep(follow_seconds)  # following a running job: its cost
        after = status(standby.work_dir, "standby.json")["standby"]
        span = time.monotonic() - t0
        cost = {"standby_rss_mib": rss_mib(standby), "active_rss_mib": rss_mib(active), "follow_seconds": span,
                "lists_per_hour": (after["storeRequests"]["list"] - before["storeRequests"]["list"]) / span * 3600,
                "gets_per_hour": (after["storeRequests"]["get"] - before["storeRequests"]["get"]) / span * 3600,
                "fetched_mib_per_hour": (after["fetchedBytes"] - before["fetchedBytes"]) / span * 3600 / 2**20,
                "behind": after["behindCheckpoints"]}
        # (b) kill the active, promote the standby at once
        newest = list_checkpoint_ids(store, ref)[-1]
        active.kill()
        killed = time.monotonic()
        promote(standby.work_dir)
        standby_s, line = first_new_batch(standby, killed)
        promoted = status(standby.work_dir)
        first = first_batch_seconds(standby, promoted["restore"].get("batchId"))
        load_b = os.getloadavg()[0]
        # the promoted standby runs and checkpoints; then (a): kill it, start a cold one at once
        wait_until(lambda: load_manifest(store, ref, list_checkpoint_ids(store, ref)[-1]).attempt
                   == promoted["attempt"], 300, "a checkpoint of the promoted standby", standby)
        standby.kill()
        killed = time.monotonic()
        cold = start(job_file, base, env, f"cold-{i}")
        cold_s, cold_line = first_new_batch(cold, killed)
        load_a = os.getloadavg()[0]
    finally:
        for p in (active, standby, cold):
            if p is not None:
                p.kill()
    restore = promoted["restore"]
    return {"round": i, "standby_s": standby_s, "cold_s": cold_s, "load_b": load_b, "load_a": load_a,
            "standby_phases": line["phases"], "cold_phases": cold_line["phases"], "held_at_kill": before["checkpoint"],
            "standby_first_batch": first, "warmup": promoted["standby"].get("warmup"),
            "newest_at_kill": newest, "topup": promoted["standby"]["promotion"], "restore_seconds": restore["seconds"],
            "restored": restore["checkpoint"], "cost": cost}


def _cell(values: list[float]) -> str:
    return f"{statistics.median(values):.1f} ({min(values):.1f}-{max(values):.1f})"


def render(results: list[dict[str, Any]], job: WindowedJob, payload: int, checkpoint_bytes: int) -> str:
    n = len(results)
    after_kill = {k: [r["standby_phases"][k] - r["standby_phases"]["promoted"] for r in results
                      if k in r["standby_phases"]]
                  for k in ("fence", "restored", "built", "query", "firstBatchPlanned", "firstBatchCommitted")}
    spark = sorted({k for r in results for k in r.get("standby_first_batch") or {}})
    first = [f"{k} {statistics.median([r['standby_first_batch'][k] for r in results if k in r['standby_first_batch']]):.2f}"
             for k in spark]
    cold = {k: [r["cold_phases"][k] for r in results if k in r["cold_phases"]]
            for k in ("api", "fence", "restored", "session", "query", "firstBatchCommitted")}
    c = [r["cost"] for r in results]
    warm = [r["warmup"] for r in results if r.get("warmup")]
    warm_text = (" Each standby warmed up first (`--standby-warmup`): " + ", ".join(
        f"{w.get('state')} in {w.get('seconds', 0):.1f} s" for w in warm) + "." if warm else "")
    topup = [r["topup"] for r in results]
    rows = [
        "| kill -> first new batch committed (s) | median (min-max) |", "| --- | --- |",
        f"| (a) cold `sparkpoint run` started at the kill (new work dir) | {_cell([r['cold_s'] for r in results])} |",
        f"| (b) standby promoted at the kill | {_cell([r['standby_s'] for r in results])} |",
    ]
    return "\n".join([
        START,
        f"Measured {time.strftime('%Y-%m-%d')} at commit `{report.commit()}`, {n} rounds, each variant once per "
        f"round: `sparkpoint run` as local processes (Spark local[2], 4 shuffle partitions) against a local MinIO, "
        f"{job.keys} keys with {payload} bytes of payload each (a checkpoint of {checkpoint_bytes / 2**20:.0f} MiB), "
        f"checkpoints every {job.checkpoint_interval}, the standby looking every 2 s. Load average (2 cores) at "
        f"the measurements: {min(min(r['load_b'], r['load_a']) for r in results):.1f}-"
        f"{max(max(r['load_b'], r['load_a']) for r in results):.1f}. The operator's reaction is not included: the "
        "next runtime is started (a) or promoted (b) the moment the old one is SIGKILLed.", "", *rows, "",
        "Where (b)'s seconds go after the promotion request (median s): "
        + ", ".join(f"{k} {statistics.median(v):.2f}" for k, v in after_kill.items() if v)
        + (" (its first batch as Spark times it, durationMs in s: " + ", ".join(first) + ")" if first else "")
        + "; (a)'s since its process started: " + ", ".join(f"{k} {statistics.median(v):.2f}" for k, v in cold.items() if v)
        + f". The top-up at the promotion reused {statistics.median([t['reusedFiles'] for t in topup]):.0f} held "
        f"files and downloaded {statistics.median([t['downloadedFiles'] for t in topup]):.0f} (medians; the "
        f"standby was {', '.join(str(r['cost']['behind']) for r in results)} checkpoint(s) behind at the kill)."
        + warm_text, "",
        f"The standby's cost while following the running job: RSS {_cell([x['standby_rss_mib'] for x in c])} MiB "
        f"(the active's {_cell([x['active_rss_mib'] for x in c])} MiB; both Python and the driver JVM), store "
        f"requests {_cell([x['lists_per_hour'] for x in c])} LIST and {_cell([x['gets_per_hour'] for x in c])} GET "
        f"per hour, {_cell([x['fetched_mib_per_hour'] for x in c])} MiB fetched per hour (over "
        f"{statistics.median([x['follow_seconds'] for x in c]):.0f} s of following per round). An idle job (no new "
        "checkpoint) costs one LIST per look: 1,800 an hour at the 2 s default.",
        END])


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--keys", type=int, default=50000)
    parser.add_argument("--payload", type=int, default=256, help="bytes of payload per key (state size)")
    parser.add_argument("--follow", type=float, default=30.0, help="seconds of following measured per round")
    parser.add_argument("--small", action="store_true", help="a quick pass: 5000 keys, 64 bytes, 2 rounds")
    parser.add_argument("--no-write", action="store_true")
    parser.add_argument("--warmup", action="store_true", help="standbys started with --standby-warmup")
    args = parser.parse_args(argv)
    if args.small:
        args.keys, args.payload, args.rounds, args.follow = min(args.keys, 5000), min(args.payload, 64), 2, 15.0
    base = Path(tempfile.mkdtemp(prefix="sparkpoint-standby-"))
    job = WindowedJob(name="standby", rows_per_batch=args.keys // 5, keys=args.keys, total_batches=100000,
                      window_seconds=3600, watermark_seconds=3600)
    server = MinioServer().start()
    results = []
    try:
        server.make_bucket(BUCKET)
        env, url = server.env(), f"s3://{BUCKET}/standby"
        job_file = write_job(job, base / "standby.yaml", url, args.payload)
        seed(job, job_file, base, env, url)
        store, ref = open_store(url, env=env), JobRef("default", job.name)
        for i in range(args.rounds):
            r = one_round(i, job_file, base, env, store, ref, args.follow, args.warmup)
            results.append(r)
            print(json.dumps(r), flush=True)
        checkpoint_bytes = load_manifest(store, ref, list_checkpoint_ids(store, ref)[-1]).totals.bytes
    finally:
        server.stop()
    (base / "results.json").write_text(json.dumps(results))
    print(f"raw results: {base / 'results.json'}", flush=True)
    return report.publish(START, END, render(results, job, args.payload, checkpoint_bytes), write=not args.no_write)


if __name__ == "__main__":
    sys.exit(main())
