"""The peer benchmark's section of docs/benchmarks.md, from the raw results (a dict as written to
docs/img/peer-results.json), with its plots."""

from __future__ import annotations

import statistics
from collections import defaultdict
from collections.abc import Callable
from typing import Any

from . import render_extras, render_time, stats, store_requests
from .common import group

START, END = "<!-- peer-bench:start -->", "<!-- peer-bench:end -->"
MIB = 1024 * 1024


def pooled(runs: list[dict[str, Any]], key: str = "durations") -> list[float]:
    return [d for r in runs for d in r[key]]


def batch_table(raw: dict[str, Any]) -> tuple[list[str], dict[tuple[int, str], stats.Ratio]]:
    g = group(raw["results"])
    rows_per_batch = raw["workload"]["rows_per_batch"]
    lines = ["| latency | setup | runs | batches | median batch (s) | p95 (s) | rows/s | median / floor [95% CI] "
             "| median / vanilla-changelog [95% CI] |", "| --- | --- | --- | --- | --- | --- | --- | --- | --- |"]
    ratios = {}
    for (lat, setup), runs in sorted(g.items()):
        d = pooled(runs)
        s = stats.summary(d, rows_per_batch)
        cells = []
        for ref in ("floor", "vanilla-changelog"):
            base = g.get((lat, ref))
            if base and setup != ref:
                r = stats.bootstrap_ratio(pooled(base), d)
                ratios[(lat, f"{setup}/{ref}")] = r
                cells.append(r.fmt())
            else:
                cells.append("1" if setup == ref else "n/a")
        lines.append(f"| {lat} ms | {setup} | {len(runs)} | {s['batches']} | {s['median_s']:.3f} | {s['p95_s']:.3f} "
                     f"| {s['rows_per_s']:.0f} | {cells[0]} | {cells[1]} |")
    return lines, ratios


def checkpoint_table(raw: dict[str, Any]) -> list[str]:
    lines = ["| latency | setup | checkpoints | median sync (s) | median async (s) | median size (MiB) "
             "| median uploaded (MiB) | uploaded / changed |", "| --- | --- | --- | --- | --- | --- | --- | --- |"]
    for (lat, setup), runs in sorted(group(raw["results"]).items()):
        cps = [c for r in runs for c in r["checkpoints"]]
        if not cps:
            continue
        sync = statistics.median(c["sync_s"] for c in cps)
        asyn = statistics.median(c["async_s"] for c in cps)
        if "bytes" in cps[0]:
            size = statistics.median(c["bytes"] for c in cps) / MIB
            up = statistics.median(c["new_bytes"] for c in cps) / MIB
            # What changed between checkpoints = the files not in the previous manifest: the
            # incremental setups upload exactly those; the full baseline uploads everything.
            note = "1.00 (only new files)" if "full" not in setup else f"{size / up if up else 0:.2f}x size"
            if setup == "flink":  # Flink reports the checkpointed (incremental) size, not what changed
                note = "n/a (see the churn table)"
            lines.append(f"| {lat} ms | {setup} | {len(cps)} | {sync:.3f} | {asyn:.3f} | {size:.2f} | {up:.2f} | {note} |")
        else:
            lines.append(f"| {lat} ms | {setup} | {len(cps)} (one per batch) | {sync:.3f} | 0 (synchronous) "
                         "| n/a | n/a | n/a |")
    return lines


def request_table(raw: dict[str, Any]) -> list[str]:
    kinds = ("PUT", "GET", "LIST", "HEAD", "DELETE")
    lines = ["| latency | setup | " + " | ".join(f"{k}/h" for k in kinds) + " | requests $/month |",
             "| --- | --- | " + " | ".join("---" for _ in kinds) + " | --- |"]
    for (lat, setup), runs in sorted(group(raw["results"]).items()):
        windowed = all(r.get("window_seconds") for r in runs)  # runs before the window was recorded: whole run
        seconds = sum(r["window_seconds"] if windowed else r["active_seconds"] for r in runs)
        if seconds <= 0:
            continue
        total: dict[str, int] = defaultdict(int)
        for r in runs:
            for k, v in (r["requests_window"] if windowed else r["requests"]).items():
                total[k] += v
        hourly = store_requests.per_hour(total, seconds)
        lines.append(f"| {lat} ms | {setup} | " + " | ".join(f"{hourly.get(k, 0):.0f}" for k in kinds)
                     + f" | {store_requests.monthly_cost(hourly):.2f} |")
    return lines


