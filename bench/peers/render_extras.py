"""Report sections for the extra figures (extras.py): recovery after a kill, key churn, bucket bytes
over time with retention and GC. Pure functions of the raw results, plus their plots."""

from __future__ import annotations

import statistics
from collections.abc import Callable
from typing import Any

MIB = 1024 * 1024
RETENTION_GOAL = 1.5


def recovery_lines(ex: dict[str, Any]) -> list[str]:
    rows = ex.get("recovery") or []
    if not rows:
        return []
    j = ex.get("recovery_job", {})
    out = ["### Recovery after a kill", "",
           f"The windowed query ({j.get('rows_per_batch')} rows per batch, {j.get('keys')} keys, {j.get('batches')} "
           f"batches, trigger {j.get('trigger')}, Sparkpoint checkpoint interval {j.get('checkpoint_interval')}) is "
           "SIGKILLed (whole process group, JVM included) once it has a checkpoint and a few batches, and restarted. "
           "Time = from the restart (process start, JVM included) to the end of the first batch after the last "
           "one the killed process completed. Sparkpoint restarts twice: local (hot dir kept) and remote (the "
           "pod's disk wiped, restore from the store); vanilla Spark always restarts from its s3a:// "
           "checkpointLocation. Each run then goes on to the end and its output is compared with the "
           "independently computed result.", "",
           "| latency | setup | restart | restored from | killed after batch | state restore (s) "
           "| first new batch after restart (s) | output vs expected |", "| --- | --- | --- | --- | --- | --- | --- | --- |"]
    for r in rows:
        if r.get("correct") is None:
            verdict = "not checked (blackhole sink)"
        else:
            verdict = ("correct" if r["correct"] else
                       f"**wrong**: {r.get('missing')} missing, {r.get('extra_or_duplicate')} extra/duplicate") + \
                f" ({r.get('rows')} rows)"
        for x in r["restarts"]:
            rs = x.get("restore_seconds")
            out.append(f"| {r['latency_ms']} ms | {r['setup']} | {x['kind']} | {x.get('restored_from') or 'n/a'} "
                       f"| {x['killed_after_batch']} | {'n/a' if rs is None else f'{rs:.2f}'} "
                       f"| {x['first_new_batch_s']:.1f} | {verdict} |")
    if not any(r["setup"] == "flink" for r in rows):
        out += ["", "Flink: no recovery row in this run (not installed, or its run failed: see the list of "
                "failures above).", ""]
    else:
        out += ["", "Flink: SIGKILL after its first completed checkpoint to the store, restart from the newest "
                "retained chk-N (execution.state-recovery.path); time to records flowing again (no "
                "micro-batches). Its sink is a blackhole, so its output is not checked.", ""]
    return out


def replay_lines(ex: dict[str, Any]) -> list[str]:
    rows = ex.get("replay") or []
    if not rows:
        return []
    r0 = rows[0]
    out = ["### Remote restore against the RocksDB snapshot interval", "",
           f"The churn query ({r0['size']}, {r0['churn']:.0%} per interval, {r0['state_bytes'] / MIB:.0f} MiB of "
           "state) runs until a checkpoint covers a batch just before the longer interval's first snapshot, is "
           "SIGKILLed, its pod's disk is wiped, and it restarts from the store (bench/peers/replay.py). That is "
           "the longer interval's worst case: its restore replays every changelog since the fill. Time = from "
           "the restart (JVM included) to the end of the first new batch.", "",
           "| minDeltasForSnapshot | checkpoint (batch) | state files: snapshots / changelogs / SSTs "
           "| checkpoint MiB | state restore (s) | first new batch after restart (s) |",
           "| ---: | --- | --- | ---: | ---: | ---: |"]
    for r in sorted(rows, key=lambda r: r["min_deltas_for_snapshot"]):
        f = r["state_files"]
        rs = r.get("restore_seconds")
        out.append(f"| {r['min_deltas_for_snapshot']} | {r['checkpoint']} ({r['checkpoint_batch']}) "
                   f"| {f['snapshot']} / {f['changelog']} / {f['sst']} | {r['checkpoint_bytes'] / MIB:.1f} "
                   f"| {'n/a' if rs is None else f'{rs:.2f}'} | {r['first_new_batch_s']:.1f} |")
    by: dict[int, list[float]] = {}
    for r in rows:
        by.setdefault(r["min_deltas_for_snapshot"], []).append(r["first_new_batch_s"])
    if len(by) == 2:
        (a, ta), (b, tb) = sorted(by.items())
        ratio = statistics.median(tb) / statistics.median(ta)
        out += ["", f"Median time to the first new batch: {statistics.median(ta):.1f} s at {a}, "
                f"{statistics.median(tb):.1f} s at {b} ({ratio:.2f}x, {len(tb)} run(s) each, alternating).", ""]
    return out + [""]


