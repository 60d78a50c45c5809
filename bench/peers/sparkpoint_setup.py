"""Sparkpoint setups, each `sparkpoint run` in a fresh process: incremental checkpoints (10 s, 60 s),
full checkpoints (every file uploaded every time, SPARKPOINT_BENCH_FULL_UPLOAD=1) and the floor
(hot dir only, no durable checkpoints)."""

from __future__ import annotations

import shlex
import uuid

from sparkpoint.runtime.demo import RuntimeProcess, WindowedJob

from .common import Context, RunResult, Workload, json_lines

SETUPS = {  # name -> (checkpoint interval, full upload)
    "floor": ("24h", False),  # no checkpoint within a run (0s is rejected by the spec)
    "sparkpoint-10s": ("10s", False),
    "sparkpoint-60s": ("60s", False),
    "sparkpoint-full-10s": ("10s", True),
}


def run(name: str, w: Workload, ctx: Context, tag: str) -> RunResult:
    interval, full = SETUPS[name]
    job = WindowedJob(name=name.replace("sparkpoint-", "sp-"), rows_per_batch=w.rows_per_batch, keys=w.keys,
                      total_batches=w.batches, trigger=w.trigger, checkpoint_interval=interval,
                      extra_args={"payload_bytes": w.payload_bytes} if w.payload_bytes else {})
    store = f"s3://{ctx.bucket}/{tag}-{uuid.uuid4().hex[:8]}"
    job_file = job.write(ctx.base / f"{tag}.yaml", store)
    log = ctx.base / f"{tag}.log"
    env = {**ctx.env, **({"SPARKPOINT_BENCH_FULL_UPLOAD": "1"} if full else {})}
    p = RuntimeProcess(job_file, ctx.base / f"{tag}-pod", log, until_batch=w.until_batch, env=env).start()
    try:
        code = p.wait(3600)
    except BaseException:  # interrupted: take the JVM down with us
        p.kill()
        raise
    if code != 0:
        raise RuntimeError(f"{tag} exited {code}; see {log}")
    events = json_lines(log)
    batches = [e for e in events if e.get("msg") == "batch completed" and e["batchId"] >= w.warmup_batches
               and e["batchId"] < w.batches]
    cps = [e["request"] for e in events if e.get("msg") == "checkpoint request finished"
           and e["request"]["status"] == "completed" and e["request"]["trigger"] == "interval"]
    command = (f"{'SPARKPOINT_BENCH_FULL_UPLOAD=1 ' if full else ''}python -m sparkpoint.runtime.cli run "
               f"{shlex.quote(job_file.name)} --until-batch {w.until_batch}  # interval {interval}")
    return RunResult(
        setup=name, latency_ms=ctx.latency_ms, durations=[b["durationSeconds"] for b in batches],
        active_seconds=_span(batches), command=command,
        checkpoints=[{"bytes": c.get("bytes", 0), "new_bytes": c.get("newBytes", 0),
                      "sync_s": c["syncSeconds"], "async_s": c["asyncSeconds"]} for c in cps])


def _span(batches: list[dict]) -> float:
    ts = [b.get("time") or b.get("ts") for b in batches]
    if len(batches) < 2 or not all(isinstance(t, int | float) for t in ts):
        return sum(b["durationSeconds"] for b in batches)
    return float(ts[-1] - ts[0])
