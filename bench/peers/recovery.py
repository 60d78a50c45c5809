"""Recovery after a kill (issue 10): SIGKILL a running job mid-stream, restart it, and time the restart
to its first new completed batch. Sparkpoint twice (local: hot dir kept; remote: the pod's disk wiped,
restore from the store), vanilla Spark once (it always restarts from its s3a:// checkpointLocation).
Both runs then go on to the end and their output is compared with the independently computed result
(WindowedJob.expected_rows): nothing lost, nothing duplicated. Flink is not killed here (see render)."""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import signal
import subprocess
import sys
import time
import uuid
from collections import Counter
from datetime import datetime
from pathlib import Path
from typing import Any

from harness.runtime_job import RuntimeProcess, WindowedJob, canonical, wait_until
from sparkpoint.runtime.sink.transactional import read_committed
from sparkpoint.runtime.store import JobRef, open_store

from .common import Context, completed_checkpoints, json_lines

JOB = Path(__file__).with_name("vanilla_job.py")


def batch_end(event: dict[str, Any]) -> float | None:
    """Wall time a completed batch ended: Sparkpoint's log line time, or vanilla's progress
    (trigger start + triggerExecution), else the time the harness printed it."""
    if "timestamp" in event and "durationMs" in event:
        start = datetime.fromisoformat(event["timestamp"].replace("Z", "+00:00")).timestamp()
        return start + event["durationMs"].get("triggerExecution", 0) / 1000
    ts = event.get("ts")
    return float(ts) if isinstance(ts, int | float) else None


def is_batch(event: dict[str, Any]) -> bool:
    return event.get("msg") == "batch completed" or event.get("event") == "batch"


def last_batch(events: list[dict[str, Any]]) -> int:
    return max((e["batchId"] for e in events if is_batch(e)), default=-1)


def seconds_to_first_new_batch(events: list[dict[str, Any]], restarted_at: float, after_batch: int) -> float | None:
    """From the restart (wall time) to the end of the first batch after `after_batch` (the last one the
    killed process completed), or None if there is none yet."""
    for e in events:
        if is_batch(e) and e["batchId"] > after_batch:
            end = batch_end(e)
            return None if end is None else round(end - restarted_at, 2)
    return None


def compare(got: Counter, expected: Counter) -> dict[str, Any]:
    return {"rows": sum(got.values()), "expected_rows": sum(expected.values()), "correct": got == expected,
            "missing": sum((expected - got).values()), "extra_or_duplicate": sum((got - expected).values())}


def windowed_job(rows: int, keys: int, payload_bytes: int, small: bool) -> WindowedJob:
    return WindowedJob(name="sp-recovery", rows_per_batch=rows, keys=keys, total_batches=24 if small else 60,
                       trigger="1s", checkpoint_interval="5s" if small else "10s",
                       extra_args={"payload_bytes": payload_bytes} if payload_bytes else {})


def await_new_batch(log: Path, restarted_at: float, after: int, alive, timeout: float) -> float:  # type: ignore[no-untyped-def]
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        got = seconds_to_first_new_batch(json_lines(log), restarted_at, after)
        if got is not None:
            return got
        if not alive():
            raise RuntimeError(f"restarted job exited before a new batch; see {log}")
        time.sleep(0.2)
    raise TimeoutError(f"no new batch {timeout:.0f} s after the restart; see {log}")


