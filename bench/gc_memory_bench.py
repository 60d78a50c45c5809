"""GC sidecar memory: what sets the sidecar's limit (issues 27 and 39).

The output pass no longer grows with the job's age (bench/age_bench.py measures it at a day, a week and
a month, the first full pass too). What still sizes a pass is what is retained, and the biggest of that
is the checkpoint half: it loads each retained manifest (one FileEntry per state file) and holds the
digests of every retained object and the listing of `objects/`. Per size F a directory store is built
directly (no Spark): 3 retained checkpoints of F state files each, a tenth of them changed from one
checkpoint to the next (incremental checkpoints share the rest), every object present. With `--delta`,
the older measurement: a delta sink of N files (one commit entry and one data file per checkpoint, the
Delta log in commits of 100 adds, and half of them removed in a second row), beside delta-rs alone
loading the table. Peak RSS is GNU time's "maximum resident set size"; a bare `sparkpoint --help` is
the Python baseline.

    python bench/gc_memory_bench.py                  # F = 2k, 20k, 50k state files; updates docs/benchmarks.md
    python bench/gc_memory_bench.py --small          # F = 2k, 20k
    python bench/gc_memory_bench.py --delta          # the delta table rows instead (N = 10k, 30k, 60k)
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
from age_stores import aged_past_grace

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


def build_state(root: Path, files: int) -> str:
    """A directory store of 3 retained checkpoints of `files` state files each (a tenth of them changed
    from one checkpoint to the next, the rest shared, as incremental checkpoints are), every object
    present; returns its URL."""
    import hashlib

    from sparkpoint.runtime.store import JobRef, Manifest, open_store
    from sparkpoint.runtime.store.layout import checkpoint_key, object_key
    from sparkpoint.runtime.store.manifest import FileEntry, Totals, utcnow

    job = JobRef(*JOB)
    root.mkdir(parents=True, exist_ok=True)
    sample = root / "sample.bin"
    sample.write_bytes(b"x")
    store = open_store(f"file://{root}")
    shas = [hashlib.sha256(f"file-{i}-0".encode()).hexdigest() for i in range(files)]
    links = 0
    for n in range(1, 4):
        if n > 1:  # a tenth of the files changed since the checkpoint before
            for i in range(0, files, 10):
                shas[i] = hashlib.sha256(f"file-{i}-{n}".encode()).hexdigest()
        for sha in (shas if n == 1 else shas[::10]):
            dest = root / object_key(job, sha)
            dest.parent.mkdir(parents=True, exist_ok=True)
            if links and links % 60_000 == 0:  # a file takes at most 65,000 hard links (ext4)
                sample = root / f"sample-{links}.bin"
                sample.write_bytes(b"x")
            os.link(sample, dest)
            links += 1
        now = utcnow()
        entries = [FileEntry(path=f"state/0/{i % 200}/{i}.sst", size=1, sha256=sha) for i, sha in enumerate(shas)]
        store.put_bytes(checkpoint_key(job, f"chk-{n:06d}"), Manifest(
            id=f"chk-{n:06d}", namespace=job.namespace, job=job.name, job_uid="uid", attempt=1, batch_id=n,
            trigger_time=now, completion_time=now, base_checkpoint=None, spark_version=None, state_provider=None,
            files=entries, totals=Totals(files=files, bytes=files, new_bytes=0, reused_bytes=0)).to_json())
    return aged_past_grace(root)


def measure_state(files: int, base: Path) -> dict[str, Any]:
    root = base / f"state{files}"
    url = build_state(root, files)
    rss, seconds, out = _rss_kib([sys.executable, "-m", "sparkpoint.runtime.cli", "gc", "--store", url, "--job",
                                  "/".join(JOB), "--retain", "3", "--grace", "0s", "--once", "--json"])
    shutil.rmtree(root, ignore_errors=True)
    result = json.loads(out.strip().splitlines()[-1])
    live = result.get("checkpoints", result).get("live_objects")
    if live is not None and live < files:
        raise RuntimeError(f"the pass did not weigh the retained objects: {result}")
    return {"state_files": files, "live_objects": live, "gc_rss_mib": round(rss / 1024, 1),
            "gc_seconds": round(seconds, 1)}


def render(rows: list[dict[str, Any]], baseline_mib: float, meta: dict[str, Any]) -> str:
    state = [r for r in rows if "state_files" in r]
    table = [r for r in rows if "files" in r]
    lines = [START, "## GC sidecar memory (bench/gc_memory_bench.py)", "",
             f"Python baseline (`sparkpoint --help`): {baseline_mib} MiB. Commit {meta['commit']}, {meta['date']}, "
             f"load average {meta['load']} on 2 shared cores (RSS does not depend on the load; the seconds do)."]
    if state:
        lines += ["", "Peak RSS of one `sparkpoint gc --once` pass (its checkpoint pass and its output pass) over 3 "
                  "retained checkpoints of F state files each, a tenth changed from one to the next, every object "
                  "present:", "", "| state files per checkpoint | objects retained | gc pass peak RSS | seconds |",
                  "| ---: | ---: | ---: | ---: |"]
        lines += [f"| {r['state_files']:,} | {r['live_objects']:,} | {r['gc_rss_mib']} MiB | {r['gc_seconds']} |"
                  for r in state]
        if len(state) >= 2:
            a, b = state[0], state[-1]
            slope = (b["gc_rss_mib"] - a["gc_rss_mib"]) * 1024 / (b["state_files"] - a["state_files"])
            lines += ["", f"Slope: {slope:.2f} KiB of peak RSS per state file of a retained checkpoint "
                          f"({a['state_files']:,} to {b['state_files']:,} files)."]
    if table:
        lines += ["", "Peak RSS of one `sparkpoint gc --once --dry-run` pass over a delta sink of N files (one commit "
                  "entry and one data file per checkpoint, the Delta log in commits of 100 adds), beside delta-rs alone "
                  "loading the table (`DeltaTable(uri).get_add_actions()` in a bare Python):", "",
                  "| files | removes inside the retention | gc pass peak RSS | gc pass seconds | delta-rs load alone: "
                  "peak RSS | seconds |", "| ---: | --- | ---: | ---: | ---: | ---: |"]
        lines += [f"| {r['files']:,} | {'half the files' if r['removes'] else 'none'} | {r['gc_rss_mib']} MiB | "
                  f"{r['gc_seconds']} | {r['load_rss_mib']} MiB | {r['load_seconds']} |" for r in table]
    lines += ["", meta["conclusion"], END]
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--small", action="store_true", help="F = 2k, 20k (with --delta: N = 2k, 5k)")
    parser.add_argument("--sizes", default=None, help="comma-separated F (default 2000,20000,50000), or N with --delta")
    parser.add_argument("--delta", action="store_true", help="the delta table rows instead of the state rows")
    parser.add_argument("--no-write", action="store_true", help="print, do not update docs/benchmarks.md")
    parser.add_argument("--conclusion", default="", help="the sentence under the table (what the limit became)")
    parser.add_argument("--results", default=None,
                        help="render the JSON rows an earlier run of this script printed (a file), do not measure")
    parser.add_argument("--load", default=None, help="with --results: the load average seen during that run")
    parser.add_argument("--commit", default=None, help="with --results: the commit that run measured")
    args = parser.parse_args(argv)
    if args.results:
        rows = [json.loads(line) for line in Path(args.results).read_text().splitlines()
                if line.startswith(('{"files"', '{"state_files"'))]
        commit = args.commit or report.commit()
        baseline, _, _ = _rss_kib([sys.executable, "-m", "sparkpoint.runtime.cli", "--help"])
        section = render(rows, round(baseline / 1024, 1), {"commit": commit, "date": time.strftime("%Y-%m-%d"),
                                                           "load": args.load or "not recorded",
                                                           "conclusion": args.conclusion})
        return report.publish(START, END, section, write=not args.no_write)
    default = ("2000,5000" if args.small else "10000,30000,60000") if args.delta else (
        "2000,20000" if args.small else "2000,20000,50000")
    sizes = [int(s) for s in (args.sizes or default).split(",")]
    base = Path(tempfile.mkdtemp(prefix="sparkpoint-gc-memory-"))
    load_at_start = " ".join(f"{x:.1f}" for x in os.getloadavg())
    try:
        baseline, _, _ = _rss_kib([sys.executable, "-m", "sparkpoint.runtime.cli", "--help"])
        rows = []
        for n in sizes:
            for removes in ((False, True) if args.delta else (None,)):
                rows.append(measure(n, bool(removes), base) if args.delta else measure_state(n, base))
                print(json.dumps(rows[-1]), flush=True)
    finally:
        shutil.rmtree(base, ignore_errors=True)
    meta = {"commit": report.commit(), "date": time.strftime("%Y-%m-%d"),
            "load": f"{load_at_start} at the start, {' '.join(f'{x:.1f}' for x in os.getloadavg())} at the end",
            "conclusion": args.conclusion}
    return report.publish(START, END, render(rows, round(baseline / 1024, 1), meta), write=not args.no_write)


if __name__ == "__main__":
    sys.exit(main())
