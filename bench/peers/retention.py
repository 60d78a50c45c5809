"""Bucket bytes over time with retention and GC (issue 10; goal: at most 1.5x the bytes of the retained
checkpoints). Sparkpoint runs the churn query with checkpoint.retain and its GC loop (`sparkpoint gc`,
the sidecar's command, with the sidecar's interval and grace); every `sample_s` the harness lists the
job's prefix and asks GC (dry run) for the live bytes of the retained checkpoints and for what of the
sink's output readers and kept checkpoints still need (the sidecar collects the rest of `outputs/`
too). Vanilla Spark runs the same query for as long, with its own cleanup
(spark.sql.streaming.minBatchesToRetain); what it leaves is listed the same way (its file sink writes
to local disk, so its bucket holds no output)."""

from __future__ import annotations

import contextlib
import os
import signal
import statistics
import subprocess
import sys
import time
import uuid
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import Any

from harness.runtime_job import RuntimeProcess
from sparkpoint.runtime.checkpoint import gc_pass
from sparkpoint.runtime.sink.output_gc import output_gc_pass
from sparkpoint.runtime.store import JobRef, open_store

from .churn import ChurnWorkload
from .common import Context, completed_checkpoints, json_lines
from .sparkpoint_setup import churn_job

JOB = Path(__file__).with_name("vanilla_job.py")
CHECKPOINT_AREAS = ("objects", "checkpoints")
OUTPUT_AREA = "outputs"


def split_bytes(objects: Iterable[tuple[str, int]]) -> dict[str, int]:
    """(key, size) of a store holding one job (`<namespace>/<job>/<area>/...`) -> bytes and objects of
    the checkpoint area (objects/, checkpoints/) and of the sinks' output (outputs/), and of everything
    (the rest: fence, attempts, pending markers, event logs)."""
    out = {"total": 0, "checkpoint_area": 0, "objects": 0, "checkpoint_objects": 0, "output_area": 0,
           "output_objects": 0}
    for key, size in objects:
        out["total"] += size
        out["objects"] += 1
        parts = key.split("/", 3)
        area = parts[2] if len(parts) > 3 else ""
        if area in CHECKPOINT_AREAS:
            out["checkpoint_area"] += size
            out["checkpoint_objects"] += 1
        elif area == OUTPUT_AREA:
            out["output_area"] += size
            out["output_objects"] += 1
    return out


def ratio_summary(samples: list[dict[str, Any]], settle_fraction: float = 0.5) -> dict[str, Any]:
    """Checkpoint-area bytes / live bytes of the retained checkpoints: the last sample, and the median
    and max over the samples after `settle_fraction` of the run (once GC has had time to work)."""
    ratios = [(s["t"], s["checkpoint_area"] / s["live_bytes"]) for s in samples if s.get("live_bytes")]
    if not ratios:
        return {"final": None, "median_settled": None, "max_settled": None, "sample_count": len(samples)}
    settled = [r for t, r in ratios if t >= ratios[-1][0] * settle_fraction] or [ratios[-1][1]]
    return {"final": round(ratios[-1][1], 3), "median_settled": round(statistics.median(settled), 3),
            "max_settled": round(max(settled), 3), "sample_count": len(samples)}


def _wait_running(started: Callable[[], bool], alive: Callable[[], bool], what: str, timeout: float = 1800) -> None:
    """The clock starts once the job works (a JVM start under load takes minutes, not part of the figure)."""
    deadline = time.monotonic() + timeout
    while not started():
        if not alive() or time.monotonic() > deadline:
            raise RuntimeError(f"the job never reached {what}")
        time.sleep(1)


def _sample_loop(duration_s: float, sample_s: float, sample: Callable[[float], dict[str, Any]],
                 alive: Callable[[], bool]) -> list[dict[str, Any]]:
    samples: list[dict[str, Any]] = []
    t0 = time.monotonic()
    while (t := time.monotonic() - t0) < duration_s:
        if not alive():
            raise RuntimeError("the job exited during the retention run")
        samples.append({"t": round(t, 1), **sample(t)})
        time.sleep(max(0.0, sample_s - (time.monotonic() - t0 - t)))
    return samples


