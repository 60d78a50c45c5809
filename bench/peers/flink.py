"""Flink, the design Sparkpoint follows: PyFlink (local MiniCluster, own venv from
scripts/ensure-flink.sh) runs the same keyed windowed aggregation with the RocksDB state backend and
incremental checkpoints to the same MinIO (s3:// through the flink-s3-fs-hadoop plugin); and the
key-churn workload (run_churn)."""

from __future__ import annotations

import os
import shlex
import signal
import subprocess
import uuid
from pathlib import Path
from typing import Any

from . import churn
from .common import Context, RunResult, Workload, json_lines

REPO = Path(__file__).resolve().parents[2]
JOB = Path(__file__).with_name("flink_job.py")
CHECKPOINT_INTERVAL = "10s"


def flink_dir() -> Path | None:
    versions = dict(line.split("=", 1) for line in (REPO / "versions.env").read_text().splitlines()
                    if "=" in line and not line.startswith("#"))
    cache = Path(os.environ.get("SPARKPOINT_CACHE", Path.home() / ".cache" / "sparkpoint"))
    d = cache / f"flink-{versions['FLINK_VERSION']}"
    return d if (d / "venv" / ".installed").exists() else None


def unavailable() -> str | None:
    """Why Flink cannot run here, or None. Fetches it (scripts/ensure-flink.sh) if it is missing."""
    if flink_dir() is None:
        done = subprocess.run([str(REPO / "scripts" / "ensure-flink.sh")], capture_output=True, text=True)
        if done.returncode != 0:
            return f"scripts/ensure-flink.sh failed: {done.stderr.strip()[-300:]}"
    if not JOB.exists():
        return "bench/peers/flink_job.py is not written yet"
    return None


def run(w: Workload, ctx: Context, tag: str, timeout_s: int = 600) -> RunResult:
    """To the shared MinIO (s3://); if that yields no checkpoint, once more to local disk, and the
    result says so (the issue allows the fallback if the S3 plugin cannot be had)."""
    prefix = f"{tag}-{uuid.uuid4().hex[:8]}"
    try:
        return _run(w, ctx, tag, f"s3://{ctx.bucket}/{prefix}", timeout_s)
    except RuntimeError as exc:
        s3_error = str(exc)[:200]
    local = ctx.base / f"{tag}-flink-checkpoints"
    r = _run(w, ctx, f"{tag}-local", local.as_uri(), timeout_s)
    r.note += f"; LOCAL DISK fallback (checkpoints to {local}, not MinIO): the S3 run failed: {s3_error}"
    return r


def _run(w: Workload, ctx: Context, tag: str, target: str, timeout_s: int) -> RunResult:
    d = flink_dir()
    assert d is not None
    args = ["--checkpoint", target, "--endpoint", ctx.endpoint,
            "--rows", str(w.rows_per_batch), "--keys", str(w.keys), "--batches", str(w.batches),
            "--payload-bytes", str(w.payload_bytes), "--interval", CHECKPOINT_INTERVAL, "--timeout", str(timeout_s),
            "--parallelism", "1"]
    log = ctx.base / f"{tag}.log"
    env = {**os.environ, **ctx.env, "FLINK_PLUGINS_DIR": str(d / "plugins"), "TZ": "UTC"}
    with open(log, "wb") as out:
        code = subprocess.call([str(d / "venv" / "bin" / "python"), str(JOB), *args], stdout=out,
                               stderr=subprocess.STDOUT, env=env, timeout=3600)
    if code != 0:
        raise RuntimeError(f"{tag} exited {code}; see {log}")
    events = json_lines(log)
    done = next((e for e in events if e.get("event") == "finished"), None)
    if done is None:
        raise RuntimeError(f"Flink job printed no result; see {log}")
    cps = [{"bytes": c["fullSize"], "new_bytes": c["checkpointedSize"], "sync_s": c["syncMs"] / 1000,
            "async_s": c["asyncMs"] / 1000} for c in events if c.get("event") == "checkpoint"]
    if not done["rows_per_s"] or not cps:
        raise RuntimeError(f"Flink processed {done['rows']} rows and completed {len(cps)} checkpoints in "
                           f"{done['seconds']:.0f} s (job {done.get('state', '?')}, submitted after "
                           f"{next((e['seconds'] for e in events if e.get('event') == 'started'), '?')} s); see {log}")
    # No micro-batches in Flink: one "batch" = rows_per_batch rows at the sustained rate.
    per_batch = w.rows_per_batch / done["rows_per_s"]
    return RunResult(setup="flink", latency_ms=ctx.latency_ms, durations=[per_batch],
                     active_seconds=done["seconds"], checkpoints=cps,
                     command=f"FLINK_PLUGINS_DIR=... {d}/venv/bin/python bench/peers/flink_job.py " + shlex.join(args),
                     note="sustained rows/s of a bounded run; no micro-batches")


