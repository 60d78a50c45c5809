"""`make demo`: a checkpointed streaming job, killed and recovered, checked against a failure-free run.

The job is sparkpoint/examples/windowed_aggregation.py over the deterministic `rate-micro-batch` source. Two
runs over the same input:
  1. reference: runs to the end without failures;
  2. crash: SIGKILLed twice mid-run; the first restart recovers from the local hot dir (same pod),
     the second from the object store after the whole work dir is wiped (a new pod).
Both runs' committed outputs (what a reader of the exactly-once sink sees) must be identical, and
equal to the result computed independently in Python. The helpers here are shared with the tests.
"""

from __future__ import annotations

import argparse
import calendar
import contextlib
import json
import os
import shutil
import signal
import subprocess
import sys
import time
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

from sparkpoint.runtime.checkpoint import list_checkpoints
from sparkpoint.runtime.checkpoint.freeze import latest_committed_batch
from sparkpoint.runtime.sink.transactional import read_committed
from sparkpoint.runtime.store import JobRef, open_store

REPO = Path(__file__).resolve().parent.parent
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
                 env: dict[str, str] | None = None, port: int = 0):
        self.job_file, self.work_dir, self.log_path = job_file, work_dir, log_path
        self.until_batch, self.env, self.port = until_batch, env or {}, port
        self.proc: subprocess.Popen[bytes] | None = None
        self.started = 0.0

    def start(self) -> RuntimeProcess:
        cmd = [sys.executable, "-m", "sparkpoint.runtime.cli", "run", str(self.job_file),
               "--work-dir", str(self.work_dir), "--port", str(self.port)]
        if self.until_batch is not None:
            cmd += ["--until-batch", str(self.until_batch)]
        self.log_path.parent.mkdir(parents=True, exist_ok=True)
        log = open(self.log_path, "ab")  # noqa: SIM115 (the child owns it)
        self.started = time.monotonic()
        self.proc = subprocess.Popen(cmd, stdout=log, stderr=subprocess.STDOUT, start_new_session=True,
                                     env={**os.environ, "TZ": "UTC", **self.env})
        log.close()
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


def wait_until(predicate, timeout: float, what: str, proc: RuntimeProcess | None = None) -> None:  # type: ignore[no-untyped-def]
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if predicate():
            return
        if proc is not None and not proc.alive():
            raise RuntimeError(f"runtime exited (code {proc.proc and proc.proc.returncode}) while waiting for {what}; "
                               f"see {proc.log_path}")
        time.sleep(0.2)
    raise TimeoutError(f"timed out after {timeout:.0f}s waiting for {what}")


def committed(work_dir: Path) -> int:
    batch = latest_committed_batch(work_dir / "hot")
    return -1 if batch is None else batch


def checkpoint_count(store_url: str, job: JobRef) -> int:
    prefix = f"{job.root}/checkpoints/"
    return sum(1 for o in open_store(store_url).list(prefix) if o.key.endswith(".json"))