def area_table(raw: dict[str, Any]) -> list[str]:
    """Objects each setup left in the bucket per hour of run, by area: where its PUTs went (PUTs
    overwritten or deleted within the run, e.g. GC's, are not in it)."""
    per: dict[tuple[int, str], dict[str, float]] = {}
    for (lat, setup), runs in sorted(group(raw["results"]).items()):
        seconds = sum(r["active_seconds"] for r in runs)
        areas: dict[str, int] = defaultdict(int)
        for r in runs:
            for k, v in (r.get("objects_by_area") or {}).items():
                areas[k] += v
        if seconds > 0 and areas:
            per[(lat, setup)] = {k: v * 3600 / seconds for k, v in areas.items()}
    if not per:
        return []
    names = sorted({k for v in per.values() for k in v})
    return (["Objects left in the bucket at the end of each run, per hour of run, by area (where the PUTs "
             "went; objects overwritten or deleted within the run are not counted):", "",
             "| latency | setup | " + " | ".join(names) + " |", "| --- | --- | " + " | ".join("---" for _ in names) + " |"]
            + [f"| {lat} ms | {setup} | " + " | ".join(f"{v.get(n, 0):.0f}" for n in names) + " |"
               for (lat, setup), v in per.items()] + [""])


def render(raw: dict[str, Any], plot: Callable[..., str]) -> str:
    lim, v = raw.get("limits"), raw["versions"]
    lines = [START, "## Peers: Sparkpoint vs vanilla Spark on S3, Flink, and the floor (`bench/peer_bench.py`)", ""]
    lines.append(f"Size **{raw['size']}**: {_workload_text(raw)}. Same query (sparkpoint/examples/windowed_aggregation.py), "
                 "same rate-micro-batch data, same MinIO reached through toxiproxy on loopback.")
    lines += ["", f"**Machine load** (1/5/15-min load average, 2 cores, shared with other jobs) at the start "
              f"and after each round: {'; '.join(raw['loads'])}. {_load_verdict(raw['loads'])}"]
    if raw.get("extras_loads"):
        lines += ["", f"Load in the runs merged for the extra figures: {'; '.join(raw['extras_loads'])}."]
    lines.append("")
    lines.append("Versions: " + ", ".join(f"{k} {val}" for k, val in v.items()) + ".")
    lines += ["", f"Command: `{raw['command']}`. Per-run commands are in docs/img/peer-results.json.", ""]
    if raw["size"] != "full":
        lines += [f"**This run uses the `{raw['size']}` workload.** The `--full` one (about 100 MB of windowed state, "
                  "5 rounds) is still to be run: `nice -n 10 python bench/peer_bench.py --full` "
                  "(see \"Not yet measured\" below for what else it does not cover yet).", ""]
    if raw["skipped"]:
        lines += ["Not measured / failed in this run:", ""]
        lines += [f"- **{k}**: {why}" for k, why in raw["skipped"].items()] + [""]
    lines += ["### Micro-batch duration (ratios: bootstrap 95% interval over all measured batches)", ""]
    table, ratios = batch_table(raw)
    lines += table + [""] + render_time.phase_table(raw)
    lines += ["### Checkpoints", "", "Sparkpoint: sync = freeze of the hot dir, async = hash + upload + commit; "
              "vanilla: the per-batch offset/commit log writes plus the state store commit, all inside the batch.",
              ""] + checkpoint_table(raw) + [""]
    lines += ["### Store requests and their cost", "",
              f"Counted from MinIO's `/minio/v2/metrics/cluster`, scraped once a second, between the start of "
              f"each run's first measured batch and the end of its last (runs recorded before that window was: "
              f"every request of the run, JVM start and the drain's final checkpoint included, over the measured "
              f"span). Cost at {store_requests.PRICES_SOURCE}: PUT/COPY/POST/LIST "
              "$0.005 per 1,000, GET/HEAD $0.0004 per 1,000, DELETE free; per job, 730 h/month, requests only.", ""]
    lines += request_table(raw) + [""] + area_table(raw) + render_time.cpu_table(raw)
    for other in raw.get("other_workloads") or []:
        lines += other_workload_lines(other)
    if lim:
        lines += ["### Physical limits (same run)", "",
                  f"sha256 {lim['sha256_mib_s']:.0f} MiB/s (one core); local disk write (fsync) "
                  f"{lim['disk_write_mib_s']:.0f} MiB/s; MinIO PUT {lim['store_put_mib_s']:.0f} MiB/s, GET "
                  f"{lim['store_get_mib_s']:.0f} MiB/s (runtime store client, 8 parallel, no latency)."]
        lines += _fractions(raw, lim) + [""]
    rs = raw.get("restore")
    if rs:
        lines += ["### Remote restore under CPU load", "", *restore_lines(rs), ""]
    ex = raw.get("extras") or {}
    lines += render_extras.recovery_lines(ex) + render_extras.churn_lines(ex) + render_extras.retention_lines(ex)
    lines += render_extras.replay_lines(ex)
    lines += _goals(raw, ratios)
    lines += ["### Not yet measured", ""] + [f"- {m}" for m in not_measured(raw)] + [""]
    lines += [*_plots(raw, ratios, plot), *render_extras.plots(ex, plot), END]
    return "\n".join(lines)