def sparkpoint(ctx: Context, w: ChurnWorkload, tag: str, duration_s: float, sample_s: float, *, retain: int = 3,
               gc_interval: str = "60s", grace: str = "1m", grace_s: float = 60.0) -> dict[str, Any]:
    # The job's spec.gc.grace is the sidecar's --grace, as the operator sets both.
    job = churn_job(w, name="sp-retention", interval="10s", retain=retain, run_forever=True, gc_grace=grace)
    store_url = f"s3://{ctx.bucket}/{tag}-{uuid.uuid4().hex[:8]}"
    job_file = job.write(ctx.base / f"{tag}.yaml", store_url)
    ref = JobRef("default", job.name)
    p = RuntimeProcess(job_file, ctx.base / f"{tag}-pod", ctx.base / f"{tag}.log", until_batch=None,
                       env=ctx.env).start()
    gc_log = open(ctx.base / f"{tag}-gc.log", "wb")  # noqa: SIM115 (closed below)
    gc = subprocess.Popen([sys.executable, "-m", "sparkpoint.runtime.cli", "gc", "--store", store_url,
                           "--job", str(ref), "--retain", str(retain), "--grace", grace, "--interval", gc_interval,
                           "--json"], stdout=gc_log, stderr=subprocess.STDOUT, env={**os.environ, **ctx.env},
                          start_new_session=True)
    store = open_store(store_url)

    def sample(_: float) -> dict[str, Any]:
        live = gc_pass(store, ref, retain=retain, grace_seconds=grace_s, dry_run=True)
        # the output a pass would keep: what readers and kept checkpoints need, and the newest attempt's
        # uploads ahead of their publish (staged); the rest of outputs/ is what the sidecar collects
        out = output_gc_pass(store, ref, grace_seconds=grace_s, dry_run=True)
        return {**split_bytes((o.key, o.size) for o in store.list("")), "live_bytes": live.live_bytes,
                "checkpoints": len(live.kept_checkpoints),
                "output_needed": out.committed_bytes, "output_needed_objects": out.committed_objects,
                "output_collectable": out.deleted_bytes + out.deleted_entry_bytes,
                "output_collectable_objects": out.deleted_files + len(out.deleted_entries)}
    log = ctx.base / f"{tag}.log"
    try:
        _wait_running(lambda: bool(completed_checkpoints(json_lines(log))), p.alive, "its first checkpoint")
        samples = _sample_loop(duration_s, sample_s, sample, p.alive)
    finally:
        p.kill()
        with contextlib.suppress(ProcessLookupError):
            os.killpg(gc.pid, signal.SIGTERM)
        gc.wait(60)
        gc_log.close()
    return {"setup": "sparkpoint-10s", "retain": retain, "gc_interval": gc_interval, "grace": grace,
            "state_bytes": w.state_bytes, "samples": samples, **ratio_summary(samples)}


def vanilla(ctx: Context, w: ChurnWorkload, tag: str, jar_list: str, duration_s: float, sample_s: float, *,
            min_batches_to_retain: int = 100) -> dict[str, Any]:
    prefix = f"{tag}-{uuid.uuid4().hex[:8]}"
    args = ["--jars", jar_list, "--checkpoint", f"s3a://{ctx.bucket}/{prefix}/checkpoint", "--endpoint",
            ctx.endpoint, "--output", str(ctx.base / f"{tag}-out"), "--query", "churn", "--keys", str(w.keys),
            "--rows", str(w.rows_per_batch), "--batches", str(10**9), "--payload-bytes", str(w.payload_bytes),
            "--trigger", "1s", "--until-batch", "-1", "--changelog",
            "--min-batches-to-retain", str(min_batches_to_retain)]
    with open(ctx.base / f"{tag}.log", "wb") as log:
        proc = subprocess.Popen([sys.executable, str(JOB), *args], stdout=log, stderr=subprocess.STDOUT,
                                env={**os.environ, **ctx.env, "TZ": "UTC"}, start_new_session=True)
    store = open_store(f"s3://{ctx.bucket}/{prefix}")

    def sample(_: float) -> dict[str, Any]:
        listed = split_bytes((o.key, o.size) for o in store.list(""))
        return {**listed, "checkpoint_area": listed["total"]}
    try:
        _wait_running(lambda: any(e.get("event") == "batch" and e["batchId"] >= 1 for e in json_lines(ctx.base / f"{tag}.log")),
                      lambda: proc.poll() is None, "its first steady batch")
        samples = _sample_loop(duration_s, sample_s, sample, lambda: proc.poll() is None)
    finally:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(proc.pid, signal.SIGKILL)
        proc.wait()
    return {"setup": "vanilla-changelog", "min_batches_to_retain": min_batches_to_retain,
            "state_bytes": w.state_bytes, "samples": samples, "final": None}
