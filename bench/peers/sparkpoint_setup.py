"""Sparkpoint setups, each `sparkpoint run` in a fresh process: incremental checkpoints (10 s, 60 s),
full checkpoints (every file uploaded every time, `sparkpoint run --full-upload`) and the floor
(hot dir only, no durable checkpoints)."""

from __future__ import annotations

import shlex
import shutil
import uuid
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

from harness.runtime_job import RuntimeProcess, WindowedJob

from . import churn
from .common import Context, RunResult, Workload, batch_phases, completed_checkpoints, json_lines

HERE = Path(__file__).resolve().parent

SETUPS = {  # name -> (checkpoint interval, full upload)
    "floor": ("24h", False),  # no checkpoint within a run (0s is rejected by the spec)
    "sparkpoint-10s": ("10s", False),
    "sparkpoint-10s-nice10": ("10s", False),  # the async phase at nice 10 (the default before; an A/B)
    # Spark's live UI and event logs on, as in a pod (issue 30; an A/B with sparkpoint-10s, where both are off)
    "sparkpoint-10s-ui": ("10s", False),
    # the two halves of -ui apart (ui_bench.py --split): where its cost goes
    "sparkpoint-10s-uionly": ("10s", False),
    "sparkpoint-10s-eventlog": ("10s", False),
    "sparkpoint-60s": ("60s", False),
    "sparkpoint-full-10s": ("10s", True),
}


FLOOR_STAGED_BUDGET = "64Gi"
UI_ENV = "SPARKPOINT_SPARK_UI_PORT"  # runtime/spec/rules.py: the operator sets it in every pod with the UI on


def run(name: str, w: Workload, ctx: Context, tag: str) -> RunResult:
    interval, full = SETUPS[name]
    job = WindowedJob(name=name.replace("sparkpoint-", "sp-"), rows_per_batch=w.rows_per_batch, keys=w.keys,
                      total_batches=w.batches, trigger=w.trigger, checkpoint_interval=interval,
                      extra_args={"payload_bytes": w.payload_bytes} if w.payload_bytes else {})
    store = f"s3://{ctx.bucket}/{tag}-{uuid.uuid4().hex[:8]}"
    job_file = job.write(ctx.base / f"{tag}.yaml", store)
    # Event logs are on by default (spec.spark.eventLog); the figures before issue 30 ran without
    # them, so only the -ui setup, the pod's defaults, writes and uploads them.
    doc = yaml.safe_load(job_file.read_text())
    doc["spec"]["spark"]["eventLog"] = {"enabled": name.endswith(("-ui", "-eventlog"))}
    job_file.write_text(yaml.safe_dump(doc, sort_keys=False))
    log = ctx.base / f"{tag}.log"
    env = {**ctx.env,
           # The floor never publishes its output: its staged output must not fill the sink's budget,
           # which would take a checkpoint (a large workload stages more than the 1 GiB default).
           **({"SPARKPOINT_SINK_STAGED_BUDGET": FLOOR_STAGED_BUDGET} if name == "floor" else {}),
           **({"SPARKPOINT_CHECKPOINT_NICE": "10"} if name.endswith("-nice10") else {}),
           **({UI_ENV: "0"} if name.endswith(("-ui", "-uionly")) else {})}  # port 0: Spark picks a free one
    pod = ctx.base / f"{tag}-pod"
    p = RuntimeProcess(job_file, pod, log, until_batch=w.until_batch, env=env, full_upload=full).start()
    try:
        code = p.wait(3600)
    except BaseException:  # interrupted: take the JVM down with us
        p.kill()
        raise
    finally:
        shutil.rmtree(pod, ignore_errors=True)  # the log holds the figures; the floor's output is GBs
    if code != 0:
        raise RuntimeError(f"{tag} exited {code}; see {log}")
    events = json_lines(log)
    batches = [e for e in events if e.get("msg") == "batch completed" and e["batchId"] >= w.warmup_batches
               and e["batchId"] < w.batches]
    cps = [c for c in completed_checkpoints(events) if c["trigger"] in ("interval", "sink-budget")]
    command = (f"{'SPARKPOINT_CHECKPOINT_NICE=10 ' if name.endswith('-nice10') else ''}"
               f"{UI_ENV + '=0 ' if name.endswith(('-ui', '-uionly')) else ''}"
               f"{'SPARKPOINT_SINK_STAGED_BUDGET=' + FLOOR_STAGED_BUDGET + ' ' if name == 'floor' else ''}"
               "python -m sparkpoint.runtime.cli run "
               f"{shlex.quote(job_file.name)} --until-batch {w.until_batch}{' --full-upload' if full else ''}"
               f"  # interval {interval}")
    return RunResult(
        setup=name, latency_ms=ctx.latency_ms, durations=[b["durationSeconds"] for b in batches],
        active_seconds=_span(batches), command=command, window=_window(batches),
        phases=batch_phases([{k: v * 1000 for k, v in b["phaseSeconds"].items()} for b in batches])
        if all("phaseSeconds" in b for b in batches) else {},
        checkpoints=[{"bytes": c.get("bytes", 0), "new_bytes": c.get("newBytes", 0),
                      "sync_s": c["syncSeconds"], "async_s": c["asyncSeconds"]} for c in cps])