def _workload_text(raw: dict[str, Any]) -> str:
    w = raw["workload"]
    return (f"{w['rows_per_batch']} rows per micro-batch over {w['keys']} keys"
            f"{', ' + str(w['payload_bytes']) + ' B payload per key' if w['payload_bytes'] else ''}, "
            f"{w['batches']} batches per run (first {w['warmup_batches']} not measured), trigger {w['trigger']}; "
            f"{_rounds_text(raw)}")


def _rounds_text(raw: dict[str, Any]) -> str:
    """Rounds per latency (a merged report can hold 5 rounds at 0 ms and 3 at 20 ms: not 8 rounds)."""
    per: dict[int, int] = {}
    for (lat, _), runs in group(raw.get("results") or []).items():
        per[lat] = max(per.get(lat, 0), len(runs))
    if len(per) < 2:
        return f"{raw['rounds']} alternating rounds"
    return "alternating rounds: " + ", ".join(f"{n} at {lat} ms" for lat, n in sorted(per.items()))


def other_workload_lines(other: dict[str, Any]) -> list[str]:
    """Rounds of another workload (an earlier run, often with more setups), reported on their own:
    their ratios are to their own floor and vanilla runs, never to this run's."""
    table, ratios = batch_table(other)
    lines = [f"### The `{other['size']}` workload: an earlier run, reported on its own", "",
             f"{_workload_text(other)}. Its ratios are to its own floor and vanilla-changelog runs. Load at the start "
             f"and after each round: {'; '.join(other.get('loads') or [])}. Commit "
             f"{(other.get('versions') or {}).get('commit', 'n/a')}. Command: `{other.get('command', '')}`.", ""]
    if other.get("skipped"):
        lines += [f"- **{k}**: {why}" for k, why in other["skipped"].items()] + [""]
    goals = [x.replace("### Goals", f"#### Goals in the `{other['size']}` run") for x in _goals(other, ratios)]
    return lines + table + [""] + checkpoint_table(other) + [""] + request_table(other) + [""] + goals


def _load_verdict(loads: list[str]) -> str:
    peak = max((float(x.split()[0]) for x in loads if x.split()), default=0.0)
    if peak > 4:
        return "With load far above the core count these are ratios under contention, not quiet-machine numbers."
    return ("Load stayed near the core count: mostly the benchmark's own processes (one Spark or Flink JVM, "
            "MinIO, toxiproxy); no other heavy work ran.")


