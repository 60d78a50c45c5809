"""The runtime as a child process (`sparkpoint run` in its own process group) and the demo's job:
a windowed aggregation over a deterministic source with an independent oracle of its output.
Shared by `make demo` (harness/demo.py), the runtime tests, the e2e chaos run and the benchmarks."""

from __future__ import annotations

import calendar
import contextlib
import json
import os
import re
import signal
import subprocess
import sys
import time
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

from sparkpoint.runtime.checkpoint.freeze import latest_committed_batch
from sparkpoint.runtime.store import JobRef, open_store

from . import polling

REPO = Path(__file__).resolve().parents[1]
EXAMPLES = REPO / "examples"


# --- the job and its independent oracle ------------------------------------------------------------
@dataclass
class WindowedJob:
    name: str = "demo"
    rows_per_batch: int = 20000
    keys: int = 20000
    total_batches: int = 36
    window_seconds: int = 10
    watermark_seconds: int = 5
    trigger: str = "1s"
    checkpoint_interval: str = "5s"
    slow_seconds: float = 0.0
    extra_args: dict[str, Any] = field(default_factory=dict)

    @property
    def until_batch(self) -> int:
        return self.total_batches + 3  # a few empty batches move the watermark past the last window

    def spec(self, store_url: str) -> dict[str, Any]:
        args = {"rows_per_batch": self.rows_per_batch, "keys": self.keys, "total_batches": self.total_batches,
                "window": f"{self.window_seconds} seconds", "watermark": f"{self.watermark_seconds} seconds",
                **({"slow_seconds": self.slow_seconds} if self.slow_seconds else {}), **self.extra_args}
        return {
            "apiVersion": "sparkpoint.dev/v1alpha1", "kind": "StreamingJob",
            "metadata": {"name": self.name, "namespace": "default"},
            "spec": {"job": {"entrypoint": "sparkpoint.examples.windowed_aggregation:build",
                             "args": args, "triggerInterval": self.trigger},
                     "spark": {"master": "local[2]"},
                     "checkpoint": {"interval": self.checkpoint_interval, "storage": {"url": store_url}}},
        }

    def write(self, path: Path, store_url: str) -> Path:
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(yaml.safe_dump(self.spec(store_url), sort_keys=False))
        return path

    def expected_rows(self) -> Counter:
        """The failure-free output computed in Python (rate-micro-batch: batch b has rows
        b*R .. b*R+R-1, all at event time b seconds)."""
        r, w = self.rows_per_batch, self.window_seconds
        last_event = self.total_batches - 1
        watermark = last_event - self.watermark_seconds
        counts: dict[tuple[int, int], list[int]] = {}
        for b in range(self.total_batches):
            start = (b // w) * w
            if start + w > watermark:
                continue  # window still open at the end: never emitted in append mode
            for v in range(b * r, b * r + r):
                acc = counts.setdefault((start, v % self.keys), [0, 0])
                acc[0] += 1
                acc[1] += v
        return Counter(json.dumps([s, k, n, total]) for (s, k), (n, total) in counts.items())


def canonical(rows: list[dict[str, Any]]) -> Counter:
    """Committed sink rows -> comparable multiset (window start in seconds from the first window)."""
    out: Counter[str] = Counter()
    for row in rows:
        seconds = calendar.timegm(time.strptime(row["window"]["start"][:19], "%Y-%m-%dT%H:%M:%S"))
        out[json.dumps([seconds, row["key"], row["events"], row["value_sum"]])] += 1
    return out


# --- running the runtime as a child process --------------------------------------------------------
class RuntimeProcess:
    """`sparkpoint run` in its own process group (so SIGKILL takes the Spark JVM down with it)."""

    def __init__(self, job_file: Path, work_dir: Path, log_path: Path, *, until_batch: int | None,
                 env: dict[str, str] | None = None, port: int = 0, full_upload: bool = False,
                 extra_args: tuple[str, ...] = (), stdout_path: Path | None = None):
        self.job_file, self.work_dir, self.log_path = job_file, work_dir, log_path
        self.stdout_path = stdout_path  # stdout apart from the log (the console sink's rows); else both in the log
        self.extra_args = extra_args  # more `sparkpoint run` flags (e.g. a longer --grace)
        self.until_batch, self.env, self.port = until_batch, env or {}, port
        self.full_upload = full_upload  # the benchmarks' non-incremental baseline (sparkpoint run --full-upload)
        self.proc: subprocess.Popen[bytes] | None = None
        self.started = 0.0

    def start(self) -> RuntimeProcess:
        cmd = [sys.executable, "-m", "sparkpoint.runtime.cli", "run", str(self.job_file),
               "--work-dir", str(self.work_dir), "--port", str(self.port)]
        if self.until_batch is not None:
            cmd += ["--until-batch", str(self.until_batch)]
        if self.full_upload:
            cmd.append("--full-upload")
        cmd += self.extra_args
        self.log_path.parent.mkdir(parents=True, exist_ok=True)
        log = open(self.log_path, "ab")  # noqa: SIM115 (the child owns it)
        out = open(self.stdout_path, "ab") if self.stdout_path else None  # noqa: SIM115
        self.started = time.monotonic()
        self.proc = subprocess.Popen(cmd, stdout=out or log, stderr=log if out else subprocess.STDOUT,
                                     start_new_session=True, env={**os.environ, "TZ": "UTC", **self.env})
        log.close()
        if out:
            out.close()
        return self

    def alive(self) -> bool:
        return self.proc is not None and self.proc.poll() is None

    def kill(self) -> None:
        """SIGKILL the whole group: driver and JVM die at once, as in a container kill."""
        if self.proc is None:
            return
        with contextlib.suppress(ProcessLookupError):
            os.killpg(self.proc.pid, signal.SIGKILL)
        self.proc.wait()

    def wait(self, timeout: float) -> int:
        assert self.proc is not None
        try:
            return self.proc.wait(timeout)
        except subprocess.TimeoutExpired:
            self.kill()
            raise

    def restore_info(self) -> dict[str, Any] | None:
        """The last `query running` log line of this process's log (restore source and seconds)."""
        found = None
        for line in self.log_path.read_text(errors="replace").splitlines():
            if line.startswith("{") and '"query running"' in line:
                with contextlib.suppress(ValueError):
                    found = json.loads(line)
        return found


def wait_until(predicate: Callable[[], object], timeout: float, what: str,
               proc: RuntimeProcess | None = None) -> None:
    """harness.polling.wait_until, failing early if `proc` (the runtime that should get there) exits."""
    def exited() -> None:
        if proc is not None and not proc.alive():
            code = proc.proc.returncode if proc.proc else None
            raise RuntimeError(f"runtime exited (code {code}) while waiting for {what}; see {proc.log_path}")

    polling.wait_until(predicate, timeout, what, interval=0.2, give_up=exited)


def committed(work_dir: Path) -> int:
    batch = latest_committed_batch(work_dir / "hot")
    return -1 if batch is None else batch


def state_replays(paths: list[str], version: int) -> dict[int, int]:
    """Per partition of the first stateful operator, the changelogs a restore of state `version` replays:
    those after the partition's newest RocksDB snapshot (`<v>.zip`) at or below it. `paths`: a
    checkpoint's files, relative to the hot dir (its manifest's)."""
    newest: dict[int, int] = {}
    for path in paths:
        m = re.fullmatch(r"state/0/(\d+)/(\d+)\.(zip|changelog)", path)
        if m:
            newest.setdefault(int(m[1]), 0)
            if m[3] == "zip" and int(m[2]) <= version:
                newest[int(m[1])] = max(newest[int(m[1])], int(m[2]))
    return {p: version - z for p, z in sorted(newest.items())}


def checkpoint_count(store_url: str, job: JobRef) -> int:
    prefix = f"{job.root}/checkpoints/"
    return sum(1 for o in open_store(store_url).list(prefix) if o.key.endswith(".json"))