# State partitions of the churn runs recorded before every setup ran with the same count (2026-11-24):
# Sparkpoint's spec default, the vanilla job's fixed 2, Flink's parallelism 1.
LEGACY_PARTITIONS = {"sparkpoint": 4, "vanilla": 2, "flink": 1}


def partitions_of(r: dict[str, Any]) -> int:
    if "partitions" in r:
        return int(r["partitions"])
    return next(n for prefix, n in LEGACY_PARTITIONS.items() if r["setup"].startswith(prefix))


def churn_rows(ex: dict[str, Any]) -> list[dict[str, Any]]:
    """One row per size, churn, latency, setup and partition count, pooling its runs (rounds): medians
    over their steady checkpoints (the fill's checkpoint excluded)."""
    groups: dict[tuple, list[dict[str, Any]]] = {}
    for r in ex.get("churn") or []:
        groups.setdefault((r["size"], r["churn"], r.get("latency_ms", 0), r["setup"], partitions_of(r)), []).append(r)
    out = []
    for (_, _, lat, _, parts), runs in groups.items():
        r = {**runs[0], "latency_ms": lat, "runs": len(runs), "partitions": parts}
        st = [s for x in runs for s in x.get("steady") or []]
        r["steady"] = st
        r["batch_durations"] = [d for x in runs for d in x.get("batch_durations") or []]
        if not st:
            out.append({**r, "n": 0})
            continue
        out.append({**r, "n": sum(s.get("batches", 1) for s in st), "uploaded": statistics.median(s["uploaded"] for s in st),
                    "changed": statistics.median(s["changed"] for s in st),
                    "ratio": statistics.median(s["ratio"] for s in st),
                    # What the run uploaded in all over what changed in all: the checkpoints that carry a
                    # RocksDB compaction (tens of MiB) count here, where the median passes over them.
                    "total_ratio": sum(s["uploaded"] for s in st) / max(1, sum(s["changed"] for s in st)),
                    "measured_churn": statistics.median(s["churn"] for s in st)})
    return out


def churn_lines(ex: dict[str, Any]) -> list[str]:
    rows = churn_rows(ex)
    if not rows:
        return []
    out = ["### Key churn: bytes uploaded per checkpoint vs bytes changed", "",
           "A keyed aggregation without windows (bench/peers/churn_query.py): the first batch loads every key, "
           "then each batch updates the next rows-per-batch keys of a rotating window, so a fixed fraction of the "
           "keys changes per 10 s checkpoint interval when batches keep up (10 batches per interval; under load "
           "fewer, hence the measured churn). Changed bytes = distinct keys updated since the previous checkpoint "
           "x bytes per state row (3 longs + payload), a logical measure: RocksDB's compaction rewrites more. "
           "Sparkpoint: new bytes of each checkpoint (the fill's checkpoint excluded); vanilla (changelog, a "
           "checkpoint per batch): bytes MinIO received per batch in steady state (state files, offset and commit "
           "logs, its asynchronous snapshot uploads). Flink (flink_job.py --query churn: the same keys per second "
           "from a datagen sequence, a SQL GROUP BY on RocksDB, incremental checkpoints every 10 s to the same "
           "MinIO): checkpointed_size of each checkpoint from its REST API, placed in the batch schedule by the "
           "aggregation's input count at its trigger time (the fill's checkpoint excluded). Rows pool their "
           "runs (rounds, alternating). Partitions: the state's partitions (Spark's shuffle partitions, "
           "Flink's parallelism), each one a RocksDB instance with files of its own; runs before 2026-11-24 had "
           f"unequal counts (Sparkpoint {LEGACY_PARTITIONS['sparkpoint']}, vanilla {LEGACY_PARTITIONS['vanilla']}, "
           f"Flink {LEGACY_PARTITIONS['flink']}), later ones the same count for every setup (--churn-partitions).", "",
           "| size | state (MiB) | churn per interval (nominal) | latency | setup | partitions | runs | checkpoints "
           "| measured churn per checkpoint | median uploaded (MiB) | median changed (MiB) "
           "| uploaded / changed (median) | total uploaded / total changed |",
           "| --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- |"]
    # Vanilla's one steady entry stands for `batches` checkpoints (one per batch).
    for r in rows:
        head = (f"| {r['size']} | {r['state_bytes'] / MIB:.1f} | {r['churn']:.0%} | {r['latency_ms']} ms "
                f"| {r['setup']} | {r['partitions']} | {r['runs']} | {r['n']} ")
        if not r["n"]:
            out.append(head + "| n/a | n/a | n/a | n/a | n/a |")
            continue
        out.append(head + f"| {r['measured_churn']:.2%} | {r['uploaded'] / MIB:.3f} | {r['changed'] / MIB:.3f} "
                   f"| {r['ratio']:.2f} | {r['total_ratio']:.2f} |")
    return out + [""] + duration_lines(rows) + ab_lines(rows)


