"""The cost of Spark's live UI and event logs (issue 30): batch durations of the same job with both on
(as in a pod: `sparkpoint-10s-ui`) and both off (`sparkpoint-10s`), side by side in one run.

    python bench/ui_bench.py            # peer bench's medium workload, 4 rounds
    python bench/ui_bench.py --small    # the small workload, 2 rounds (minutes)

Each round runs both setups in a fresh process against one local MinIO, the order alternating per
round (A B, B A, ...) so drift hits both; the ratio is median(on)/median(off) over the measured
batches with a bootstrap interval, and the paired-rounds interval (whole rounds resampled). Spark's
own batch phases (durationMs) say where a difference goes. Writes its section of docs/benchmarks.md.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import tempfile
import time
from dataclasses import asdict
from pathlib import Path

import report  # bench/report.py
from peer_bench import SIZES, load_average
from peers import sparkpoint_setup, stats
from peers.common import Context, RunResult

from harness.minio_server import MinioServer

REPO = Path(__file__).resolve().parents[1]
START, END = "<!-- ui-bench:start -->", "<!-- ui-bench:end -->"
OFF, ON = "sparkpoint-10s", "sparkpoint-10s-ui"
UI_ONLY, EVENT_LOG = "sparkpoint-10s-uionly", "sparkpoint-10s-eventlog"  # --split: the halves of ON
BUCKET = "ui-bench"


def order(setups: tuple[str, ...], i: int) -> tuple[str, ...]:
    """Round i's order: forwards on even rounds, backwards on odd ones, so drift hits all alike."""
    return setups if i % 2 == 0 else setups[::-1]


def run(size: str, rounds: int, base: Path, setups: tuple[str, ...] = (OFF, ON)) -> tuple[list[RunResult], list[str]]:
    w = SIZES[size]
    loads = [load_average()]
    minio = MinioServer().start()
    try:
        minio.make_bucket(BUCKET)
        ctx = Context(base=base, bucket=BUCKET, endpoint=minio.endpoint,
                      env={**minio.env(), "SPARKPOINT_S3_ENDPOINT": minio.endpoint})
        results = []
        for i in range(rounds):
            for setup in order(setups, i):
                print(f"round {i + 1}/{rounds}: {setup} (load {load_average()})", flush=True)
                results.append(sparkpoint_setup.run(setup, w, ctx, f"r{i}-{setup}"))
            loads.append(load_average())
    finally:
        minio.stop()
    return results, loads


def phase_medians(runs: list[RunResult]) -> dict[str, float]:
    phases: dict[str, list[float]] = {}
    for r in runs:
        for name, values in r.phases.items():
            phases.setdefault(name, []).extend(values)
    return {k: statistics.median(v) for k, v in phases.items() if v}


def render(results: list[RunResult], loads: list[str], size: str, commit: str) -> str:
    off = [r for r in results if r.setup == OFF]
    on = [r for r in results if r.setup == ON]
    pooled = stats.bootstrap_ratio([d for r in off for d in r.durations], [d for r in on for d in r.durations])
    paired = stats.paired_rounds_ratio([r.durations for r in off], [r.durations for r in on])
    each = ", ".join(f"{x:.3f}" for x in stats.per_round_ratios([r.durations for r in off], [r.durations for r in on]))
    w = SIZES[size]
    lines = [START, "## Spark UI and event logs: batch-duration cost (`bench/ui_bench.py`)", "",
             f"Measured {time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime())} at commit `{commit}` on "
             f"{os.cpu_count()} shared cores{report.pinned()}, load average (1/5/15 min) at the start and after each round: "
             f"{'; '.join(loads)}. Workload `{size}` of the peer bench ({w.rows_per_batch} rows per batch, "
             f"{w.keys} keys, {w.batches} batches, trigger {w.trigger}, first {w.warmup_batches} not measured), "
             f"checkpoints every 10 s to a local MinIO, {len(off)} rounds, the order alternating per round. "
             f"`{OFF}`: UI and event logs off; `{ON}`: Spark's live UI (`SPARKPOINT_SPARK_UI_PORT=0`) and the "
             "event logs (rolled, zstd, uploaded after checkpoints), as every pod runs by default.", "",
             "| setup | runs | batches | median batch (s) | p95 (s) |", "| --- | --- | --- | --- | --- |"]
    halves = [(name, [r for r in results if r.setup == name]) for name in (UI_ONLY, EVENT_LOG)]
    halves = [(name, runs) for name, runs in halves if runs]
    for name, runs in ((OFF, off), *halves, (ON, on)):
        s = stats.summary([d for r in runs for d in r.durations], w.rows_per_batch)
        lines.append(f"| {name} | {len(runs)} | {s['batches']} | {s['median_s']:.3f} | {s['p95_s']:.3f} |")
    lines += ["", f"**Ratio on/off** (median batch): {pooled.fmt()} over all measured batches; "
              f"{paired.fmt()} resampling whole rounds; per round: {each}.", ""]
    for name, runs in halves:
        half = stats.paired_rounds_ratio([r.durations for r in off], [r.durations for r in runs])
        per = ", ".join(f"{x:.3f}" for x in stats.per_round_ratios([r.durations for r in off],
                                                                     [r.durations for r in runs]))
        pooled_half = stats.bootstrap_ratio([d for r in off for d in r.durations], [d for r in runs for d in r.durations])
        lines += [f"- `{name}` / off: {pooled_half.fmt()} over all batches; {half.fmt()} resampling whole rounds; "
                  f"per round: {per}."]
    lines += [*([""] if halves else []), "Spark's batch phases, median ms per batch (where a difference goes):", "",
              "| phase | off | on | on - off |", "| --- | --- | --- | --- |"]
    p_off, p_on = phase_medians(off), phase_medians(on)
    for name in sorted(set(p_off) | set(p_on)):
        a, b = p_off.get(name, 0.0) * 1000, p_on.get(name, 0.0) * 1000
        lines.append(f"| {name} | {a:.1f} | {b:.1f} | {b - a:+.1f} |")
    lines += ["", "What lowers it, if it matters: `spec.spark.eventLog.enabled: false` (no event log listener and "
              "uploads), `spec.spark.ui.enabled: false` (no UI status store), or Spark's own "
              "`spark.ui.retainedJobs`/`retainedStages`/`spark.sql.ui.retainedExecutions` in `spark.conf` "
              "(fewer entries the UI's listener keeps and evicts).", END]
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--small", action="store_true", help="the small workload, 2 rounds")
    p.add_argument("--rounds", type=int, default=None)
    p.add_argument("--split", action="store_true",
                   help="also run the UI alone and the event logs alone: which half the cost is")
    p.add_argument("--no-write", action="store_true", help="print, do not update docs/benchmarks.md")
    p.add_argument("--raw-out", metavar="JSON", help="also write the raw results here")
    args = p.parse_args(argv)
    size = "small" if args.small else "medium"
    rounds = args.rounds or (2 if args.small else 4)
    base = Path(tempfile.mkdtemp(prefix="sparkpoint-ui-bench-"))
    results, loads = run(size, rounds, base, (OFF, UI_ONLY, EVENT_LOG, ON) if args.split else (OFF, ON))
    commit = report.commit()
    if args.raw_out:
        Path(args.raw_out).write_text(json.dumps({"size": size, "loads": loads, "commit": commit,
                                                  "results": [asdict(r) for r in results]}))
    return report.publish(START, END, render(results, loads, size, commit), write=not args.no_write)


if __name__ == "__main__":
    sys.exit(main())