def not_measured(raw: dict[str, Any]) -> list[str]:
    """What the issue asks for that this run (or these merged runs) did not produce."""
    ex = raw.get("extras") or {}
    out = []
    measured = {r["latency_ms"] for r in raw["results"]}
    for lat in (0, 20):
        if raw["results"] and lat not in measured:
            elsewhere = [o["size"] for o in raw.get("other_workloads") or []
                         if any(r["latency_ms"] == lat for r in o.get("results") or [])]
            out.append(f"Rounds of the `{raw['size']}` workload at {lat} ms"
                       + (f" (the `{elsewhere[0]}` workload's section has them)." if elsewhere else "."))
    if raw["size"] != "full":
        out.append(f"The `full` workload (about 100 MB of windowed state): this run is `{raw['size']}`.")
    done = {(r.get("setup"), r.get("latency_ms")) for r in ex.get("recovery") or []}
    for setup in ("sparkpoint", "vanilla-changelog", "flink"):
        missing = [lat for lat in (0, 20) if not any(s and s.startswith(setup) and lt == lat for s, lt in done)]
        if missing:
            out.append(f"Recovery after a kill, {setup}: not at {' and '.join(f'{x} ms' for x in missing)}.")
    sizes = sorted({r.get("size") for r in ex.get("churn") or [] if r.get("size")})
    flink_churn = any(r.get("setup") == "flink" for r in ex.get("churn") or [])
    lats = sorted({r.get("latency_ms", 0) for r in ex.get("churn") or []})
    at = " and ".join(f"{x} ms" for x in lats) + (" only" if len(lats) == 1 else "") if lats else "no latency"
    out.append(f"Key churn: measured at sizes {', '.join(sizes) or 'none'}, {at}, Sparkpoint incremental, "
               f"vanilla-changelog{' and Flink' if flink_churn else ''}; not 1 GB or 4 GB unless listed (`--sizes "
               "100m,1g,4g`: disk and hours)" + ("." if flink_churn else ", not Flink (needs flink in --setups)."))
    if not ex.get("retention"):
        out.append("Bucket bytes over 30 minutes with retention and GC (`--extras retention`): not in this run.")
    out.append("Flink's row in the batch table is its sustained rate over an unbounded run, expressed as the time "
               "per `rows_per_batch` rows (no micro-batches).")
    return out


GOALS = ((0, "sparkpoint-10s", "floor", 1.05), (20, "sparkpoint-10s", "floor", 1.05),
         (20, "sparkpoint-10s", "vanilla-changelog", 0.5))
MIN_ROUNDS_TO_JUDGE = 3  # below it, resampling rounds says little: judge by the per-batch interval


def _goals(raw: dict[str, Any], ratios: dict[tuple[int, str], stats.Ratio]) -> list[str]:
    """The issue's batch-duration goals, checked against the measured intervals: the one that
    resamples whole rounds when there are enough of them (batches within a run are correlated), the
    per-batch one otherwise."""
    g = group(raw["results"])
    out = []
    for lat, setup, ref, goal in GOALS:
        r = ratios.get((lat, f"{setup}/{ref}"))
        if r is None:
            continue
        a, b = [x["durations"] for x in g[(lat, ref)]], [x["durations"] for x in g[(lat, setup)]]
        line = f"- {setup}/{ref} at {lat} ms: {r.fmt()} over batches"
        judged = r
        if min(len(a), len(b)) >= MIN_ROUNDS_TO_JUDGE:
            judged = stats.paired_rounds_ratio(a, b)
            each = ", ".join(f"{x:.3f}" for x in stats.per_round_ratios(a, b))
            line += f", [{judged.low:.3f}, {judged.high:.3f}] resampling the {min(len(a), len(b))} rounds (per round: {each})"
        verdict = ("met" if judged.high <= goal else "not met" if judged.low > goal
                   else "not resolved (interval spans the goal)")
        out.append(f"{line}; goal <= {goal}: **{verdict}**")
    if not out:
        return []
    return (["### Goals", "", f"Verdicts use the interval that resamples whole rounds when there are at least "
             f"{MIN_ROUNDS_TO_JUDGE} (the same rounds on both sides, so a round's drift stays paired), the per-batch "
             "interval otherwise.", ""] + out + [""])


def _fractions(raw: dict[str, Any], lim: dict[str, float]) -> list[str]:
    ups = [c for r in raw["results"] if r["setup"] == "sparkpoint-full-10s" and r["latency_ms"] == 0
           for c in r["checkpoints"] if c.get("async_s")]
    if not ups:
        return []
    rate = statistics.median(c["new_bytes"] / MIB / c["async_s"] for c in ups)
    return ["", f"Sparkpoint full checkpoints upload (hash + upload + commit) at {rate:.1f} MiB/s median: "
            f"{rate / lim['store_put_mib_s']:.0%} of raw PUT, {rate / lim['sha256_mib_s']:.0%} of sha256. Small "
            "checkpoints are dominated by per-request latency, not bandwidth."]