def _window(batches: list[dict]) -> list[float]:
    """Wall times of the first measured batch's start and the last one's end (the log's `ts` is when
    a batch's completion was logged)."""
    ts = [b.get("ts") for b in batches]
    if len(batches) < 2 or not all(isinstance(t, int | float) for t in ts):
        return []
    return [float(ts[0]) - batches[0]["durationSeconds"], float(ts[-1])]


def _span(batches: list[dict]) -> float:
    ts = [b.get("time") or b.get("ts") for b in batches]
    if len(batches) < 2 or not all(isinstance(t, int | float) for t in ts):
        return sum(b["durationSeconds"] for b in batches)
    return float(ts[-1] - ts[0])


@dataclass
class ChurnJob:
    """A StreamingJob running churn_query.py (upsert sink: update mode, idempotent by key)."""
    name: str
    w: churn.ChurnWorkload
    interval: str
    retain: int = 3
    run_forever: bool = False
    gc_grace: str = "1m"  # spec.gc.grace (its default)
    spark_conf: dict[str, str] = field(default_factory=dict)  # spec.spark.conf (e.g. a snapshot interval)

    @property
    def until_batch(self) -> int | None:
        return None if self.run_forever else self.w.batches + 1

    def spec(self, store_url: str) -> dict[str, Any]:
        w = self.w
        args = {"keys": w.keys, "rows_per_batch": w.rows_per_batch, "payload_bytes": w.payload_bytes,
                "total_batches": 10**9 if self.run_forever else w.batches}
        return {"apiVersion": "sparkpoint.dev/v1alpha1", "kind": "StreamingJob",
                "metadata": {"name": self.name, "namespace": "default"},
                "spec": {"job": {"entrypoint": "churn_query:build", "args": args, "pythonPath": [str(HERE)],
                                 "triggerInterval": churn.trigger(w),
                                 "sink": {"kind": "upsert", "keyColumns": ["key"]}},
                         # Event logs off, as in the churn figures measured before issue 30.
                         "spark": {"master": "local[2]", "shufflePartitions": w.partitions,
                                   "eventLog": {"enabled": False},
                                   **({"conf": self.spark_conf} if self.spark_conf else {})},
                         "checkpoint": {"interval": self.interval, "retain": self.retain,
                                        "storage": {"url": store_url}},
                         "gc": {"grace": self.gc_grace}}}

    def write(self, path: Path, store_url: str) -> Path:
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(yaml.safe_dump(self.spec(store_url), sort_keys=False))
        return path


def churn_job(w: churn.ChurnWorkload, *, name: str, interval: str, retain: int = 3,
              run_forever: bool = False, gc_grace: str = "1m", spark_conf: dict[str, str] | None = None) -> ChurnJob:
    return ChurnJob(name=name, w=w, interval=interval, retain=retain, run_forever=run_forever, gc_grace=gc_grace,
                    spark_conf=dict(spark_conf or {}))


def run_churn(w: churn.ChurnWorkload, ctx: Context, tag: str, *, setup: str = "sparkpoint-10s",
              env: dict[str, str] | None = None) -> dict[str, Any]:
    """Sparkpoint incremental (10 s) on the churn query: uploaded vs changed bytes per checkpoint, and
    the durations of the batches between the fill's checkpoint and the last one. `env` adds to the
    runtime's environment (e.g. SPARKPOINT_CHECKPOINT_NICE for an A/B of it)."""
    job = churn_job(w, name="sp-churn", interval=f"{churn.CHECKPOINT_INTERVAL_S}s")
    store = f"s3://{ctx.bucket}/{tag}-{uuid.uuid4().hex[:8]}"
    job_file = job.write(ctx.base / f"{tag}.yaml", store)
    log = ctx.base / f"{tag}.log"
    p = RuntimeProcess(job_file, ctx.base / f"{tag}-pod", log, until_batch=job.until_batch,
                       env={**ctx.env, **(env or {})}).start()
    try:
        code = p.wait(7200)
    except BaseException:
        p.kill()
        raise
    if code != 0:
        raise RuntimeError(f"{tag} exited {code}; see {log}")
    events = json_lines(log)
    cps = [c for c in completed_checkpoints(events) if c.get("batchId") is not None]
    cps = [{"batch_id": c["batchId"], "new_bytes": c.get("newBytes", 0), "bytes": c.get("bytes", 0),
            "sync_s": c["syncSeconds"], "async_s": c["asyncSeconds"],
            **({"objects": c["uploadedObjects"]} if "uploadedObjects" in c else {})} for c in cps]
    env_text = "".join(f"{k}={shlex.quote(v)} " for k, v in (env or {}).items())
    return {"setup": setup, "size": w.size, "churn": w.churn, "state_bytes": w.state_bytes,
            "checkpoints": cps, "steady": churn.steady(cps, w), "batch_durations": steady_batches(events, cps),
            "command": f"{env_text}python -m sparkpoint.runtime.cli run {shlex.quote(job_file.name)} "
                       f"--until-batch {job.until_batch}"}


def steady_batches(events: list[dict[str, Any]], cps: list[dict[str, Any]]) -> list[float]:
    """Durations of the batches after the fill's checkpoint, up to the last checkpoint's batch: the
    ones the steady checkpoints ran beside."""
    if len(cps) < 2:
        return []
    first, last = cps[0]["batch_id"], cps[-1]["batch_id"]
    return [e["durationSeconds"] for e in events
            if e.get("msg") == "batch completed" and first < e["batchId"] <= last]
