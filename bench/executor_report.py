"""The pure half of bench/executor_bench.py: the setups, their order per round, the figures of one
measured window (from two /metrics scrapes and the /status samples between them), the medians and
ratios vs local[2], and the Markdown section. No I/O here, so tests/bench/ checks it on made-up runs."""

from __future__ import annotations

import statistics
from dataclasses import dataclass, field
from typing import Any

START, END = "<!-- executor-bench:start -->", "<!-- executor-bench:end -->"
BASELINE = "local[2]"


@dataclass(frozen=True)
class Setup:
    """One way to spend the same two task slots: Spark in the driver pod, or executor pods."""

    name: str
    master: str
    executors: dict[str, Any] | None = None  # spec.spark.executors, None for local[N]
    driver_memory: str = "1Gi"

    def slots(self) -> int:
        if self.executors is None:
            return int(self.master.removeprefix("local[").removesuffix("]"))
        return self.executors["instances"] * self.executors["cores"]


def setups(executor_memory_per_core: str = "512Mi") -> list[Setup]:
    """local[2], 1 executor x 2 cores, 2 executors x 1 core: two task slots each. The driver of
    local[2] holds the tasks too, so it gets the executors' memory on top of a driver's."""
    mib = int(executor_memory_per_core.removesuffix("Mi"))
    return [Setup(BASELINE, "local[2]", None, f"{1024 + 2 * mib}Mi"),
            Setup("1 executor x 2 cores", "k8s", {"instances": 1, "cores": 2, "memory": f"{2 * mib}Mi"}),
            Setup("2 executors x 1 core", "k8s", {"instances": 2, "cores": 1, "memory": f"{mib}Mi"})]


def schedule(n: int, rounds: int) -> list[list[int]]:
    """Setup indexes per round, alternating A B C, C B A, ...: a drift of the machine's load over
    the run falls on every setup alike, not on the one that always runs last."""
    return [list(range(n)) if r % 2 == 0 else list(reversed(range(n))) for r in range(rounds)]


def parse_metrics(text: str) -> dict[str, float]:
    """Prometheus text format -> {series (name with its labels as written): value}."""
    out: dict[str, float] = {}
    for line in text.splitlines():
        if not line or line.startswith("#"):
            continue
        series, _, value = line.rpartition(" ")
        try:
            out[series] = float(value)
        except ValueError:
            continue
    return out


ROWS = "sparkpoint_input_rows_total"
BATCH_SUM, BATCH_COUNT = "sparkpoint_batch_duration_seconds_sum", "sparkpoint_batch_duration_seconds_count"


def median(xs: list[float]) -> float | None:
    return statistics.median(xs) if xs else None


@dataclass
class Window:
    """What one setup did in one round's measured window."""

    setup: str
    round: int
    seconds: float
    rows_per_s: float
    batch_mean_s: float | None
    batch_s: list[float]  # sampled batches (distinct batch ids seen in /status), with input
    sync_s: list[float]  # completed checkpoints of the window
    total_s: list[float]
    load: tuple[float, float]  # 1-min load average at the window's start and end
    pods: list[dict[str, Any]] = field(default_factory=list)  # resources each pod of the setup got


def window(setup: str, round_: int, before: dict[str, float], after: dict[str, float], seconds: float,
           statuses: list[dict[str, Any]], since: float, load: tuple[float, float],
           pods: list[dict[str, Any]] | None = None) -> Window:
    """The figures of one window: input rows/s and the mean batch from the counters' difference
    between two scrapes `seconds` apart; batch and checkpoint durations from the runtime's /status
    samples (its last batch, its recent checkpoints created at or after `since`, epoch seconds)."""
    count = after.get(BATCH_COUNT, 0) - before.get(BATCH_COUNT, 0)
    batch_mean = (after.get(BATCH_SUM, 0) - before.get(BATCH_SUM, 0)) / count if count > 0 else None
    batches: dict[int, float] = {}
    checkpoints: dict[str, dict[str, Any]] = {}
    for st in statuses:
        p = st.get("lastProgress") or {}
        if p.get("inputRows") and p.get("durationSeconds") is not None:
            batches[p["batchId"]] = p["durationSeconds"]
        for c in st.get("recentCheckpoints") or []:
            if c.get("status") == "completed" and c.get("kind") == "checkpoint" and (c.get("created") or 0) >= since:
                checkpoints[c["id"]] = c
    cps = [checkpoints[k] for k in sorted(checkpoints)]
    return Window(setup, round_, round(seconds, 1), (after.get(ROWS, 0) - before.get(ROWS, 0)) / seconds,
                  batch_mean, [batches[k] for k in sorted(batches)],
                  [c["syncSeconds"] for c in cps], [c["syncSeconds"] + (c["asyncSeconds"] or 0) for c in cps],
                  load, pods or [])


def figures(w: Window) -> dict[str, float | None]:
    return {"rows_per_s": w.rows_per_s, "batch_s": median(w.batch_s), "sync_s": median(w.sync_s),
            "total_s": median(w.total_s)}


def ratios(windows: list[Window], baseline: str = BASELINE) -> dict[tuple[str, int], dict[str, float | None]]:
    """Per (setup, round): each figure over local[2]'s in the same round (None without both)."""
    base = {w.round: figures(w) for w in windows if w.setup == baseline}
    out = {}
    for w in windows:
        b, f = base.get(w.round) or {}, figures(w)
        out[(w.setup, w.round)] = {k: (f[k] / b[k] if f[k] is not None and b.get(k) else None) for k in f}
    return out


