"""`make demo`: a checkpointed streaming job, killed and recovered, checked against a failure-free run.

The job is sparkpoint/examples/windowed_aggregation.py over the deterministic `rate-micro-batch` source. Two
runs over the same input:
  1. reference: runs to the end without failures;
  2. crash: SIGKILLed twice mid-run; the first restart recovers from the local hot dir (same pod),
     the second from the object store after the whole work dir is wiped (a new pod).
Both runs' committed outputs (what a reader of the exactly-once sink sees) must be identical, and
equal to the result computed independently in Python. Run from the checkout: `python -m harness.demo`.
"""

from __future__ import annotations

import argparse
import json
import shutil
import sys
import time
from pathlib import Path
from typing import Any

from sparkpoint.runtime.checkpoint import list_checkpoints
from sparkpoint.runtime.sink.transactional import read_committed
from sparkpoint.runtime.store import JobRef, open_store

from .runtime_job import REPO, RuntimeProcess, WindowedJob, canonical, checkpoint_count, committed, wait_until


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