# --- the demo ------------------------------------------------------------------------------------
def run_demo(base: Path, job: WindowedJob, timeout: float = 900) -> dict[str, Any]:
    shutil.rmtree(base, ignore_errors=True)
    ref_store, crash_store = f"file://{base / 'reference-store'}", f"file://{base / 'crash-store'}"
    ref = JobRef("default", job.name)
    t0 = time.monotonic()
    print(f"[1/4] failure-free reference run ({job.total_batches} batches of {job.rows_per_batch} rows)")
    p = RuntimeProcess(job.write(base / "reference.yaml", ref_store), base / "reference-pod",
                       base / "logs/reference.log", until_batch=job.until_batch).start()
    code = p.wait(timeout)
    if code != 0:
        raise RuntimeError(f"reference run failed with exit code {code}; see {p.log_path}")
    ref_seconds = time.monotonic() - t0

    crash_file = job.write(base / "crash.yaml", crash_store)
    pod = base / "crash-pod"
    recoveries = []
    print("[2/4] crash run: SIGKILL after the 2nd checkpoint, restart in the same pod (local recovery)")
    p = RuntimeProcess(crash_file, pod, base / "logs/crash-1.log", until_batch=job.until_batch).start()
    wait_until(lambda: checkpoint_count(crash_store, ref) >= 2 and committed(pod) >= 8, timeout,
               "two checkpoints", p)
    p.kill()
    killed_at = committed(pod)
    recoveries.append(_restart(crash_file, pod, base / "logs/crash-2.log", job, killed_at))
    p = recoveries[-1].pop("process")
    print("[3/4] SIGKILL again, wipe the pod's disk, restart from the object store (remote restore)")
    target = checkpoint_count(crash_store, ref) + 1
    wait_until(lambda: checkpoint_count(crash_store, ref) >= target and committed(pod) >= killed_at + 6,
               timeout, "another checkpoint", p)
    p.kill()
    killed_at = committed(pod)
    shutil.rmtree(pod)
    recoveries.append(_restart(crash_file, pod, base / "logs/crash-3.log", job, killed_at))
    p = recoveries[-1].pop("process")
    code = p.wait(timeout)
    if code != 0:
        raise RuntimeError(f"recovered run failed with exit code {code}; see {p.log_path}")

    print("[4/4] comparing committed output")
    reference_rows = canonical(read_committed(open_store(ref_store), ref))
    crash_rows = canonical(read_committed(open_store(crash_store), ref))
    expected = job.expected_rows()
    manifests = list_checkpoints(open_store(crash_store), ref)
    return {
        "reference_rows": sum(reference_rows.values()), "crash_rows": sum(crash_rows.values()),
        "expected_rows": sum(expected.values()),
        "identical": crash_rows == reference_rows, "matches_oracle": reference_rows == expected,
        "missing": sum((reference_rows - crash_rows).values()),
        "duplicates_or_extra": sum((crash_rows - reference_rows).values()),
        "checkpoints_retained": len(manifests),
        "uploaded_bytes": sum(m.totals.new_bytes for m in manifests),
        "reused_bytes": sum(m.totals.reused_bytes for m in manifests),
        "latest_checkpoint_bytes": manifests[-1].totals.bytes if manifests else 0,
        "recoveries": recoveries, "reference_seconds": round(ref_seconds, 1),
        "total_seconds": round(time.monotonic() - t0, 1),
    }


def _restart(job_file: Path, pod: Path, log: Path, job: WindowedJob, killed_at: int) -> dict[str, Any]:
    started = time.monotonic()
    p = RuntimeProcess(job_file, pod, log, until_batch=job.until_batch).start()
    wait_until(lambda: p.restore_info() is not None, 300, "restart", p)
    info = p.restore_info() or {}
    wait_until(lambda: committed(pod) > max(killed_at, info.get("batch") or -1), 300, "first new batch", p)
    return {"process": p, "source": info.get("restore"), "killed_at_batch": killed_at,
            "resumed_after_batch": info.get("batch"), "restore_seconds": info.get("restore_seconds"),
            "seconds_to_first_new_batch": round(time.monotonic() - started, 1)}


def print_summary(s: dict[str, Any]) -> None:
    mib = 1024 * 1024
    print("\n=== Sparkpoint demo summary ===")
    print(f"output rows: reference {s['reference_rows']}, crash run {s['crash_rows']}, "
          f"computed {s['expected_rows']}")
    print(f"crash run output identical to the failure-free run: {s['identical']} "
          f"(missing {s['missing']}, extra/duplicate {s['duplicates_or_extra']})")
    print(f"failure-free run equals the independently computed result: {s['matches_oracle']}")
    print(f"checkpoints in the store (no GC runs in the demo): {s['checkpoints_retained']}; latest is {s['latest_checkpoint_bytes'] / mib:.1f} MiB; "
          f"across them {s['uploaded_bytes'] / mib:.1f} MiB uploaded, {s['reused_bytes'] / mib:.1f} MiB reused")
    for r in s["recoveries"]:
        print(f"recovery ({r['source']}): killed at batch {r['killed_at_batch']}, resumed after batch "
              f"{r['resumed_after_batch']}, restore took {r['restore_seconds']} s, first new batch "
              f"{r['seconds_to_first_new_batch']} s after restart (incl. JVM start)")
    print(f"reference run {s['reference_seconds']} s; whole demo {s['total_seconds']} s")
    print("RESULT:", "PASS" if s["identical"] and s["matches_oracle"] else "FAIL")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--work", default=str(REPO / ".work" / "demo"), help="scratch dir (wiped first)")
    parser.add_argument("--batches", type=int, default=WindowedJob.total_batches)
    parser.add_argument("--rows-per-batch", type=int, default=WindowedJob.rows_per_batch)
    parser.add_argument("--json", action="store_true", help="print the summary as JSON")
    args = parser.parse_args(argv)
    job = WindowedJob(total_batches=args.batches, rows_per_batch=args.rows_per_batch, keys=args.rows_per_batch)
    summary = run_demo(Path(args.work).absolute(), job)
    if args.json:
        print(json.dumps(summary, indent=1, default=str))
    else:
        print_summary(summary)
    return 0 if summary["identical"] and summary["matches_oracle"] else 1


if __name__ == "__main__":
    sys.exit(main())
