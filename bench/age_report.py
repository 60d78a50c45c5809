"""The age bench's section of docs/benchmarks.md: its tables, growth laws, ratios and plot (bench/age_bench.py
measures; this renders)."""

from __future__ import annotations

from typing import Any

import age_fit  # bench/age_fit.py
import report  # bench/report.py

START = "<!-- age:start -->"
END = "<!-- age:end -->"
DAY = 8_640  # 10 s checkpoints
AGES = {DAY: "1 day", 7 * DAY: "1 week", 30 * DAY: "1 month", 365 * DAY: "1 year"}
METRICS = ["gc_rss_mib", "gc_seconds", "gc_get", "gc_list_pages", "gc_keys_listed", "read_rss_mib", "read_seconds",
           "read_get", "read_keys_listed", "resume_get", "resume_keys_listed", "outside_bytes", "outside_per_data",
           "start_rss_mib", "start_seconds", "start_get", "start_keys_listed", "first_gc_rss_mib"]
PREFIXES = ["_commits", "_snapshots", "_delta_log", "_compactions", "_restores", "upserts", "other"]


def ratio(rows: list[dict[str, Any]], metric: str, i: int = -1) -> str:
    """The figure of row i (default: the oldest store) over the youngest one's."""
    first, last = rows[0].get(metric), rows[i].get(metric)
    return "n/a" if not first or last is None else f"{last / first:.2f}"


def render(rows: list[dict[str, Any]], meta: dict[str, Any], before: list[dict[str, Any]] | None = None,
           plot: Any = None) -> str:
    before = before or []
    label = {r["checkpoints"]: AGES.get(r["checkpoints"], f"{r['checkpoints']:,} checkpoints") for r in rows + before}
    lines = [START, "## Costs against a job's age (bench/age_bench.py)", "",
             "A job of 10 s checkpoints aged N checkpoints (one batch and one Parquet part per checkpoint, one "
             "linear history, 3 checkpoints retained), built directly in a directory store: a transactional sink's, "
             "and a delta sink's (the same, with the Delta log the sink writes: a commit per checkpoint dated when "
             "it ran, and delta-rs's checkpoint of the table; bench/age_stores.py), and an upsert sink's (100 keys "
             "updated by every batch, as its runtime and GC leave it: the newest hourly snapshot and the batches since, "
             "written by the sink itself; its `read` is the upsert reader's first 10 rows); each command in its own "
             "process (peak RSS from GNU time) with every store request "
             "counted (LIST pages at 1,000 keys a page; delimiter and start-after listings too). GC figures are of a "
             "second `gc --once` pass (the first deletes what the store's age left, and from output GC cursors on "
             "writes the cursor the second starts from: its DELETEs and peak RSS are in the last two columns). Rows marked *before* "
             f"ran {meta.get('before', 'the code before history snapshots')}. Commit {meta['commit']}, {meta['date']}, load average "
             f"{meta['load']} on 2 shared cores (seconds depend on the load; requests and RSS do not). The second table "
             "breaks the bytes outside data down by prefix, beside the data a retained point reads (part files); under "
             "it, each metric's law fitted over the measured ages (bench/age_fit.py), from which the rows marked "
             "*extrapolated* are computed, not measured.", "",
             "| sink: age | gc peak RSS | gc s | gc GET | gc LIST pages / keys | gc PUT / DELETE | read --limit 10: "
             "peak RSS | s | GET | keys listed | resume: GET | keys listed | bytes outside data | entries past the newest "
             "snapshot | first pass: DELETEs | peak RSS |",
             "| --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: |"]
    sinks = list(dict.fromkeys(r.get("sink", "transactional") for r in [*rows, *before]))
    ordered = [r for sink in sinks for r in [*[{**b, "before": True} for b in before], *rows]
               if r.get("sink", "transactional") == sink]
    for r in ordered:
        lines.append(
            f"| {r.get('sink', 'transactional')}: {'*before*: ' if r.get('before') else ''}"
            f"{label[r['checkpoints']]} ({r['checkpoints']:,}){' at ' + r['carried'] if r.get('carried') else ''} | "
            f"{r['gc_rss_mib']} MiB | {r['gc_seconds']} | "
            f"{r['gc_get']:,} | {r['gc_list_pages']:,} / {r['gc_keys_listed']:,} | {r['gc_put']} / {r['gc_delete']} | "
            f"{_mib(r.get('read_rss_mib'))} | {r['read_seconds']} | {r['read_get']:,} | {r['read_keys_listed']:,} | "
            f"{r['resume_get']:,} | "
            f"{r['resume_keys_listed']:,} | {r['outside_bytes']:,} | {r.get('since_snapshot', r['checkpoints']):,} | "
            f"{r.get('first_gc_delete', 0):,} | {r.get('first_gc_rss_mib', 'n/a')} |")
    lines += start_table(ordered)
    lines += bytes_table(ordered)
    for sink in sinks:
        mine = [r for r in rows if r.get("sink", "transactional") == sink and not r.get("extrapolated")]
        if len(mine) >= 2:
            lines += ["", age_fit.law_text(sink, mine, [m for m in METRICS if m not in SKIP.get(sink, ())])]
    for sink in sinks:
        for name, everything in [("before", before), ("now", rows)]:
            group = [r for r in everything if r.get("sink", "transactional") == sink]
            for i in range(1, len(group)):
                lines += ["", f"{sink}, {name}: ratio of {label[group[i]['checkpoints']]}"
                          f"{' (extrapolated)' if group[i].get('extrapolated') else ''} to "
                          f"{label[group[0]['checkpoints']]}: " + ", ".join(
                              f"{m} {ratio(group, m, i)}" for m in METRICS if m not in SKIP.get(sink, ())) + "."]
    if plot is not None:
        lines += ["", plot(rows, before)]
    lines += ["", meta["conclusion"], END]
    return "\n".join(lines)