def _durations(r: dict[str, Any]) -> dict[str, float] | None:
    """Medians over a run's steady checkpoints (those of churn.steady, so the fill's is left out)."""
    st = [s for s in r.get("steady") or [] if "sync_s" in s and "async_s" in s]
    if not st:
        return None
    b = r.get("batch_durations") or []
    return {"n": len(st), "sync": statistics.median(s["sync_s"] for s in st),
            "async": statistics.median(s["async_s"] for s in st),
            "total": statistics.median(s["sync_s"] + s["async_s"] for s in st),
            # The median passes over the checkpoints that carry a compaction or a snapshot; the mean
            # counts them: the time a job spends checkpointing in steady state.
            "mean": statistics.fmean(s["sync_s"] + s["async_s"] for s in st),
            "batch": statistics.median(b) if b else None}


def duration_lines(rows: list[dict[str, Any]]) -> list[str]:
    """Checkpoint durations at each size and churn, and the issue's goal: Sparkpoint's no worse than
    Flink's at equal state and churn (sync: the job waits; async: the upload in the background)."""
    timed = [(r, d) for r in rows if (d := _durations(r))]
    if not timed:
        return []
    out = ["Checkpoint durations in the same runs (medians over the steady checkpoints; Flink: the slowest "
           "subtask's sync and async phase; total = sync + async of one checkpoint; mean total: over every steady "
           "checkpoint, those carrying a compaction or a snapshot included; median batch: the batches "
           "the steady checkpoints ran beside, Sparkpoint only; the verdict compares median totals):", "",
           "| size | churn per interval | latency | setup | partitions | checkpoints | sync (s) | async (s) | total (s) "
           "| mean total (s) | median batch (s) |", "| --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- |"]
    out += [f"| {r['size']} | {r['churn']:.0%} | {r['latency_ms']} ms | {r['setup']} | {r['partitions']} | {d['n']} "
            f"| {d['sync']:.3f} "
            f"| {d['async']:.3f} | {d['total']:.3f} | {d['mean']:.3f} | {'n/a' if d['batch'] is None else format(d['batch'], '.3f')} |"
            for r, d in timed]
    out.append("")
    by = {(r["size"], r["churn"], r["latency_ms"], r["setup"], r["partitions"]): d for r, d in timed}
    for (size, c, lat, setup, n), sp in by.items():
        if not setup.startswith("sparkpoint-10s"):
            continue
        flinks = {fn: d for (s2, c2, l2, st, fn), d in by.items() if (s2, c2, l2, st) == (size, c, lat, "flink")}
        if not flinks:
            continue
        fn = n if n in flinks else min(flinks)
        fl = flinks[fn]
        parts = [f"{k} {sp[k]:.3f} vs {fl[k]:.3f} s ({sp[k] / fl[k]:.2f}x)" if fl[k] > 0
                 else f"{k} {sp[k]:.3f} vs {fl[k]:.3f} s" for k in ("sync", "async", "total", "mean")]
        if fn == n:
            where = f"{n} partitions each"
            verdict = "goal (checkpoint duration no worse than Flink's) " + ("met" if sp["total"] <= fl["total"] else "not met")
        else:  # runs from before the counts were equal: reported, but they judge nothing
            where = f"{n} partitions vs Flink's {fn}"
            verdict = "unequal partitions: no verdict"
        out.append(f"- {setup} vs Flink at {size}, {c:.0%} churn, {lat} ms, {where}: {', '.join(parts)}; {verdict}.")
    return out + [""]