# The key-churn figure (churn.py's workload, flink_job.py --query churn). Flink has no micro-batches:
# a checkpoint's place in the batch schedule comes from the aggregation's input record count, sampled
# five times a second, at its trigger time. The count lags the source by the network buffer timeout
# (100 ms) and the REST metric cache (100 ms), hence LAG_S; with samples 0.2 s apart and one batch a
# second, a checkpoint lands one batch early about one time in five.
LAG_S = 0.2


def count_at(samples: list[tuple[float, int]], t: float) -> int:
    """Records the last (ts, records) sample at or before wall time t showed (the first sample's if none):
    the count moves in steps, one burst per batch, so no interpolation between samples."""
    seen = [c for ts, c in sorted(samples) if ts <= t]
    return seen[-1] if seen else (min(samples)[1] if samples else 0)


def batch_at(records: int, w: churn.ChurnWorkload) -> int:
    """The last batch a checkpoint holds, from the key rows read before it: -1 while the fill (one row per
    key) is not all in, else the steady batches on top of it (at most the last one)."""
    if records < w.keys:
        return -1
    return min(w.batches - 1, round((records - w.keys) / w.rows_per_batch))


def churn_checkpoints(events: list[dict[str, Any]], w: churn.ChurnWorkload) -> list[dict[str, Any]]:
    """flink_job.py's JSON lines -> the checkpoints in the shape sparkpoint_setup.run_churn gives
    (new_bytes = checkpointed_size: what the incremental checkpoint uploaded; bytes = full state size)."""
    samples = [(e["ts"], e["records"]) for e in events if e.get("event") == "progress"]
    out = []
    for c in sorted((e for e in events if e.get("event") == "checkpoint"), key=lambda e: e["id"]):
        out.append({"id": c["id"], "batch_id": batch_at(count_at(samples, c["triggerMs"] / 1000 + LAG_S), w),
                    "new_bytes": c["checkpointedSize"], "bytes": c["fullSize"], "sync_s": c["syncMs"] / 1000,
                    "async_s": c["asyncMs"] / 1000, "duration_s": c["durationMs"] / 1000})
    return out


def churn_steady(cps: list[dict[str, Any]], w: churn.ChurnWorkload) -> list[dict[str, Any]]:
    """As for Sparkpoint: the first checkpoint that holds the whole fill is left out (it carries the
    fill), and so is any taken before it (mid-fill: what it missed lands in the next one)."""
    return churn.steady([c for c in cps if c["batch_id"] >= 0], w)


def run_churn(w: churn.ChurnWorkload, ctx: Context, tag: str, python: str, plugins: str,
              timeout_s: int = 3600) -> dict[str, Any]:
    """Flink (RocksDB, incremental checkpoints to the same MinIO every churn.CHECKPOINT_INTERVAL_S) on
    the churn workload: uploaded vs changed bytes and sync/async duration per checkpoint."""
    prefix = f"{tag}-{uuid.uuid4().hex[:8]}"
    args = ["--query", "churn", "--checkpoint", f"s3://{ctx.bucket}/{prefix}", "--endpoint", ctx.endpoint,
            "--rows", str(w.rows_per_batch), "--keys", str(w.keys), "--batches", str(w.batches),
            "--payload-bytes", str(w.payload_bytes), "--trigger-ms", churn.trigger(w).removesuffix("ms"),
            "--interval", f"{churn.CHECKPOINT_INTERVAL_S}s", "--timeout", str(timeout_s), "--parallelism", str(w.partitions)]
    log = ctx.base / f"{tag}.log"
    env = {**os.environ, **ctx.env, "FLINK_PLUGINS_DIR": plugins, "TZ": "UTC"}
    with open(log, "wb") as out:  # own session: a timeout takes the gateway JVM down too
        proc = subprocess.Popen([python, str(JOB), *args], stdout=out, stderr=subprocess.STDOUT, env=env,
                                start_new_session=True)
    try:
        code = proc.wait(timeout_s + 600)
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()
    if code != 0:
        raise RuntimeError(f"{tag} exited {code}; see {log}")
    cps = churn_checkpoints(json_lines(log), w)
    if not cps:
        raise RuntimeError(f"{tag}: Flink completed no checkpoint; see {log}")
    return {"setup": "flink", "size": w.size, "churn": w.churn, "state_bytes": w.state_bytes,
            "checkpoints": cps, "steady": churn_steady(cps, w),
            "command": f"FLINK_PLUGINS_DIR=... {python} bench/peers/flink_job.py " + shlex.join(args)}