def sparkpoint(ctx: Context, job: WindowedJob, tag: str, timeout: float = 1800) -> dict[str, Any]:
    store_url = f"s3://{ctx.bucket}/{tag}-{uuid.uuid4().hex[:8]}"
    job_file = job.write(ctx.base / f"{tag}.yaml", store_url)
    pod = ctx.base / f"{tag}-pod"
    out: dict[str, Any] = {"setup": "sparkpoint", "latency_ms": ctx.latency_ms, "restarts": []}

    def checkpoints(log: Path) -> int:
        return len(completed_checkpoints(json_lines(log)))

    log = ctx.base / f"{tag}-0.log"
    p = RuntimeProcess(job_file, pod, log, until_batch=job.until_batch, env=ctx.env).start()
    for n, source in enumerate(("local", "remote"), start=1):
        try:
            wait_until(lambda log=log: checkpoints(log) >= 1 and last_batch(json_lines(log)) >= 4, timeout,
                       "a checkpoint and 4 batches", p)
        except BaseException:
            p.kill()
            raise
        p.kill()
        killed_after = last_batch(json_lines(log))
        if source == "remote":
            shutil.rmtree(pod)  # a new pod: nothing local survives
        log = ctx.base / f"{tag}-{n}.log"
        restarted_at = time.time()
        p = RuntimeProcess(job_file, pod, log, until_batch=job.until_batch, env=ctx.env).start()
        try:
            first = await_new_batch(log, restarted_at, killed_after, p.alive, timeout)
        except BaseException:
            p.kill()
            raise
        info = p.restore_info() or {}
        out["restarts"].append({"kind": source, "restored_from": info.get("restore"),
                                "killed_after_batch": killed_after, "resumed_after_batch": info.get("batch"),
                                "restore_seconds": info.get("restore_seconds"), "first_new_batch_s": first})
    code = p.wait(timeout)
    if code != 0:
        raise RuntimeError(f"{tag}: recovered run exited {code}; see {log}")
    rows = canonical(read_committed(open_store(store_url), JobRef("default", job.name)))
    out.update(compare(rows, job.expected_rows()))
    return out


def vanilla(ctx: Context, job: WindowedJob, tag: str, jar_list: str, flags: list[str],
            timeout: float = 1800) -> dict[str, Any]:
    output = ctx.base / f"{tag}-out"
    args = ["--jars", jar_list, "--checkpoint", f"s3a://{ctx.bucket}/{tag}-{uuid.uuid4().hex[:8]}/checkpoint",
            "--endpoint", ctx.endpoint, "--output", str(output), "--rows", str(job.rows_per_batch),
            "--keys", str(job.keys), "--batches", str(job.total_batches),
            "--payload-bytes", str(job.extra_args.get("payload_bytes", 0)), "--trigger", job.trigger,
            "--until-batch", str(job.until_batch), *flags]
    env = {**os.environ, **ctx.env, "TZ": "UTC"}

    def start(log: Path) -> subprocess.Popen[bytes]:
        with open(log, "ab") as f:
            return subprocess.Popen([sys.executable, str(JOB), *args], stdout=f, stderr=subprocess.STDOUT, env=env,
                                    start_new_session=True)

    def kill(proc: subprocess.Popen[bytes]) -> None:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(proc.pid, signal.SIGKILL)
        proc.wait()

    log = ctx.base / f"{tag}-0.log"
    proc = start(log)
    try:
        deadline = time.monotonic() + timeout
        while last_batch(json_lines(log)) < 5:
            if proc.poll() is not None or time.monotonic() > deadline:
                raise RuntimeError(f"{tag}: no 5 batches before the kill; see {log}")
            time.sleep(0.2)
    finally:
        kill(proc)
    killed_after = last_batch(json_lines(log))
    log = ctx.base / f"{tag}-1.log"
    restarted_at = time.time()
    proc = start(log)
    try:
        first = await_new_batch(log, restarted_at, killed_after, lambda: proc.poll() is None, timeout)
        code = proc.wait(timeout)
    except BaseException:
        kill(proc)
        raise
    if code != 0:
        raise RuntimeError(f"{tag}: recovered run exited {code}; see {log}")
    rows = [json.loads(line) for f in sorted(output.glob("batch-*/part-*.json")) for line in f.read_text().splitlines()
            if line.strip()]
    out = {"setup": "vanilla" + ("-changelog" if "--changelog" in flags else ""), "latency_ms": ctx.latency_ms,
           "restarts": [{"kind": "remote (s3a checkpointLocation)", "killed_after_batch": killed_after,
                         "first_new_batch_s": first}]}
    out.update(compare(canonical(rows), job.expected_rows()))
    return out