AB_LABELS = {"nice": "Checkpoint nice", "inline": "Largest inline file (bytes)"}


def ab_lines(rows: list[dict[str, Any]]) -> list[str]:
    """The A/Bs of a runtime setting (--churn-nice, --churn-inline): what each value costs the
    checkpoint and the batches, pooled over the alternating rounds."""
    by: dict[tuple, dict[int, dict[str, float]]] = {}
    for r in rows:
        for knob in AB_LABELS:
            prefix = f"sparkpoint-10s-{knob}"
            if r["setup"].startswith(prefix) and (d := _durations(r)) and d["batch"] is not None:
                objects = [s["objects"] for s in r.get("steady") or [] if "objects" in s]
                by.setdefault((knob, r["size"], r["churn"], r["latency_ms"], r["partitions"]), {})[
                    int(r["setup"][len(prefix):])] = \
                    {**d, "runs": r["runs"], "objects": statistics.median(objects) if objects else None}
    out = []
    for (knob, size, c, lat, _), per in by.items():
        if len(per) < 2:
            continue
        lo, hi = min(per), max(per)
        a, b = per[lo], per[hi]
        line = (f"- {AB_LABELS[knob]} {lo} vs {hi} at {size}, {c:.0%} churn, {lat} ms ({a['runs']} and {b['runs']} "
                f"alternating runs): checkpoint total {a['total']:.3f} vs {b['total']:.3f} s "
                f"({a['total'] / b['total']:.2f}x), median batch {a['batch']:.3f} vs {b['batch']:.3f} s "
                f"({a['batch'] / b['batch']:.2f}x)")
        if a["objects"] is not None and b["objects"] is not None:
            line += f", objects uploaded per checkpoint {a['objects']:g} vs {b['objects']:g} (median)"
        out.append(line + ".")
    return (out + [""]) if out else []


def retention_lines(ex: dict[str, Any]) -> list[str]:
    rows = ex.get("retention") or []
    if not rows:
        return []
    plan = dict(ex.get("plan", {}))
    sp = next((r for r in rows if r["setup"].startswith("sparkpoint")), {})
    # A merged report's plan is the first run's: the Sparkpoint row records the GC it ran with.
    plan.update({k: sp[k] for k in ("gc_interval", "grace") if sp.get(k)})
    out = ["### Bucket bytes over time with retention and GC", "",
           f"The churn query (10% per interval) runs for {plan.get('retention_seconds', 0) / 60:.1f} min. Sparkpoint: "
           f"checkpoint every 10 s, retain 3, its GC loop (`sparkpoint gc`, the sidecar's command) every "
           f"{plan.get('gc_interval')} with grace {plan.get('grace')}; sampled every {plan.get('sample_seconds')} s: "
           "the job's checkpoint area in the bucket (objects/ and checkpoints/) against the "
           f"live bytes of the retained checkpoints (GC, dry run). Goal: <= {RETENTION_GOAL}x. The sink's output "
           "(outputs/; the GC sidecar collects it too) is counted on its own: its bytes and objects at the end, "
           "what of it readers and kept checkpoints still need (the output pass, dry run), and its growth over "
           "the settled half of the run. Vanilla: the same "
           "query with changelog checkpointing and Spark's own cleanup (spark.sql.streaming.minBatchesToRetain, "
           "default 100); everything under its checkpointLocation (its output goes to local disk).", "",
           "| setup | samples | state (MiB, logical) | bucket at end (MiB) | checkpoint area at end (MiB) "
           "| retained checkpoints (MiB) | area / retained: end, median, max (settled) "
           "| time-averaged (settled) | goal <= 1.5x | output at end (MiB, objects) | output needed at end (MiB) "
           "| output growth (MiB/min, settled) |",
           "| --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- |"]
    for r in rows:
        last = r["samples"][-1] if r["samples"] else {}
        live = last.get("live_bytes")
        avg = time_averaged_ratio(r["samples"])
        if r.get("final") is not None:
            verdict = ("met" if r["max_settled"] <= RETENTION_GOAL else
                       "met on average, not at the peak" if avg is not None and avg <= RETENTION_GOAL else "not met")
            ratio = f"{r['final']:.2f}, {r['median_settled']:.2f}, {r['max_settled']:.2f}"
        else:
            verdict, ratio = "n/a", "n/a"
        output = (f"{last['output_area'] / MIB:.2f}, {last['output_objects']}" if "output_area" in last else "n/a")
        needed = f"{last['output_needed'] / MIB:.2f}" if "output_needed" in last else "n/a"
        growth = output_growth(r["samples"])
        out.append(f"| {r['setup']} | {len(r['samples'])} | {r['state_bytes'] / MIB:.1f} "
                   f"| {last.get('total', 0) / MIB:.2f} | {last.get('checkpoint_area', 0) / MIB:.2f} "
                   f"| {'n/a' if live is None else f'{live / MIB:.2f}'} | {ratio} "
                   f"| {'n/a' if avg is None else f'{avg:.2f}'} | {verdict} | {output} | {needed} "
                   f"| {'n/a' if growth is None else f'{growth:.2f}'} |")
    return out + [""]