def _mib(value: Any) -> str:
    return "n/a" if value is None else f"{value} MiB"


def start_table(rows: list[dict[str, Any]]) -> list[str]:
    """A start's claim and restore (the attempt claim, its restart count, the restore plan and restore)."""
    rows = [r for r in rows if r.get("start_get") is not None]
    if not rows:
        return []
    out = ["", "| sink: age | starts so far | a start's claim and restore: peak RSS | s | GET | HEAD | "
           "LIST pages / keys | PUT |", "| --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: |"]
    for r in rows:
        age = AGES.get(r["checkpoints"], f"{r['checkpoints']:,} checkpoints")
        mark = "*before*: " if r.get("before") else ""
        extra = " (extrapolated)" if r.get("extrapolated") else ""
        out.append(f"| {r.get('sink', 'transactional')}: {mark}{age}{extra} | {max(1, r['checkpoints'] // DAY):,} | "
                   f"{_mib(r.get('start_rss_mib'))} | {r.get('start_seconds', 'n/a')} | {r['start_get']:,} | "
                   f"{r.get('start_head', 'n/a')} | {r.get('start_list_pages', 'n/a')} / {r['start_keys_listed']:,} | "
                   f"{r.get('start_put', 'n/a')} |")
    return out


def bytes_table(rows: list[dict[str, Any]]) -> list[str]:
    """Where the bytes outside data are, per prefix, and their ratio to the data a retained point reads."""
    rows = [r for r in rows if "bytes" in r]
    if not rows:
        return []
    out = ["", "| sink: age | data bytes | " + " | ".join(f"`{p}`" for p in PREFIXES) + " | outside / data |",
           "| --- | ---: | " + " | ".join("---:" for _ in PREFIXES) + " | ---: |"]
    for r in rows:
        age = AGES.get(r["checkpoints"], f"{r['checkpoints']:,} checkpoints")
        mark = "*before*: " if r.get("before") else ""
        out.append(f"| {r.get('sink', 'transactional')}: {mark}{age} | {r['data_bytes']:,} | "
                   + " | ".join(f"{r['bytes'].get(p, 0):,}" for p in PREFIXES) + f" | {r['outside_per_data']} |")
    return out


SKIP = {"delta": ("resume_get", "resume_keys_listed"),  # not measured for a delta or upsert sink
        "delta-compacted": ("resume_get", "resume_keys_listed"),
        "upsert": ("resume_get", "resume_keys_listed", "start_rss_mib", "start_seconds", "start_get", "start_keys_listed")}
PLOTTED = [("gc_rss_mib", "GC peak RSS (MiB)", "o"), ("gc_get", "GC GETs / 100", "s"),
           ("read_rss_mib", "read --limit 10 peak RSS (MiB)", "^")]
SCALE = {"gc_get": 100}


def draw(rows: list[dict[str, Any]], before: list[dict[str, Any]]) -> str:
    """GC pass costs against age per sink (a color each), this code (solid) and the code before
    (dashed), both axes logarithmic (a flat line is a cost bounded by age)."""
    def lines(ax: Any) -> None:
        sinks = list(dict.fromkeys(r.get("sink", "transactional") for r in [*rows, *before]))
        for i, sink in enumerate(sinks):
            for metric, label, marker in PLOTTED:
                for group, style in ((rows, "-"), (before, "--")):
                    mine = [r for r in group if r.get("sink", "transactional") == sink and r.get(metric) is not None]
                    measured = [r for r in mine if not r.get("extrapolated")]
                    if measured:
                        ax.plot([r["checkpoints"] / DAY for r in measured],
                                [r[metric] / SCALE.get(metric, 1) for r in measured], style, marker=marker,
                                color=f"C{i}", label=f"{sink}: {label}{' (before)' if style == '--' else ''}")
                    if measured and len(mine) > len(measured):  # the year from the fitted law: dotted, hollow
                        ends = [measured[-1], mine[-1]]
                        ax.plot([r["checkpoints"] / DAY for r in ends], [r[metric] / SCALE.get(metric, 1) for r in ends],
                                ":", marker=marker, markerfacecolor="none", color=f"C{i}")
        ax.set_xscale("log")
        ax.set_yscale("log")
        ax.set_xlabel("job age (days of 10 s checkpoints; dotted, hollow: a year extrapolated from the fitted law)")
        ax.legend(fontsize=6, ncol=3, loc="upper center", bbox_to_anchor=(0.5, -0.16))
    return report.plot("age-gc", "Output GC pass against the job's age", lines, size=(7, 5.2))