def latest_flink_checkpoint(keys: list[str]) -> str | None:
    """The newest retained Flink checkpoint (.../chk-N, the one with the highest N that has its
    _metadata) among a listing of the checkpoint dir's keys."""
    best: tuple[int, str] | None = None
    for key in keys:
        parts = key.split("/")
        if parts[-1] == "_metadata" and len(parts) >= 2 and parts[-2].startswith("chk-") and parts[-2][4:].isdigit():
            n = int(parts[-2][4:])
            if best is None or n > best[0]:
                best = (n, "/".join(parts[:-1]))
    return best[1] if best else None


def first_flink_records(events: list[dict[str, Any]], restarted_at: float) -> float | None:
    """Flink has no micro-batches: from the restart to the first progress line of the restored job
    that shows records flowing again."""
    for e in events:
        if e.get("event") == "progress" and e.get("state") == "RUNNING" and e.get("records", 0) > 0:
            return round(e["ts"] - restarted_at, 2)
    return None


def flink(ctx: Context, python: str, plugins: str, job_args: list[str], tag: str, timeout: float = 1800) -> dict[str, Any]:
    """Kill the Flink MiniCluster (SIGKILL, whole group) after its first completed checkpoint to the
    store, restart from the newest retained checkpoint (execution.state-recovery.path) and time it to
    records flowing again. No output check: Flink's sink here is a blackhole."""
    prefix = f"{tag}-{uuid.uuid4().hex[:8]}"
    base_args = [*job_args, "--checkpoint", f"s3://{ctx.bucket}/{prefix}", "--endpoint", ctx.endpoint,
                 "--checkpoints", str(10**6), "--timeout", str(int(timeout))]
    env = {**os.environ, **ctx.env, "FLINK_PLUGINS_DIR": plugins, "TZ": "UTC"}

    def start(log: Path, extra: list[str]) -> subprocess.Popen[bytes]:
        with open(log, "ab") as f:
            return subprocess.Popen([python, str(Path(__file__).with_name("flink_job.py")), *base_args, *extra],
                                    stdout=f, stderr=subprocess.STDOUT, env=env, start_new_session=True)

    def kill(proc: subprocess.Popen[bytes]) -> None:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(proc.pid, signal.SIGKILL)
        proc.wait()

    store = open_store(f"s3://{ctx.bucket}/{prefix}")
    log = ctx.base / f"{tag}-0.log"
    proc = start(log, [])
    try:
        deadline = time.monotonic() + timeout
        while not any(e.get("event") == "progress" and e.get("completed", 0) >= 1 for e in json_lines(log)):
            if proc.poll() is not None or time.monotonic() > deadline:
                raise RuntimeError(f"{tag}: no completed Flink checkpoint before the kill; see {log}")
            time.sleep(0.5)
    finally:
        kill(proc)
    chk = latest_flink_checkpoint([o.key for o in store.list("")])
    if chk is None:
        raise RuntimeError(f"{tag}: no retained chk-N/_metadata under s3://{ctx.bucket}/{prefix}")
    log = ctx.base / f"{tag}-1.log"
    restarted_at = time.time()
    proc = start(log, ["--restore-from", f"s3://{ctx.bucket}/{prefix}/{chk}"])
    try:
        deadline = time.monotonic() + timeout
        while (first := first_flink_records(json_lines(log), restarted_at)) is None:
            if proc.poll() is not None or time.monotonic() > deadline:
                raise RuntimeError(f"{tag}: the restored Flink job never ran; see {log}")
            time.sleep(0.5)
        restored = max((e.get("restored", 0) for e in json_lines(log) if e.get("event") == "progress"), default=0)
    finally:
        kill(proc)
    return {"setup": "flink", "latency_ms": ctx.latency_ms, "correct": None, "rows": None,
            "restarts": [{"kind": f"remote ({chk.rsplit('/', 1)[-1]})", "restored_from": "store" if restored else
                          "NOT restored (REST reports 0 restores)", "killed_after_batch": "n/a",
                          "first_new_batch_s": first}]}
