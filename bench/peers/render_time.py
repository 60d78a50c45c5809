"""Where the rounds' time went: Spark's phases of a micro-batch, and the CPU of each kind of process
during the measured batches (docs/benchmarks.md, peer section)."""

from __future__ import annotations

import statistics
from typing import Any

from . import proc_cpu
from .common import group

PHASE_ORDER = ("latestOffset", "getBatch", "queryPlanning", "addBatch", "walCommit", "commitOffsets")


def phase_table(raw: dict[str, Any]) -> list[str]:
    """Median seconds per Spark phase over the measured batches of the runs that recorded them."""
    rows = {}
    for key, runs in sorted(group(raw["results"]).items()):
        runs = [r for r in runs if r.get("phases")]
        names = {k for r in runs for k in r["phases"]}
        if runs:
            rows[key] = (len(runs), {k: statistics.median(v for r in runs for v in r["phases"].get(k, []) or [0.0])
                                     for k in names})
    if not rows:
        return []
    names = [k for k in PHASE_ORDER if any(k in m for _, m in rows.values())]
    names += sorted({k for _, m in rows.values() for k in m} - set(names))
    return ["Where a micro-batch's time goes: Spark's own phases (`durationMs` of its progress), median seconds "
            "over the measured batches. addBatch runs the state operators and the sink (Sparkpoint's stages the "
            "output on local disk; the checkpoint's upload runs beside it in the same process); walCommit and "
            "commitOffsets write the offset and commit logs (the hot dir for Sparkpoint and the floor, s3a:// for "
            "vanilla).", "",
            "| latency | setup | runs | " + " | ".join(names) + " |",
            "| --- | --- | --- | " + " | ".join("---" for _ in names) + " |",
            *[f"| {lat} ms | {setup} | {n} | " + " | ".join(f"{m.get(k, 0.0):.3f}" for k in names) + " |"
              for (lat, setup), (n, m) in rows.items()], ""]


def cpu_table(raw: dict[str, Any]) -> list[str]:
    """Average cores each kind of process used during the measured batches (runs that recorded it)."""
    rows = []
    for (lat, setup), runs in sorted(group(raw["results"]).items()):
        runs = [r for r in runs if r.get("cpu_window") and r.get("window_seconds")]
        if not runs:
            continue
        seconds = sum(r["window_seconds"] for r in runs)
        batches = sum(len(r["durations"]) for r in runs)
        cpu = {k: sum(r["cpu_window"].get(k, 0.0) for r in runs) for k in proc_cpu.KINDS}
        rows.append(f"| {lat} ms | {setup} | {len(runs)} | " + " | ".join(f"{cpu[k] / seconds:.2f}" for k in proc_cpu.KINDS)
                    + f" | {sum(cpu.values()) / seconds:.2f} | {sum(cpu.values()) / batches:.2f} |")
    if not rows:
        return []
    return ["CPU during the measured batches (`bench/peers/proc_cpu.py`: user + system time from /proc, sampled "
            "once a second), as average cores of the machine's 2: the JVM (Spark or Flink), the runtime (every "
            "other process of the run: Sparkpoint's Python, the vanilla and Flink drivers), the MinIO server and "
            "toxiproxy (which delays every chunk when latency is injected); CPU seconds per measured batch in "
            "the last column.", "",
            "| latency | setup | runs | JVM | runtime | MinIO | toxiproxy | all | CPU s / batch |",
            "| --- | --- | --- | --- | --- | --- | --- | --- | --- |", *rows, ""]


