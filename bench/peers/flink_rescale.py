"""Flink's way to change a stateful job's parallelism, for bench/rescale_bench.py --flink: grow keyed
state (flink_job.py --query churn: one row of `payload` bytes per key, RocksDB, the same MinIO) at
parallelism 4, stop with a savepoint, restore it at 2, stop with a savepoint again, restore at 6.
Per restore: the process start to every task RUNNING (Flink redistributes key groups while the tasks
initialize), the first checkpoint at the new parallelism, and the stop-with-savepoint before it."""

from __future__ import annotations

import os
import subprocess
import time
import uuid
from pathlib import Path
from typing import Any

from . import flink
from .common import json_lines

ROWS = 20000  # key rows per second after the fill (the fill writes every key once, in the first second)


def _run(base: Path, env: dict[str, str], tag: str, args: list[str]) -> dict[str, Any]:
    d = flink.flink_dir()
    assert d is not None, "scripts/ensure-flink.sh has not installed Flink"
    log = base / f"flink-{tag}.log"
    began, began_ts = time.monotonic(), time.time()
    with open(log, "wb") as out:
        code = subprocess.call([str(d / "venv" / "bin" / "python"), str(flink.JOB), *args], stdout=out,
                               stderr=subprocess.STDOUT, timeout=7200,
                               env={**os.environ, **env, "FLINK_PLUGINS_DIR": str(d / "plugins"), "TZ": "UTC"})
    wall = time.monotonic() - began
    events = json_lines(log)
    if code != 0:
        raise RuntimeError(f"flink {tag} exited {code}; see {log}")
    first = {e["event"]: e for e in reversed(events) if "event" in e}  # the first of each kind
    savepoint = first.get("savepoint")
    if savepoint is None:
        raise RuntimeError(f"flink {tag}: no savepoint; see {log}")
    cps = sorted((e for e in events if e.get("event") == "checkpoint"), key=lambda e: e["id"])
    return {"tag": tag, "wall_seconds": round(wall, 1), "submitted_seconds": first.get("started", {}).get("seconds"),
            "tasks_running_seconds": first.get("tasks_running", {}).get("seconds"),
            "process_to_running_seconds": round(first["tasks_running"]["ts"] - began_ts, 1)
            if "tasks_running" in first else None, "savepoint": savepoint,
            "first_checkpoint": cps[0] if cps else None, "log": str(log)}


def run(base: Path, env: dict[str, str], endpoint: str, bucket: str, keys: int, payload_bytes: int,
        steps: tuple[int, ...] = (4, 2, 6)) -> list[dict[str, Any]]:
    """Grow at steps[0], then each next parallelism restores the previous stop's savepoint."""
    prefix = f"s3://{bucket}/flink-rescale-{uuid.uuid4().hex[:8]}"
    common = ["--query", "churn", "--checkpoint", f"{prefix}/checkpoints", "--endpoint", endpoint,
              "--rows", str(ROWS), "--keys", str(keys), "--batches", "3", "--payload-bytes", str(payload_bytes),
              "--interval", "30s", "--timeout", "3600", "--checkpoints", "1",
              "--stop-with-savepoint", f"{prefix}/savepoints"]
    runs = [_run(base, env, f"p{steps[0]}", [*common, "--parallelism", str(steps[0])])]
    for parallelism in steps[1:]:
        runs.append(_run(base, env, f"p{parallelism}", [
            *common, "--parallelism", str(parallelism), "--restore-from", runs[-1]["savepoint"]["path"],
            "--restored-only"]))
        runs[-1]["from"] = runs[-2]["tag"]
    return runs
