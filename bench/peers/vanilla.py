"""Vanilla Spark setups: checkpointLocation=s3a://... on the same MinIO, RocksDB state store, plain,
with changelog checkpointing, and with the state store checkpoint format v2. One JVM per run."""

from __future__ import annotations

import shlex
import subprocess
import sys
import uuid
from pathlib import Path

from .common import Context, RunResult, Workload, json_lines

REPO = Path(__file__).resolve().parents[2]
JOB = Path(__file__).with_name("vanilla_job.py")
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
            "--until-batch", str(w.until_batch), *SETUPS[name]]
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
    return RunResult(setup=name, latency_ms=ctx.latency_ms, durations=durations, active_seconds=span,
                     checkpoints=cps, command="python bench/peers/vanilla_job.py " + shlex.join(args))


def _env() -> dict[str, str]:
    import os
    return dict(os.environ)