def output_growth(samples: list[dict[str, Any]], settle_fraction: float = 0.5) -> float | None:
    """MiB per minute the output area grew over the settled samples (from the first settled one to the
    last): about 0 once GC keeps it bounded; what readers need grows with the history they read."""
    with_output = [s for s in samples if "output_area" in s]
    if len(with_output) < 2:
        return None
    settled = [s for s in with_output if s["t"] >= with_output[-1]["t"] * settle_fraction]
    first, last = (settled[0], settled[-1]) if len(settled) >= 2 else (with_output[0], with_output[-1])
    if last["t"] <= first["t"]:
        return None
    return (last["output_area"] - first["output_area"]) / MIB / ((last["t"] - first["t"]) / 60)


def time_averaged_ratio(samples: list[dict[str, Any]], settle_fraction: float = 0.5) -> float | None:
    """Checkpoint-area bytes over live bytes, each summed over the settled samples (evenly spaced):
    the overhead a storage bill (GB-months) sees, where the median hides short peaks."""
    with_live = [s for s in samples if s.get("live_bytes")]
    if not with_live:
        return None
    settled = [s for s in with_live if s["t"] >= with_live[-1]["t"] * settle_fraction]
    return sum(s["checkpoint_area"] for s in settled) / sum(s["live_bytes"] for s in settled)


def plots(ex: dict[str, Any], plot: Callable[..., str]) -> list[str]:
    out = []
    rows = [r for r in ex.get("retention") or [] if r["samples"]]
    if rows:
        def lines(ax) -> None:  # type: ignore[no-untyped-def]
            for r in rows:
                t = [s["t"] / 60 for s in r["samples"]]
                ax.plot(t, [s["checkpoint_area"] / MIB for s in r["samples"]], label=f"{r['setup']}: checkpoint area")
                if any("output_area" in s for s in r["samples"]):
                    ax.plot(t, [s.get("output_area", 0) / MIB for s in r["samples"]], ls=":",
                            label=f"{r['setup']}: output")
                if any(s.get("live_bytes") for s in r["samples"]):
                    ax.plot(t, [s.get("live_bytes", 0) / MIB for s in r["samples"]], ls="--",
                            label=f"{r['setup']}: retained checkpoints")
            ax.set_xlabel("minutes")
            ax.set_ylabel("MiB")
            ax.legend(fontsize=7)
        out += [plot("peers-bucket-bytes", "Bucket bytes over time with retention and GC", lines, (8, 4)), ""]
    crow = [r for r in churn_rows(ex) if r["n"]]
    if crow:
        def bars(ax) -> None:  # type: ignore[no-untyped-def]
            setups = sorted({r["setup"] for r in crow})  # one colour per setup: Flink's bars stand out
            ax.bar(range(len(crow)), [r["ratio"] for r in crow],
                   color=[f"C{setups.index(r['setup'])}" for r in crow])
            ax.axhline(1.05, color="tab:red", lw=0.8, ls="--", label="goal 1.05x")
            ax.set_xticks(range(len(crow)), [f"{r['setup']} p{r['partitions']}\n{r['size']} {r['churn']:.0%} {r['latency_ms']} ms" for r in crow],
                          rotation=60, fontsize=7)
            ax.set_yscale("log")
            ax.set_ylabel("uploaded / changed bytes per checkpoint")
            ax.legend(fontsize=7)
        out += [plot("peers-churn-upload-ratio", "Uploaded vs changed bytes per checkpoint", bars, (8, 4)), ""]
    return out
