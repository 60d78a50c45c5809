"""Costs against a job's age: GC pass, `output read`, a start's sink resume, on stores aged N checkpoints (issue 39).

A store in the documented layout is built directly (no Spark) to look like a transactional-sink job
of 10 s checkpoints aged N checkpoints: one batch and one Parquet part per checkpoint (the least a
job writes; the parts are hard links of one tiny file, the listing is what matters), one linear
history of commit entries, and the last 3 checkpoints' manifests retained (`--retain 3`). Then, each
in its own process under GNU time (peak RSS) with the store wrapped in a request counter (LIST calls
and the S3 pages they would cost at 1,000 keys a page, keys listed, GET, HEAD, PUT, DELETE):

- `sparkpoint gc --once` (the checkpoint pass and the output pass, as the sidecar runs them);
- `sparkpoint output read --limit 10`;
- a start's sink resume (TransactionalSink.resume of the newest checkpoint, as the runtime does);
- a start's claim and restore (the attempt claim, the in-place restart count and `restore_on_start`:
  the listings, the plan and the restore of the newest checkpoint, as the runtime does before its query).

The store's job restarted once a day of its age (an attempt claim each, as the runtime writes them),
so what a start reads of `attempts/` is measured against age too.

Where the code has history snapshots (runtime/sink/history.py), the store holds those the runtime
writes as it publishes (written by the build with the runtime's own function). A first GC pass
collects what the store's age left behind; the GC figures are of a second, steady-state pass. Bytes outside
retained data: everything under the job's root that is neither a file of the history nor a
checkpoint object (commit entries, snapshots, records).

    python bench/age_bench.py            # N = 8,640 (1 day), 60,480 (1 week), 259,200 (1 month); updates docs/benchmarks.md
    python bench/age_bench.py --small    # N = 8,640 and 60,480
    python bench/age_bench.py --before-tree DIR   # also each age with DIR's code (an earlier checkout), side by side
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

import age_fit  # bench/age_fit.py; bench/ is on sys.path when this runs as a script
import report  # bench/report.py
from age_report import DAY, END, METRICS, SKIP, START, draw, render
from age_stores import HOUR, aged_past_grace

JOB = ("default", "aged")
YEAR = 365 * DAY


# --- the counted child: runs one command with the store wrapped --------------------------------------
def counting(store: Any, counts: dict[str, int]) -> Any:
    """Wrap a store's methods so every request is counted (by what it would cost on S3)."""
    def wrap(name: str, kind: str) -> None:
        inner = getattr(store, name)

        def call(*a: Any, **kw: Any) -> Any:
            counts[kind] = counts.get(kind, 0) + 1
            return inner(*a, **kw)
        setattr(store, name, call)

    for name, kind in [("get_bytes", "get"), ("get_file", "get"), ("stat", "head"), ("exists", "head"),
                       ("put_bytes", "put"), ("put_if_absent", "put"), ("put_file", "put"), ("delete", "delete"),
                       ("copy", "put")]:
        wrap(name, kind)
    inner_list = store.list

    def listing(prefix: str, *a: Any, **kw: Any) -> Any:
        keys = 0
        for info in inner_list(prefix, *a, **kw):
            keys += 1
            yield info
        counts["list_calls"] = counts.get("list_calls", 0) + 1
        counts["list_pages"] = counts.get("list_pages", 0) + max(1, -(-keys // 1000))
        counts["keys_listed"] = counts.get("keys_listed", 0) + keys
    store.list = listing
    if not hasattr(store, "list_after"):  # code from before cursors (a --before run)
        return store
    inner_after, inner_children = store.list_after, store.list_children

    def listing_after(prefix: str, start_after: str) -> Any:
        keys = 0
        for info in inner_after(prefix, start_after):
            keys += 1
            yield info
        counts["list_calls"] = counts.get("list_calls", 0) + 1
        counts["list_pages"] = counts.get("list_pages", 0) + max(1, -(-keys // 1000))
        counts["keys_listed"] = counts.get("keys_listed", 0) + keys

    def children(prefix: str) -> Any:
        names = inner_children(prefix)
        counts["list_calls"] = counts.get("list_calls", 0) + 1
        counts["list_pages"] = counts.get("list_pages", 0) + max(1, -(-len(names) // 1000))
        counts["keys_listed"] = counts.get("keys_listed", 0) + len(names)
        return names
    store.list_after, store.list_children = listing_after, children
    return store


def child(argv: list[str]) -> int:
    """`age_bench.py --child gc|read|resume|start <store url>`: one counted run; counts as JSON on stderr."""
    what, url = argv[0], argv[1]
    from sparkpoint.runtime.cli import common as cli_common
    from sparkpoint.runtime.store import open_store

    counts: dict[str, int] = {}
    real_open = cli_common.open_store
    cli_common.open_store = lambda u, **kw: counting(real_open(u, **kw), counts)  # type: ignore[assignment]
    job = "/".join(JOB)
    if what == "gc":
        from sparkpoint.runtime.cli import main as cli
        code = cli(["gc", "--store", url, "--job", job, "--retain", "3", "--grace", "0s", "--once", "--json"])
    elif what == "read":
        from sparkpoint.runtime.cli import main as cli
        code = cli(["output", "read", "--store", url, "--job", job, "--limit", "10"])
    elif what == "read-upsert":  # (`output read` is the transactional sink's): the upsert reader's first rows
        import itertools

        from sparkpoint.runtime.sink.upsert import iter_upserted_rows
        from sparkpoint.runtime.store import JobRef

        rows = list(itertools.islice(iter_upserted_rows(counting(open_store(url), counts), JobRef(*JOB), "default"), 10))
        code = 0 if len(rows) == 10 else 1
    elif what == "compact":  # a delta sink's hourly compaction, as the runtime runs it after a publish
        from sparkpoint.runtime.checkpoint import list_checkpoint_ids
        from sparkpoint.runtime.checkpoint.catalog import load_manifest
        from sparkpoint.runtime.checkpoint.fence import read_fence
        from sparkpoint.runtime.sink.compaction import CompactionSettings
        from sparkpoint.runtime.sink.delta import DeltaSink
        from sparkpoint.runtime.sink.journal import SinkJournal
        from sparkpoint.runtime.store import JobRef

        store, ref = counting(open_store(url), counts), JobRef(*JOB)
        newest = list_checkpoint_ids(store, ref)[-1]
        manifest = load_manifest(store, ref, newest)
        with tempfile.TemporaryDirectory() as work:
            sink = DeltaSink(store, ref, attempt=read_fence(store, ref), path="default", incarnation="uid",
                             journal=SinkJournal(Path(work) / "journal"), compaction=CompactionSettings())
            sink.resume(newest, manifest.extra)
            before = dict(counts)
            compacted = sink.compact()
        counts.update({f"compact_{k}": v - before.get(k, 0) for k, v in list(counts.items())})
        code = 0 if compacted else 1
    elif what == "start":  # the attempt claim and the restore a start makes before its query
        from sparkpoint.runtime.checkpoint import write_fence
        from sparkpoint.runtime.checkpoint.fence import restarts_before
        from sparkpoint.runtime.service.recovery import restore_on_start
        from sparkpoint.runtime.store import JobRef

        store, ref, launch = counting(open_store(url), counts), JobRef(*JOB), int(argv[2])
        attempt = write_fence(store, ref, incarnation="uid", launch=launch)
        restarts_before(store, ref, attempt, "uid", launch)
        with tempfile.TemporaryDirectory() as work:
            outcome = restore_on_start(store=store, job=ref, store_url=url, work_dir=Path(work),
                                       hot_dir=Path(work) / "hot", restore_from=None, local_recovery=False,
                                       attempt=attempt, incarnation="uid")
        code = 0 if outcome.source == "remote" else 1
    else:
        from sparkpoint.runtime.checkpoint import list_checkpoint_ids
        from sparkpoint.runtime.checkpoint.catalog import load_manifest
        from sparkpoint.runtime.checkpoint.fence import read_fence
        from sparkpoint.runtime.sink.journal import SinkJournal
        from sparkpoint.runtime.sink.transactional import TransactionalSink
        from sparkpoint.runtime.store import JobRef

        store = counting(open_store(url), counts)
        ref = JobRef(*JOB)
        newest = list_checkpoint_ids(store, ref)[-1]
        manifest = load_manifest(store, ref, newest)
        with tempfile.TemporaryDirectory() as work:
            # the newest claim's attempt resumes (the job restarted since its newest checkpoint, as a start does)
            sink = TransactionalSink(store, ref, attempt=read_fence(store, ref), path="default",
                                     journal=SinkJournal(work))
            sink.resume(newest, manifest.extra)
        code = 0
    print("__counts__ " + json.dumps(counts), file=sys.stderr)
    return int(code or 0)


# --- the parent: builds stores and measures ------------------------------------------------------------
CODE = {"tree": str(Path(__file__).resolve().parent.parent)}  # the checkout whose code the children run


def _run(args: list[str]) -> tuple[float, float, dict[str, int]]:
    """(peak RSS MiB, seconds, request counts) of one counted child under GNU time."""
    t0 = time.monotonic()
    env = {**os.environ, "PYTHONPATH": CODE["tree"]}
    p = subprocess.run(["/usr/bin/time", "-f", "__rss__ %M", sys.executable, __file__, "--child", *args],
                       capture_output=True, text=True, check=False, env=env)
    seconds = time.monotonic() - t0
    if p.returncode != 0:
        raise RuntimeError(f"{args[:1]} exited {p.returncode}: {p.stderr[-3000:]}")
    lines = p.stderr.splitlines()
    rss = int(next(x for x in lines if x.startswith("__rss__")).split()[1]) / 1024
    counts = json.loads(next(x for x in lines if x.startswith("__counts__"))[len("__counts__ "):])
    return round(rss, 1), round(seconds, 2), counts


def build(root: Path, n: int, parts: bool = False) -> str:
    """A directory store of a transactional sink aged `n` checkpoints; returns its URL. `parts`: each
    batch item carries its part's size and rows, as a delta sink writes them (compaction sizes runs by them)."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    from sparkpoint.runtime.store import JobRef, Manifest, open_store
    from sparkpoint.runtime.store.layout import checkpoint_key
    from sparkpoint.runtime.store.manifest import Totals, utcnow

    job = JobRef(*JOB)
    out = root / job.root / "outputs" / "default"
    (out / "_commits").mkdir(parents=True)
    # Entries name a snapshot of their chain where the measured code writes them (a runtime from
    # before refuses to re-publish an entry that names one: its own document lacks the field).
    hints = "chain_snapshot_ids" in (Path(CODE["tree"]) / "runtime" / "sink" / "history.py").read_text()
    sample = root / "sample.parquet"
    pq.write_table(pa.table({"v": pa.array([1], pa.int64())}), sample)
    samples = [sample]
    part_size = sample.stat().st_size
    staging = out / "staging" / "attempt-1"
    staging.mkdir(parents=True)
    previous = None
    for i in range(n):
        folder = f"batch-{i:09d}-0a0a0a0a0a0a"
        (staging / folder).mkdir()
        if i and i % 60_000 == 0:  # a file takes at most 65,000 hard links (ext4)
            samples.append(root / f"sample-{i}.parquet")
            shutil.copyfile(sample, samples[-1])
        os.link(samples[-1], staging / folder / "part-00000.parquet")
        cid = f"chk-{i + 1:06d}"
        entry = {"checkpoint": cid, "attempt": 1, "previous": previous, "afterBatch": i - 1, "upToBatch": i,
                 "incarnation": "uid", "files": [{"batch": i, "rows": 1, "format": "parquet", "keys": [
                     f"{job.root}/outputs/default/staging/attempt-1/{folder}/part-00000.parquet"],
                     **({"parts": [{"size": part_size, "rows": 1}]} if parts else {})}]}
        hint = {"snapshot": f"chk-{i // 1000 * 1000:06d}"} if hints and i >= 1000 else {}  # as the runtime names it
        entry.update(hint)
        (out / "_commits" / f"{cid}.json").write_text(json.dumps(entry, sort_keys=True))
        if i >= n - 3:  # the retained checkpoints' manifests
            sink = {"kind": "transactional", "path": "default", "attempt": 1, "previous": previous,
                    "afterBatch": i - 1, "upToBatch": i, "files": entry["files"], "incarnation": "uid", **hint}
            now = utcnow()
            store = open_store(f"file://{root}")
            store.put_bytes(checkpoint_key(job, cid), Manifest(
                id=cid, namespace=job.namespace, job=job.name, job_uid="uid", attempt=1, batch_id=i,
                trigger_time=now, completion_time=now, base_checkpoint=None, spark_version=None,
                state_provider=None, files=[], totals=Totals(files=0, bytes=0, new_bytes=0, reused_bytes=0),
                extra={"sink": sink}).to_json())
        previous = cid
    from sparkpoint.runtime.checkpoint import write_fence

    store = open_store(f"file://{root}")
    write_fence(store, job, "uid", launch=1)  # attempt 1 claimed
    for launch in range(2, restarts(n) + 1):  # a restart a day (the attempts GC keeps are its business)
        write_fence(store, job, "uid", launch=launch)
    try:  # the history snapshots the runtime wrote over the job's life, every SEGMENT publishes
        from sparkpoint.runtime.sink.history import compact_forward
        from sparkpoint.runtime.sink.reader import _loader
    except ImportError:  # code from before snapshots
        pass
    else:
        compact_forward(store, job, "default", previous, 1, _loader(store, job, "default"))
    return aged_past_grace(root)


def restarts(n: int) -> int:
    """The starts of a job aged `n` checkpoints: one a day of its age, the first included."""
    return max(1, n // DAY)


def measure(n: int, base: Path, sink: str = "transactional") -> dict[str, Any]:
    root = base / f"n{n}"
    t0 = time.monotonic()
    if sink == "upsert":  # an upsert sink's store, as its runtime and GC leave it (age_stores.py)
        from age_stores import build_upsert

        url = build_upsert(root, n, JOB)
    else:
        url = build(root, n, parts=sink == "delta-compacted")
    if sink.startswith("delta"):  # the same store with the Delta log the delta sink writes beside its entries
        from age_stores import add_compactions, add_delta_log

        job_root = "/".join(JOB)
        keys = [f"{job_root}/outputs/default/staging/attempt-1/batch-{i:09d}-0a0a0a0a0a0a/part-00000.parquet"
                for i in range(n)]
        add_delta_log(root / job_root / "outputs" / "default", keys, job_root)
        if sink == "delta-compacted":  # and what its default hourly compaction leaves (the 3 retained: not shared)
            # (the last hour not yet: the `compact` child measures the next compaction)
            add_compactions(root / job_root / "outputs" / "default", keys, job_root, shared=n - 3 - HOUR)
    row: dict[str, Any] = {"checkpoints": n, "sink": sink, "build_seconds": round(time.monotonic() - t0, 1)}
    # a first pass deletes what the store's age left (e.g. snapshotted entries); from output GC cursors
    # on, it is also the full pass an existing store gets once, which writes the cursor
    row["first_gc_rss_mib"], _, first = _run(["gc", url])
    row["first_gc_delete"] = first.get("delete", 0)
    rss, seconds, c = _run(["gc", url])
    row.update(gc_rss_mib=rss, gc_seconds=seconds, gc_get=c.get("get", 0), gc_head=c.get("head", 0),
               gc_put=c.get("put", 0), gc_delete=c.get("delete", 0), gc_list_pages=c.get("list_pages", 0),
               gc_keys_listed=c.get("keys_listed", 0))
    rss, seconds, c = _run(["read-upsert" if sink == "upsert" else "read", url])
    row.update(read_rss_mib=rss, read_seconds=seconds, read_get=c.get("get", 0),
               read_keys_listed=c.get("keys_listed", 0), read_list_pages=c.get("list_pages", 0))
    if sink == "transactional":  # (a delta sink's start resumes its entries the same way, then its table)
        rss, seconds, c = _run(["resume", url])
        row.update(resume_seconds=seconds, resume_get=c.get("get", 0), resume_head=c.get("head", 0),
                   resume_keys_listed=c.get("keys_listed", 0), resume_put=c.get("put", 0))
    else:
        row.update(resume_seconds=0, resume_get=0, resume_head=0, resume_keys_listed=0, resume_put=0)
    if sink != "upsert":  # (the upsert store has no checkpoint manifests of its own)
        rss, seconds, c = _run(["start", url, str(restarts(n) + 1)])
        row.update(start_rss_mib=rss, start_seconds=seconds, start_get=c.get("get", 0), start_head=c.get("head", 0),
                   start_keys_listed=c.get("keys_listed", 0), start_list_pages=c.get("list_pages", 0),
                   start_put=c.get("put", 0))
    if sink == "delta-compacted":  # last: it writes a record, its file and a Delta commit
        rss, seconds, c = _run(["compact", url])
        row.update(compact_rss_mib=rss, compact_seconds=seconds, compact_get=c.get("compact_get", 0),
                   compact_keys_listed=c.get("compact_keys_listed", 0), compact_put=c.get("compact_put", 0))
    from age_stores import store_bytes

    row["bytes"] = store_bytes(root, "/".join(JOB))
    row["data_bytes"] = row["bytes"].get("data", 0)
    row["outside_bytes"] = sum(v for k, v in row["bytes"].items() if k != "data")
    row["outside_per_data"] = round(row["outside_bytes"] / row["data_bytes"], 3) if row["data_bytes"] else 0
    snapshots = root / "/".join(JOB) / "outputs" / "default" / "_snapshots"  # (an upsert sink has no entries)
    newest = max((int(x.name[4:-5]) for x in snapshots.iterdir()), default=0) if snapshots.exists() else 0
    row["since_snapshot"] = n - newest  # entries a walk from the head reads one by one
    upserts = root / "/".join(JOB) / "outputs" / "default" / "upserts" / "_snapshots"
    if upserts.exists():  # an upsert sink: the batches after its newest snapshot
        row["since_snapshot"] = n - 1 - max(int(x.name.split("-")[1]) for x in upserts.iterdir())
    shutil.rmtree(root, ignore_errors=True)
    return row


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    if argv and argv[0] == "--child":
        return child(argv[1:])
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--small", action="store_true", help="N = 8,640 (1 day), 60,480 (1 week)")
    parser.add_argument("--sizes", default=None, help="comma-separated N (default 8640,60480)")
    parser.add_argument("--no-year", action="store_true", help="no year row extrapolated from the fitted laws")
    parser.add_argument("--no-write", action="store_true", help="print, do not update docs/benchmarks.md")
    parser.add_argument("--conclusion", default="", help="the sentence under the table")
    parser.add_argument("--before", default=None,
                        help="a file of the JSON rows a run on an earlier commit printed: shown first, marked before")
    parser.add_argument("--from", dest="from_files", nargs="*", default=None,
                        help="files of the JSON rows earlier runs printed: render those instead of measuring")
    parser.add_argument("--load", default=None, help="with --from: the load averages the runs saw")
    parser.add_argument("--sinks", default="transactional,delta,delta-compacted,upsert",
                        help="comma-separated: transactional, delta (the delta sink's store adds its Delta log), "
                             "upsert (its newest hourly snapshot and the batches since), delta-compacted (a delta "
                             "sink with its default hourly compaction's records, files and commits)")
    parser.add_argument("--before-tree", default=None,
                        help="a checkout of an earlier commit: each age is measured with its code too, side by side")
    args = parser.parse_args(argv)
    sizes = [int(s) for s in (args.sizes or (f"{DAY},{7 * DAY}" if args.small else f"{DAY},{7 * DAY},{30 * DAY}")
                              ).split(",")]
    load_at_start = " ".join(f"{x:.1f}" for x in os.getloadavg())
    rows, side = [], []
    if args.from_files is not None:
        for name in args.from_files:
            for line in Path(name).read_text().splitlines():
                if line.startswith('{"checkpoints"'):
                    row = json.loads(line)
                    (side if row.get("code") == "before" else rows).append(row)
        sizes = []
    base = Path(tempfile.mkdtemp(prefix="sparkpoint-age-"))
    try:
        for sink in args.sinks.split(","):
            for n in sizes:
                if args.before_tree:  # the same age with the earlier code, just before (same load)
                    CODE["tree"] = str(Path(args.before_tree).resolve())
                    side.append(measure(n, base, sink))
                    print(json.dumps({**side[-1], "code": "before"}), flush=True)
                    CODE["tree"] = str(Path(__file__).resolve().parent.parent)
                rows.append(measure(n, base, sink))
                print(json.dumps(rows[-1]), flush=True)
    finally:
        shutil.rmtree(base, ignore_errors=True)
    for sink in dict.fromkeys(r.get("sink", "transactional") for r in rows):  # a year, from the fitted law
        mine = [r for r in rows if r.get("sink", "transactional") == sink]
        if len(mine) >= 2 and YEAR not in [r["checkpoints"] for r in mine] and not args.no_year:
            rows.append(age_fit.extrapolated(mine, YEAR, [m for m in METRICS if m not in SKIP.get(sink, ())]))
    meta = {"commit": report.commit(), "date": time.strftime("%Y-%m-%d"),
            "load": " ".join(f"{x:.1f}" for x in os.getloadavg()), "conclusion": args.conclusion}
    if args.before_tree or side:
        meta["before"] = (f"the code of {args.before_tree or 'an earlier checkout'} (each measured just before the "
                          "same row of this code)")
        meta["load"] = f"{load_at_start} at the start, {meta['load']} at the end"
    if args.from_files is not None:
        meta["load"] = args.load or "(see below)"
    before = ([json.loads(x) for x in Path(args.before).read_text().splitlines() if x.startswith('{"checkpoints"')]
              if args.before else side or None)
    return report.publish(START, END, render(rows, meta, before, None if args.no_write else draw),
                          write=not args.no_write)


if __name__ == "__main__":
    sys.exit(main())
