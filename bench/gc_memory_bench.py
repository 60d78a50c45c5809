"""GC sidecar memory: peak RSS of one `sparkpoint gc --once` pass over a delta sink's output (issue 27).

The sidecar's output pass loads the job's Delta table with delta-rs (its current version's files, the
commit files inside the Delta retention) and the readers' chain of commit entries. Its container limit
was 256Mi; this measures what the pass needs as the table grows. Per size N a directory store is
built directly (no Spark): N commit entries in one chain, each naming one Parquet data file (N real
files, a tiny one copied), and the Delta table over them written with delta-rs in commits of 100 adds
(delta-rs writes its log checkpoint every 100 commits, so a load replays a checkpoint of N adds and a
short tail, as a long-running job's table does); with `--removes`, a last commit removes half the
files (a restore to an older point inside the retention: the pass then also reads those removals).
Peak RSS is GNU time's "maximum resident set size" of the process; a bare `sparkpoint --help` is the
Python baseline.

    python bench/gc_memory_bench.py                  # N = 10k, 30k, 60k; updates docs/benchmarks.md
    python bench/gc_memory_bench.py --small          # N = 2k, 5k
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import report  # bench/report.py; bench/ is on sys.path when this runs as a script

START = "<!-- gc-memory:start -->"
END = "<!-- gc-memory:end -->"
JOB = ("default", "bench")


def _rss_kib(cmd: list[str]) -> tuple[int, float, str]:
    """(peak RSS in KiB, seconds, stdout) of one command, from GNU time."""
    fmt = "__rss__ %M"
    t0 = time.monotonic()
    p = subprocess.run(["/usr/bin/time", "-f", fmt, *cmd], capture_output=True, text=True, check=False)
    seconds = time.monotonic() - t0
    if p.returncode != 0:
        raise RuntimeError(f"{cmd[:4]} exited {p.returncode}: {p.stderr[-2000:]}")
    line = next(x for x in p.stderr.splitlines() if x.startswith("__rss__"))
    return int(line.split()[1]), seconds, p.stdout


def build(root: Path, n: int, removes: bool) -> str:
    """A directory store with one delta sink of `n` files; returns its URL."""
    import pyarrow as pa
    import pyarrow.parquet as pq
    from deltalake import CommitProperties, Schema
    from deltalake.transaction import AddAction, RemoveAction, create_table_with_add_actions

    from sparkpoint.runtime.store import JobRef

    job = JobRef(*JOB)
    commits = root / job.root / "outputs" / "default" / "_commits"
    commits.mkdir(parents=True)
    table_root = root / job.root / "outputs" / "default"
    root.mkdir(parents=True, exist_ok=True)
    sample = root / "sample.parquet"
    pq.write_table(pa.table({"v": pa.array([1], pa.int64())}), sample)
    size = sample.stat().st_size
    previous = None
    rel_paths = []
    for i in range(n):
        rel = f"staging/attempt-1/batch-{i:09d}-0a0a0a0a0a0a/part-00000.parquet"
        dest = table_root / rel
        dest.parent.mkdir(parents=True, exist_ok=True)
        os.link(sample, dest)  # one inode, n names: the listing is what matters
        rel_paths.append(rel)
        cid = f"chk-{i + 1:06d}"
        entry = {"checkpoint": cid, "attempt": 1, "previous": previous, "afterBatch": i - 1, "upToBatch": i,
                 "incarnation": "uid", "files": [{"batch": i, "rows": 1, "format": "parquet",
                                                  "keys": [f"{job.root}/outputs/default/{rel}"],
                                                  "parts": [{"size": size, "rows": 1}]}]}
        (commits / f"{cid}.json").write_text(json.dumps(entry))  # plain writes: the build is not measured
        previous = cid
    now = int(time.time() * 1000)

    def add(rel: str) -> Any:
        return AddAction(rel, size, {}, now, True, json.dumps({"numRecords": 1}))
    uri = str(table_root)
    schema = Schema.from_arrow(pa.schema([("v", pa.int64())]))
    create_table_with_add_actions(uri, schema, [add(p) for p in rel_paths[:100]], mode="error",
                                  commit_properties=CommitProperties(custom_metadata={"sparkpoint.checkpoint": "chk-000100"}))
    from deltalake import DeltaTable as Dt

    table = Dt(uri)
    for start in range(100, n, 100):
        chunk = rel_paths[start:start + 100]
        table.create_write_transaction([add(p) for p in chunk], mode="append", schema=table.schema(),
                                       commit_properties=CommitProperties(custom_metadata={
                                           "sparkpoint.checkpoint": f"chk-{start + len(chunk):06d}"}))
        table.update_incremental()
    if removes:
        table.create_write_transaction([RemoveAction(path=p, data_change=True, deletion_timestamp=now)
                                        for p in rel_paths[n // 2:]], mode="append", schema=table.schema())
    return f"file://{root}"


def measure(n: int, removes: bool, base: Path) -> dict[str, Any]:
    root = base / f"n{n}{'-removes' if removes else ''}"
    t0 = time.monotonic()
    url = build(root, n, removes)
    build_s = time.monotonic() - t0
    exe = [sys.executable, "-m", "sparkpoint.runtime.cli"]
    rss, seconds, out = _rss_kib([*exe, "gc", "--store", url, "--job", "/".join(JOB), "--retain", "3",
                                  "--grace", "0s", "--delta-retention", "168h", "--once", "--dry-run", "--json"])
    table_uri = str(root / JOB[0] / JOB[1] / "outputs" / "default")
    load_rss, load_s, _ = _rss_kib([sys.executable, "-c", (
        "import sys; from deltalake import DeltaTable; import pyarrow as pa; "
        f"t = DeltaTable({table_uri!r}); print(pa.table(t.get_add_actions(flatten=True)).num_rows)")])
    shutil.rmtree(root, ignore_errors=True)
    output = json.loads(out.strip().splitlines()[-1])["output"]
    if output["skipped_paths"] or output["live_files"] < n // (2 if removes else 1):
        raise RuntimeError(f"the pass did not look at the table: {output}")
    return {"files": n, "removes": removes, "live_files": output["live_files"], "gc_rss_mib": round(rss / 1024, 1), "gc_seconds": round(seconds, 1),
            "load_rss_mib": round(load_rss / 1024, 1), "load_seconds": round(load_s, 1),
            "build_seconds": round(build_s, 1)}


def render(rows: list[dict[str, Any]], baseline_mib: float, meta: dict[str, Any]) -> str:
    lines = [START, "## GC sidecar memory (bench/gc_memory_bench.py)", "",
             f"Peak RSS of one `sparkpoint gc --once --dry-run` pass over a delta sink of N files (one commit "
             f"entry and one data file per checkpoint, the Delta log in commits of 100 adds), beside "
             f"delta-rs alone loading the table (`DeltaTable(uri).get_add_actions()` in a bare Python). "
             f"Python baseline (`sparkpoint --help`): {baseline_mib} MiB. Commit {meta['commit']}, "
             f"{meta['date']}, load average {meta['load']} on 2 shared cores (RSS does not depend on the load; "
             f"the seconds do).", "",
             "| files | removes inside the retention | gc pass peak RSS | gc pass seconds | delta-rs load alone: peak RSS | seconds |",
             "| ---: | --- | ---: | ---: | ---: | ---: |"]
    for r in rows:
        lines.append(f"| {r['files']:,} | {'half the files' if r['removes'] else 'none'} | {r['gc_rss_mib']} MiB | "
                     f"{r['gc_seconds']} | {r['load_rss_mib']} MiB | {r['load_seconds']} |")
    lines += ["", meta["conclusion"], END]
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--small", action="store_true", help="N = 2k, 5k")
    parser.add_argument("--sizes", default=None, help="comma-separated N (default 10000,30000,60000)")
    parser.add_argument("--no-write", action="store_true", help="print, do not update docs/benchmarks.md")
    parser.add_argument("--conclusion", default="", help="the sentence under the table (what the limit became)")
    parser.add_argument("--results", default=None,
                        help="render the JSON rows an earlier run of this script printed (a file), do not measure")
    parser.add_argument("--load", default=None, help="with --results: the load average seen during that run")
    parser.add_argument("--commit", default=None, help="with --results: the commit that run measured")
    args = parser.parse_args(argv)
    if args.results:
        rows = [json.loads(line) for line in Path(args.results).read_text().splitlines() if line.startswith('{"files"')]
        commit = args.commit or report.commit()
        baseline, _, _ = _rss_kib([sys.executable, "-m", "sparkpoint.runtime.cli", "--help"])
        section = render(rows, round(baseline / 1024, 1), {"commit": commit, "date": time.strftime("%Y-%m-%d"),
                                                           "load": args.load or "not recorded",
                                                           "conclusion": args.conclusion})
        return report.publish(START, END, section, write=not args.no_write)
    sizes = [int(s) for s in (args.sizes or ("2000,5000" if args.small else "10000,30000,60000")).split(",")]
    base = Path(tempfile.mkdtemp(prefix="sparkpoint-gc-memory-"))
    try:
        baseline, _, _ = _rss_kib([sys.executable, "-m", "sparkpoint.runtime.cli", "--help"])
        rows = []
        for n in sizes:
            for removes in (False, True):
                rows.append(measure(n, removes, base))
                print(json.dumps(rows[-1]), flush=True)
    finally:
        shutil.rmtree(base, ignore_errors=True)
    meta = {"commit": report.commit(), "date": time.strftime("%Y-%m-%d"), "load": " ".join(f"{x:.1f}" for x in os.getloadavg()),
            "conclusion": args.conclusion}
    return report.publish(START, END, render(rows, round(baseline / 1024, 1), meta), write=not args.no_write)


if __name__ == "__main__":
    sys.exit(main())
