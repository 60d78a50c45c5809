"""Vanilla Spark setups: checkpointLocation=s3a://... on the same MinIO, RocksDB state store, plain,
with changelog checkpointing, and with the state store checkpoint format v2. One JVM per run."""

from __future__ import annotations

import shlex
import subprocess
import sys
import time
import urllib.request
import uuid
from pathlib import Path
from typing import Any

from sparkpoint.runtime.spec import SparkSection

from . import churn, store_requests
from .common import Context, RunResult, Workload, batch_phases, json_lines

REPO = Path(__file__).resolve().parents[2]
JOB = Path(__file__).with_name("vanilla_job.py")
# The rounds' Sparkpoint and floor runs keep the spec's default (spec.spark.shufflePartitions); vanilla
# runs with as many state partitions (before 2026-11-24 it ran with 2: see docs/benchmarks.md).
SPARKPOINT_PARTITIONS = SparkSection().shuffle_partitions
SETUPS = {  # name -> extra job flags
    "vanilla": [],
    "vanilla-changelog": ["--changelog"],
    "vanilla-v2": ["--changelog", "--format-version", "2"],
}


def jars() -> str:
    d = subprocess.run([str(REPO / "scripts" / "ensure-hadoop-aws.sh")], check=True, capture_output=True,
                       text=True).stdout.strip()
    return ",".join(str(p) for p in sorted(Path(d).glob("*.jar")))


def run(name: str, w: Workload, ctx: Context, tag: str, jar_list: str) -> RunResult:
    prefix = f"{tag}-{uuid.uuid4().hex[:8]}"
    args = ["--checkpoint", f"s3a://{ctx.bucket}/{prefix}/checkpoint", "--endpoint", ctx.endpoint,
            "--output", str(ctx.base / f"{tag}-out"), "--rows", str(w.rows_per_batch), "--keys", str(w.keys),
            "--batches", str(w.batches), "--payload-bytes", str(w.payload_bytes), "--trigger", w.trigger,
            "--until-batch", str(w.until_batch), "--shuffle-partitions", str(SPARKPOINT_PARTITIONS), *SETUPS[name]]
    log = ctx.base / f"{tag}.log"
    with open(log, "wb") as out:
        code = subprocess.call([sys.executable, str(JOB), "--jars", jar_list, *args], stdout=out,
                               stderr=subprocess.STDOUT, env={**_env(), **ctx.env, "TZ": "UTC"}, timeout=3600)
    if code != 0:
        raise RuntimeError(f"{tag} exited {code}; see {log}")
    events = [e for e in json_lines(log) if e.get("event") == "batch"]
    batches = [e for e in events if w.warmup_batches <= e["batchId"] < w.batches]
    durations = [e["durationMs"]["triggerExecution"] / 1000 for e in batches]
    # Vanilla's checkpoint is synchronous, inside every batch: offset/commit log writes plus the
    # state store commit (RocksDB snapshot upload or changelog file).
    cps = [{"sync_s": (e["durationMs"].get("walCommit", 0) + e["durationMs"].get("commitOffsets", 0)
                       + (e.get("stateCommitMs") or 0)) / 1000, "async_s": 0.0} for e in batches]
    span = batches[-1]["seconds"] - batches[0]["seconds"] if len(batches) > 1 else sum(durations)
    window = ([batches[0]["ts"] - durations[0], batches[-1]["ts"]]
              if len(batches) > 1 and all("ts" in e for e in (batches[0], batches[-1])) else [])
    return RunResult(setup=name, latency_ms=ctx.latency_ms, durations=durations, active_seconds=span,
                     checkpoints=cps, command="python bench/peers/vanilla_job.py " + shlex.join(args), window=window,
                     phases=batch_phases([e["durationMs"] for e in batches]))


def _env() -> dict[str, str]:
    import os
    return dict(os.environ)


def received_bytes(endpoint: str) -> int:
    with urllib.request.urlopen(f"{endpoint}/minio/v2/metrics/cluster", timeout=10) as resp:
        return store_requests.parse_received_bytes(resp.read().decode())


def run_churn(w: churn.ChurnWorkload, ctx: Context, tag: str, jar_list: str, flags: list[str]) -> dict[str, Any]:
    """Vanilla on the churn query. It checkpoints every batch; uploaded bytes per batch = what MinIO
    received between the first steady batch and the last one, over the batches in between (offset and
    commit logs and the asynchronous snapshot uploads included)."""
    prefix = f"{tag}-{uuid.uuid4().hex[:8]}"
    args = ["--checkpoint", f"s3a://{ctx.bucket}/{prefix}/checkpoint", "--endpoint", ctx.endpoint,
            "--output", str(ctx.base / f"{tag}-out"), "--query", "churn", "--keys", str(w.keys),
            "--rows", str(w.rows_per_batch), "--batches", str(w.batches), "--payload-bytes", str(w.payload_bytes),
            "--trigger", churn.trigger(w), "--until-batch", str(w.batches - 1),
            "--shuffle-partitions", str(w.partitions), *flags]
    log = ctx.base / f"{tag}.log"
    marks: list[tuple[int, int]] = []  # (batch id seen, bytes received by then)
    with open(log, "wb") as out:
        proc = subprocess.Popen([sys.executable, str(JOB), "--jars", jar_list, *args], stdout=out,
                                stderr=subprocess.STDOUT, env={**_env(), **ctx.env, "TZ": "UTC"})
    deadline = time.monotonic() + 7200
    try:
        while proc.poll() is None and time.monotonic() < deadline:
            seen = max((e["batchId"] for e in json_lines(log) if e.get("event") == "batch"), default=-1)
            if seen >= 1 and (not marks or (seen >= w.batches - 1 and marks[-1][0] < seen)):
                marks.append((seen, received_bytes(ctx.endpoint)))
            time.sleep(0.2)
    finally:
        if proc.poll() is None:
            proc.kill()
    if proc.wait() != 0:
        raise RuntimeError(f"{tag} exited {proc.returncode}; see {log}")
    last = max((e["batchId"] for e in json_lines(log) if e.get("event") == "batch"), default=-1)
    if marks and marks[-1][0] < last:  # it stopped between two polls: count up to its last batch
        marks.append((last, received_bytes(ctx.endpoint)))
    if len(marks) < 2 or marks[-1][0] <= marks[0][0]:
        raise RuntimeError(f"{tag}: too few steady batches observed ({marks}); see {log}")
    batches = marks[-1][0] - marks[0][0]
    uploaded = (marks[-1][1] - marks[0][1]) / batches
    changed = w.rows_per_batch * w.row_bytes
    return {"setup": name_of(flags), "size": w.size, "churn": w.churn, "state_bytes": w.state_bytes,
            "steady": [{"uploaded": uploaded, "changed": changed, "ratio": uploaded / changed,
                        "churn": w.rows_per_batch / w.keys, "batches": batches}],
            "command": "python bench/peers/vanilla_job.py " + shlex.join(args)}


def name_of(flags: list[str]) -> str:
    return next((n for n, f in SETUPS.items() if f == flags), "vanilla")