def _plots(raw: dict[str, Any], ratios: dict[tuple[int, str], stats.Ratio], plot: Callable[..., str]) -> list[str]:
    g = group(raw["results"])
    keys = sorted(g)
    if not keys:
        return []

    def boxes(ax) -> None:  # type: ignore[no-untyped-def]
        ax.boxplot([pooled(g[k]) for k in keys], showfliers=False)
        ax.set_xticks(range(1, len(keys) + 1), [f"{s}\n{lat} ms" for lat, s in keys], rotation=60, fontsize=7)
        ax.set_ylabel("micro-batch duration (s)")
    out = [plot("peers-batch-duration", f"Micro-batch duration by setup ({raw['size']} run)", boxes, (9, 4)), ""]
    floor = [(k, r) for k, r in sorted(ratios.items()) if k[1].endswith("/floor")]
    if floor:
        def bars(ax) -> None:  # type: ignore[no-untyped-def]
            vals = [r.value for _, r in floor]
            err = [[r.value - r.low for _, r in floor], [r.high - r.value for _, r in floor]]
            ax.bar(range(len(floor)), vals, yerr=err, capsize=3)
            ax.axhline(1.0, color="grey", lw=0.8)
            ax.axhline(1.05, color="tab:red", lw=0.8, ls="--", label="goal 1.05x")
            ax.set_xticks(range(len(floor)), [f"{k[1].split('/')[0]}\n{k[0]} ms" for k, _ in floor],
                          rotation=60, fontsize=7)
            ax.set_ylabel("median batch / floor")
            ax.legend(fontsize=7)
        out += [plot("peers-ratio-to-floor", "Median micro-batch duration relative to the floor (95% CI)",
                     bars, (9, 4)), ""]
    return out


RESTORE_GOAL = 0.70  # remote restore >= 70% of raw GET under CPU load


def _verdict(ci: list[float] | None) -> str:
    if not ci:
        return "(goal >= 70%)"
    lo, hi = ci
    verdict = "met" if lo >= RESTORE_GOAL else "not met" if hi < RESTORE_GOAL else "not resolved"
    return f"[{lo:.0%}, {hi:.0%}] resampling the repeats (goal >= 70%: **{verdict}**)"


def restore_lines(rs: dict[str, Any]) -> list[str]:
    """The restore-under-load paragraph (bench/peers/restore_load.py): rates, fractions, CPU.
    Results with a `before` (format 3 on) compare the crc32-checked restore with the sha256 one."""
    before = rs.get("before")
    check = "crc32-checked" if before else "sha256-verified"
    text = (f"{rs['files']} files x {rs['file_mib']} MiB restored from MinIO while {rs['burners']} busy-loop "
            f"processes hold every core (median of {rs['repeats']}): plain GETs (8 parallel, no hashing) "
            f"{rs['raw_get_mib_s']:.0f} MiB/s, Sparkpoint restore (8 workers, {check}, staged then "
            f"renamed) {rs['restore_mib_s']:.0f} MiB/s = **{rs['fraction']:.0%} of raw GET** "
            f"{_verdict(rs.get('fraction_ci'))}")
    if rs.get("fractions"):
        text += f"; per repeat (downloads in rotating order): {', '.join(f'{x:.0%}' for x in rs['fractions'])}"
    text += "."
    if before:
        text += (f" Before (the same objects under a manifest without crc32, checked by sha256 as every restore "
                 f"was before format 3): {before['restore_mib_s']:.0f} MiB/s = {before['fraction']:.0%} of raw GET "
                 f"{_verdict(before.get('fraction_ci'))}; per repeat: "
                 f"{', '.join(f'{x:.0%}' for x in before.get('fractions', []))}.")
    lines = [text]
    kinds = (("raw", "- plain GETs"), ("restore", f"- restore ({check})"), ("restore_sha256", "- restore (sha256)"))
    if "raw_cpu_user_s_per_gib" in rs:
        lines += ["", "CPU of the benchmark's process per GiB downloaded (median, user + system):"]
        lines += [f"{name} {rs[f'{k}_cpu_user_s_per_gib']:.2f} + {rs[f'{k}_cpu_sys_s_per_gib']:.2f} s"
                  for k, name in kinds if f"{k}_cpu_user_s_per_gib" in rs]
    elif "restore_cpu_s_per_gib" in rs:
        lines[0] += (f" CPU of the benchmark's process per GiB (median): plain GETs {rs['raw_cpu_s_per_gib']:.2f} s, "
                     f"restore {rs['restore_cpu_s_per_gib']:.2f} s.")
    if rs.get("page_reporting"):
        settings = ", ".join(f"{k}={v}" for k, v in rs["page_reporting"].items())
        lines += ["", f"The machine's guest kernel reports freed memory to its host ({settings}); every timed "
                  "download follows an untimed write and delete of as many bytes, so each meets the same "
                  "page cache (bench/peers/restore_load.py says why)."]
    return lines