def summary(windows: list[Window], order: list[str], baseline: str = BASELINE) -> list[dict[str, Any]]:
    """Per setup: the median over rounds of each figure, and the median of its per-round ratios."""
    rs = ratios(windows, baseline)
    out = []
    for name in order:
        mine = [w for w in windows if w.setup == name]
        if not mine:
            continue
        row: dict[str, Any] = {"setup": name, "rounds": len(mine)}
        for k in ("rows_per_s", "batch_s", "sync_s", "total_s"):
            row[k] = median([v for v in (figures(w)[k] for w in mine) if v is not None])
            row[f"{k}_ratio"] = median([v for v in (rs[(name, w.round)][k] for w in mine) if v is not None])
            row[f"{k}_ratios"] = [rs[(name, w.round)][k] for w in sorted(mine, key=lambda w: w.round)]
        out.append(row)
    return out


def _n(x: float | None, fmt: str = ".2f") -> str:
    return "-" if x is None else format(x, fmt)


def _ratios(xs: list[float | None]) -> str:
    return ", ".join(_n(x) for x in xs)


def _resources(pods: list[dict[str, Any]]) -> str:
    parts = []
    for p in pods:
        slots = f", {p['slots']} task slot{'s' if p['slots'] != 1 else ''}" if p.get("slots") else ""
        parts.append(f"{p['role']}: cpu request {p.get('cpu_request') or '-'} limit {p.get('cpu_limit') or 'none'}, "
                     f"memory {p.get('memory_limit') or p.get('memory_request') or '-'}{slots}")
    return "; ".join(parts) or "-"


def render(windows: list[Window], order: list[str], meta: dict[str, Any]) -> str:
    """The section of docs/benchmarks.md; meta: commit, date, node, smoke, workload, window, rounds, cores."""
    rows = summary(windows, order)
    smoke = meta.get("smoke")
    lines = [START, "## Executors vs local[2] at the same cores (`bench/executor_bench.py`, `make bench-executors`)", ""]
    if smoke:
        lines += [f"**Smoke run, not figures of record**: {smoke}", ""]
    lines += [
        f"Measured {meta['date']} at commit `{meta['commit']}` on {meta['node']} ({meta['cores']} cores, shared: "
        f"see the load averages). The same stateful job ({meta['workload']}) as a StreamingJob under the operator, "
        f"in three setups with two task slots each; {meta['rounds']} round(s), the setups in alternating order "
        f"(A B C, C B A, ...); each run is a new job, measured for {meta['window']} s once it has checkpointed. "
        "Input rows/s is the job at its limit (a fixed backlog per batch, triggered every 100 ms: each batch "
        "starts when the last one ends); batch and checkpoint durations are medians of the window's batches "
        "(those /status showed, polled every second) and checkpoints (sync: the freeze, during which batches wait; total: sync + upload and publish), "
        "read from the runtime's /metrics and /status. Ratios are against local[2] in the same round.", "",
        "| setup | rounds | input rows/s | x local[2] | batch (s) | x local[2] | checkpoint sync (s) | x local[2] "
        "| checkpoint total (s) | x local[2] |",
        "| --- | --- | --- | --- | --- | --- | --- | --- | --- | --- |"]
    for r in rows:
        lines.append(f"| {r['setup']} | {r['rounds']} | {_n(r['rows_per_s'], '.0f')} | {_n(r['rows_per_s_ratio'])} "
                     f"| {_n(r['batch_s'])} | {_n(r['batch_s_ratio'])} | {_n(r['sync_s'], '.3f')} "
                     f"| {_n(r['sync_s_ratio'])} | {_n(r['total_s'])} | {_n(r['total_s_ratio'])} |")
    lines += ["", "Per round (each figure over local[2]'s in that round; load average at the window's start -> end):",
              "", "| round | setup | input rows/s | x local[2] | batch (s): sampled median / mean of all "
              "| checkpoint sync / total (s) | load |",
              "| --- | --- | --- | --- | --- | --- | --- |"]
    rs = ratios(windows)
    for w in sorted(windows, key=lambda w: (w.round, order.index(w.setup) if w.setup in order else 99)):
        f = figures(w)
        lines.append(f"| {w.round} | {w.setup} | {w.rows_per_s:.0f} | {_n(rs[(w.setup, w.round)]['rows_per_s'])} "
                     f"| {_n(f['batch_s'])} / {_n(w.batch_mean_s)} | {_n(f['sync_s'], '.3f')} / {_n(f['total_s'])} "
                     f"| {w.load[0]:.1f} -> {w.load[1]:.1f} |")
    lines += ["", "What each setup got (from its pods' specs; the last round's):", ""]
    for name in order:
        last = [w for w in windows if w.setup == name][-1:]
        if last:
            lines.append(f"- {name}: {_resources(last[0].pods)}")
    lines += ["", verdict(rows), END]
    return "\n".join(lines)


def verdict(rows: list[dict[str, Any]]) -> str:
    """One sentence from the measured ratios, not from expectations."""
    others = [r for r in rows if r["setup"] != BASELINE and r.get("rows_per_s_ratio") is not None]
    if not others:
        return "No executor setup completed a window: no comparison."
    parts = []
    for r in others:
        x = r["rows_per_s_ratio"]
        word = "overhead" if x < 0.95 else "a speed-up" if x > 1.05 else "no clear difference"
        parts.append(f"{r['setup']}: {x:.2f}x local[2]'s input rows/s ({word}"
                     f"{f', {(1 - x) * 100:.0f}% fewer rows/s' if x < 0.95 else ''})")
    return ("Expected at the same two task slots on one machine: overhead (a JVM per executor, the hop between "
            "driver and executors), no gain in cores. Measured (the median of the rounds' ratios): "
            + "; ".join(parts) + ".")
