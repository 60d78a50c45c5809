"""The operator load benchmark's section of docs/benchmarks.md and its plot (pure formatting)."""

from __future__ import annotations

import re
import statistics
from typing import Any

from peers.stats import percentile  # the benchmarks' one percentile (bench/ is on sys.path)

START, END = "<!-- operator-load:start -->", "<!-- operator-load:end -->"
GOAL_LAG_P99, GOAL_RSS_MIB = 2.0, 300.0


def bucket_percentile(buckets: dict[str, float], q: float) -> str:
    """The upper bound of the operator's histogram bucket holding the q-th percentile ("<= 0.5 s")."""
    bounds = []
    for key, count in buckets.items():
        match = re.search(r'le="([^"]+)"', key)
        if match:
            bounds.append((float(match.group(1)), count))
    bounds.sort()
    if not bounds or bounds[-1][1] <= 0:
        return "n/a"
    target = bounds[-1][1] * q / 100
    for bound, count in bounds:
        if count >= target:
            return f"<= {bound:g} s" if bound != float("inf") else "> 60 s"
    return "n/a"


def summary(r: dict[str, Any]) -> dict[str, Any]:
    lags, created, running = r["lags"], r["delete_to_created"], r["delete_to_running"]
    return {
        "jobs": r["jobs"], "triggers": len(lags),
        "lag_p50": percentile(lags, 50) if lags else float("nan"),
        "lag_p99": percentile(lags, 99) if lags else float("nan"),
        "lag_max": max(lags) if lags else float("nan"),
        "op_p99": bucket_percentile(r["operator_lag_buckets"], 99),
        "expected": r["jobs"] * r["window_s"] / r["interval_s"],
        "created_p50": statistics.median(created) if created else float("nan"),
        "created_max": max(created) if created else float("nan"),
        "running_p50": statistics.median(running) if running else float("nan"),
        "deletions": len(created),
        # runs before the field existed deleted 20 pods and waited 122 s
        "deleted": r.get("deleted", 20), "wait": r.get("deletion_wait_s", 122.0),
    }


def seconds(value: float) -> str:
    return "-" if value != value else f"{value:.1f} s"  # NaN: nothing measured


def recovery(s: dict[str, Any]) -> str:
    late = s["deleted"] - s["deletions"]
    if not s["deletions"]:
        return f"none within {s['wait']:.0f} s (0 of {s['deleted']})"
    text = f"{s['created_p50']:.1f} / {s['created_max']:.1f} s ({s['deletions']} of {s['deleted']})"
    return text + (f"; {late} not within {s['wait']:.0f} s" if late else "")


def table(results: list[dict[str, Any]]) -> str:
    rows = ["| jobs | ramp to all Running | triggers (expected) in the steady window | trigger lag p50 / p99 / max "
            "| operator's own lag histogram p99 | operator CPU (cores) steady / ramp | harness / apiserver+etcd CPU | RSS end / peak "
            "| pod deleted -> next pod created, p50 / max | -> next pod Running, p50 | load avg start / end |",
            "| ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: |"]
    for r in results:
        s = summary(r)
        rows.append(
            f"| {r['jobs']} | {r['ramp_s']:.0f} s | {s['triggers']} ({s['expected']:.0f}) in {r['window_s']:.0f} s "
            f"| {s['lag_p50']:.2f} / {s['lag_p99']:.2f} / {s['lag_max']:.2f} s | {s['op_p99']} "
            f"| {r['cpu_cores_steady']:.2f} / {r['cpu_cores_ramp']:.2f} "
            f"| {r['harness_cores']:.2f} / {r['apiserver_cores']:.2f} | {r['rss_mib']:.0f} / {r['peak_rss_mib']:.0f} MiB "
            f"| {recovery(s)} | {seconds(s['running_p50'])} "
            f"| {r['load_avg'][0]:.1f} / {r['load_avg'][1]:.1f} |")
    return "\n".join(rows)


def verdict(results: list[dict[str, Any]]) -> str:
    biggest = max(results, key=lambda r: r["jobs"])
    s = summary(biggest)
    lag_ok = s["lag_p99"] < GOAL_LAG_P99
    rss_ok = biggest["peak_rss_mib"] < GOAL_RSS_MIB
    return (f"At {biggest['jobs']} jobs: trigger lag p99 **{s['lag_p99']:.2f} s** (goal < {GOAL_LAG_P99:g} s: "
            f"{'meets goal' if lag_ok else '**misses goal**'}), peak RSS **{biggest['peak_rss_mib']:.0f} MiB** "
            f"(goal < {GOAL_RSS_MIB:g} MiB: {'meets goal' if rss_ok else '**misses goal**'}).")


# The operator before the load work (commit f214d0b, measured 2026-11-22 06:07 UTC):
# jobs -> (trigger lag p99 s, peak RSS MiB). Drawn in grey for comparison.
BEFORE = {30: (1.12, 111.0), 100: (19.61, 140.0), 300: (32.56, 186.0), 1000: (144.07, 370.0)}


def draw(results: list[dict[str, Any]]):
    def _draw(ax: Any) -> None:
        xs = [r["jobs"] for r in results]
        ax.plot(list(BEFORE), [v[0] for v in BEFORE.values()], "s:", color="grey", label="before: lag p99 (s)")
        ax.plot(xs, [summary(r)["lag_p50"] for r in results], "o-", label="trigger lag p50 (s)")
        ax.plot(xs, [summary(r)["lag_p99"] for r in results], "s-", label="trigger lag p99 (s)")
        ax.axhline(GOAL_LAG_P99, color="grey", ls=":", lw=1)
        ax.set_xlabel("StreamingJobs")
        ax.set_ylabel("seconds late")
        ax.set_xscale("log")
        ax.set_yscale("symlog", linthresh=1.0)
        ticks = sorted(set(xs) | set(BEFORE))
        ax.set_xticks(ticks, [str(x) for x in ticks])
        rss = ax.twinx()
        rss.plot(list(BEFORE), [v[1] for v in BEFORE.values()], "^:", color="lightcoral", label="before: peak RSS")
        rss.plot(xs, [r["peak_rss_mib"] for r in results], "^--", color="tab:red", label="peak RSS (MiB)")
        rss.axhline(GOAL_RSS_MIB, color="tab:red", ls=":", lw=1)
        rss.set_ylabel("operator RSS (MiB)")
        lines = ax.get_legend_handles_labels()[0] + rss.get_legend_handles_labels()[0]
        ax.legend(lines, [line.get_label() for line in lines], fontsize=8, loc="upper left")
    return _draw
