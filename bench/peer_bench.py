"""Peer benchmark (issue 10): Sparkpoint next to what users run today, on one machine, in one run.

Setups (same query, same synthetic data, same MinIO behind a toxiproxy on loopback; each run a fresh
process): the floor (hot dir only), Sparkpoint incremental (10 s, 60 s), Sparkpoint full (every
checkpoint uploads everything), vanilla Spark on s3a:// (plain, changelog, format v2) and, when it
can run here, Flink (bench/peers/flink.py). Rounds alternate the setups (A B C .. A B C ..) so drift
hits all alike; ratios to the floor carry bootstrap confidence intervals.

    python bench/peer_bench.py --small     # minutes: every setup at tiny size, 2 rounds
    python bench/peer_bench.py             # medium state
    python bench/peer_bench.py --full      # ~100 MB state, 5 rounds (pending a quiet machine)
    python bench/peer_bench.py --full --sizes 100m,1g,4g   # churn runs at 4 GB too (disk and hours)

After the rounds come the extra figures (--extras): recovery after a kill, key churn (uploaded vs
changed bytes, --sizes x --churn) and bucket bytes over time with retention and GC (--retention-minutes).
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time
import urllib.request
from dataclasses import asdict
from pathlib import Path

import report  # bench/report.py
from peers import (
    churn,
    extras,
    flink,
    limits,
    merge,
    proc_cpu,
    restore_load,
    sparkpoint_setup,
    store_requests,
    vanilla,
)
from peers.common import Context, RunResult, Workload
from peers.render import END, START, render
from peers.toxiproxy import Toxiproxy

from harness.minio_server import MinioServer
from sparkpoint.runtime.store import open_store

REPO = Path(__file__).resolve().parents[1]
BUCKET = "bench"
# Round order interleaves Sparkpoint and its peers.
ALL_SETUPS = ["floor", "vanilla-changelog", "sparkpoint-10s", "sparkpoint-full-10s", "vanilla-v2", "flink",
              "vanilla", "sparkpoint-60s", "sparkpoint-10s-nice10"]
# At 20 ms only the setups whose batches can pay the latency (the floor is the reference).
# Opt-in A/Bs (--setups): the live UI's and event logs' cost (issue 30) is measured against sparkpoint-10s.
OPT_IN_SETUPS = ["sparkpoint-10s-ui"]
LATENCY_SETUPS = ["floor", "sparkpoint-10s", "vanilla-changelog", "flink"]
SIZES = {  # rows per batch, keys, batches, payload bytes per key
    "small": Workload(rows_per_batch=2000, keys=2000, batches=10, warmup_batches=3),
    "medium": Workload(rows_per_batch=10000, keys=50000, batches=60, payload_bytes=512),
    "full": Workload(rows_per_batch=20000, keys=100000, batches=120, payload_bytes=1024),
}


class Interrupted(BaseException):
    """SIGTERM: finish with the runs done so far (BaseException: per-setup error handling lets it pass)."""


def _interrupt(signum, frame) -> None:  # type: ignore[no-untyped-def]
    raise Interrupted()


def scrape(endpoint: str) -> dict[str, int]:
    with urllib.request.urlopen(f"{endpoint}/minio/v2/metrics/cluster", timeout=10) as resp:
        return store_requests.parse_requests(resp.read().decode())


def load_average() -> str:
    return " ".join(f"{x:.1f}" for x in os.getloadavg())


def run_one(setup: str, w: Workload, ctx: Context, tag: str, minio: MinioServer, jar_list: str,
            servers: dict[str, int] | None = None) -> RunResult:
    before = scrape(minio.endpoint)
    samples: list[tuple[float, dict[str, int]]] = [(time.time(), before)]
    cpu = proc_cpu.CpuSampler(servers or {})
    cpu_samples: list[tuple[float, dict[str, float]]] = [(time.time(), cpu.sample())]
    done = threading.Event()

    def sample() -> None:  # the counters once a second, to cut out the measured batches' window
        while not done.wait(1.0):
            with contextlib.suppress(OSError):
                samples.append((time.time(), scrape(minio.endpoint)))
            cpu_samples.append((time.time(), cpu.sample()))
    sampler = threading.Thread(target=sample, daemon=True)
    sampler.start()
    try:
        if setup in sparkpoint_setup.SETUPS:
            result = sparkpoint_setup.run(setup, w, ctx, tag)
        elif setup in vanilla.SETUPS:
            result = vanilla.run(setup, w, ctx, tag, jar_list)
        else:
            result = flink.run(w, ctx, tag)
    finally:
        done.set()
        sampler.join()
    after = scrape(minio.endpoint)
    samples.append((time.time(), after))
    result.requests = store_requests.delta(before, after)
    if len(result.window) == 2 and result.window[1] > result.window[0]:
        with contextlib.suppress(ValueError):
            result.requests_window = store_requests.in_window(samples, *result.window)
            result.window_seconds = result.window[1] - result.window[0]
            result.cpu_window = proc_cpu.in_window(cpu_samples, *result.window)
    return result


def empty_bucket(store, areas: dict[str, int] | None = None) -> int:  # type: ignore[no-untyped-def]
    """Delete every object (each run uses its own prefix and is measured by now); the bytes it held.
    Without this the rounds left 13 GB in MinIO and filled the disk (runs then failed with
    XMinioStorageFull). `areas`, if given, receives the objects' count per area of the job's data."""
    from concurrent.futures import ThreadPoolExecutor

    objects = list(store.list(""))
    if areas is not None:
        areas.update(store_requests.objects_by_area([o.key for o in objects]))
    with ThreadPoolExecutor(8) as pool:
        list(pool.map(lambda o: store.delete(o.key), objects))
    return sum(o.size for o in objects)


def versions() -> dict[str, str]:
    env = dict(line.split("=", 1) for line in (REPO / "versions.env").read_text().splitlines()
               if "=" in line and not line.startswith("#"))
    import pyspark
    java = subprocess.run(["java", "-version"], capture_output=True, text=True).stderr.splitlines()[0]
    commit = subprocess.run(["git", "rev-parse", "--short", "HEAD"], capture_output=True, text=True,
                            cwd=REPO).stdout.strip()
    return {"pyspark": pyspark.__version__, "java": java, "commit": commit, "python": sys.version.split()[0],
            **{k: env[k] for k in ("MINIO_VERSION", "HADOOP_AWS_VERSION", "AWS_SDK_BUNDLE_VERSION",
                                   "TOXIPROXY_VERSION", "FLINK_VERSION")}}


def _int_list(p: argparse.ArgumentParser, flag: str, raw: str, lo: int, hi: int) -> tuple[int, ...]:
    """A comma-separated list of integers in [lo, hi] (an A/B's values), or the parser's error."""
    try:
        values = tuple(int(x) for x in raw.split(",") if x)
    except ValueError:
        p.error(f"{flag}: {raw!r} is not a comma-separated list of integers")
    if any(not lo <= n <= hi for n in values):
        p.error(f"{flag}: values must be in [{lo}, {hi}], got {raw!r}")
    return values


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    size = p.add_mutually_exclusive_group()
    size.add_argument("--small", action="store_true", help="tiny state, 2 rounds (minutes)")
    size.add_argument("--full", action="store_true", help="large state, 5 rounds (an hour or more)")
    p.add_argument("--rounds", type=int, default=None)
    p.add_argument("--setups", default=",".join(ALL_SETUPS), help="comma-separated subset")
    p.add_argument("--latencies", default="0,20", help="injected round-trip ms, comma-separated")
    p.add_argument("--no-write", action="store_true", help="print, do not update docs/benchmarks.md")
    p.add_argument("--render-only", metavar="JSON", help="rewrite the section from saved raw results")
    p.add_argument("--merge", metavar="JSON,JSON", help="rewrite the section from several saved runs together "
                   "(e.g. the rounds of one, the retention run of another)")
    p.add_argument("--raw-out", metavar="JSON", help="also write the raw results here (smoke runs: keep them)")
    p.add_argument("--no-limits", action="store_true", help="skip the physical limits and restore-under-load")
    p.add_argument("--extras", default=",".join(extras.PHASES), help=f"subset of {extras.PHASES}, or 'none'")
    p.add_argument("--sizes", default=None, help=f"churn state sizes from {sorted(churn.SIZES)}; "
                   "default tiny (--small), 100m (medium), 100m,1g (--full)")
    p.add_argument("--steady-batches", type=int, default=None, metavar="N",
                   help="churn: measured batches after the fill (a checkpoint per 10; default 12 with --small, 30)")
    p.add_argument("--churn", default="0.01,0.1", help="fractions of the keys updated per checkpoint interval")
    p.add_argument("--churn-setups", default=",".join(extras.CHURN_SETUPS),
                   help="which setups the churn phase runs (flink: only with flink in --setups)")
    p.add_argument("--churn-nice", default="", metavar="N,M",
                   help="churn: run Sparkpoint once per SPARKPOINT_CHECKPOINT_NICE value, alternating (an A/B)")
    p.add_argument("--churn-inline", default="", metavar="N,M",
                   help="churn: run Sparkpoint once per SPARKPOINT_CHECKPOINT_INLINE_MAX value, alternating (an A/B)")
    p.add_argument("--churn-rounds", type=int, default=1, help="churn: alternating rounds of its setups")
    p.add_argument("--churn-partitions", type=int, default=2,
                   help="churn: state partitions of every setup (Spark shuffle partitions = Flink parallelism)")
    p.add_argument("--recovery-setups", default=",".join(extras.RECOVERY_SETUPS),
                   help="which setups the recovery phase kills and restarts (flink: only with flink in --setups)")
    p.add_argument("--retention-setups", default=",".join(extras.RETENTION_SETUPS),
                   help="which setups the bucket-bytes phase runs (30 minutes each)")
    p.add_argument("--retention-minutes", type=float, default=None,
                   help="length of the bucket-bytes run; default 1.5 (--small), 30 otherwise")
    args = p.parse_args(argv)
    if args.render_only:
        write(json.loads(Path(args.render_only).read_text()), args.no_write)
        return 0
    if args.merge:
        write(merge.merge([json.loads(Path(x).read_text()) for x in args.merge.split(",") if x]), args.no_write)
        return 0
    size_name = "small" if args.small else "full" if args.full else "medium"
    w = SIZES[size_name]
    rounds = args.rounds if args.rounds is not None else {"small": 2, "medium": 3, "full": 5}[size_name]
    setups = [s for s in args.setups.split(",") if s]
    unknown = set(setups) - set(ALL_SETUPS) - set(OPT_IN_SETUPS)
    if unknown:
        p.error(f"--setups: unknown {sorted(unknown)}; choose from {ALL_SETUPS + OPT_IN_SETUPS}")
    latencies = [int(x) for x in args.latencies.split(",") if x]
    plan = extras_plan(p, args, size_name)
    command = "python bench/peer_bench.py " + " ".join(argv if argv is not None else sys.argv[1:])
    loads = [load_average()]
    base = Path(tempfile.mkdtemp(prefix="sparkpoint-peers-"))
    os.environ["MINIO_PROMETHEUS_AUTH_TYPE"] = "public"  # request counters without a bearer token
    minio, proxy = MinioServer().start(), Toxiproxy().start()
    skipped: dict[str, str] = {}
    results: list[RunResult] = []
    extra: dict = {}
    partial = base / "peer-results.partial.json"
    print(f"scratch dir {base} (per-run logs; partial results in {partial.name})", flush=True)
    try:
        minio.make_bucket(BUCKET)
        listen = proxy.proxy("minio", f"127.0.0.1:{minio.port}")
        endpoint = f"http://{listen}"
        env = {**minio.env(), "SPARKPOINT_S3_ENDPOINT": endpoint}
        os.environ.update(minio.env())  # this process's own store client talks to MinIO directly
        store = open_store(minio.store_url(BUCKET))
        servers = {"minio": minio.proc.pid, "toxiproxy": proxy.proc.pid} if minio.proc and proxy.proc else {}
        limit, restore = None, None
        if not args.no_limits:
            print("limits", flush=True)
            limit = limits.measure(store, base, args.small)
            print(json.dumps(limit), flush=True)
            print("restore under CPU load", flush=True)
            restore = restore_load.measure(store, base, files=8 if args.small else 32,
                                           file_mib=8 if args.small else 32, repeats=4 if args.small else 10)
            print(json.dumps(restore), flush=True)
        needs_vanilla = any(s.startswith("vanilla") for s in setups) or plan.phases
        jar_list = vanilla.jars() if needs_vanilla else ""
        if "flink" in setups:
            why = flink.unavailable()
            if why:
                skipped["flink"] = why
                setups.remove("flink")
        signal.signal(signal.SIGTERM, _interrupt)  # `kill <pid>`: abandon the current run, report the others
        try:
            for rnd in range(rounds):  # each round visits every latency, so a cut-short run keeps both
                for latency in latencies:
                    proxy.set_latency("minio", latency)
                    ctx = Context(base=base, bucket=BUCKET, endpoint=endpoint, env=env, latency_ms=latency)
                    for setup in [s for s in setups if latency == 0 or s in LATENCY_SETUPS]:
                        tag = f"{setup}-{latency}ms-r{rnd}"
                        print(f"== {tag} (load {load_average()})", flush=True)
                        try:
                            r = run_one(setup, w, ctx, tag, minio, jar_list, servers)
                        except Exception as exc:  # one broken setup must not lose the others' numbers
                            skipped[setup] = f"{type(exc).__name__}: {exc}"[:300]
                            print(f"   FAILED: {skipped[setup]}", flush=True)
                            empty_bucket(store)
                            continue
                        r.bucket_bytes = empty_bucket(store, r.objects_by_area)
                        results.append(r)
                        med = sorted(r.durations)[len(r.durations) // 2] if r.durations else float("nan")
                        print(f"   median batch {med:.3f} s over {len(r.durations)} batches; "
                              f"requests {r.requests}", flush=True)
                        partial.write_text(json.dumps([asdict(x) for x in results]))
                    loads.append(load_average())

            def ctx_at(latency: int) -> Context:
                proxy.set_latency("minio", latency)
                return Context(base=base, bucket=BUCKET, endpoint=endpoint, env=env, latency_ms=latency)
            extras.run(plan, w, ctx_at, latencies, jar_list, skipped, extra, after_each=lambda: empty_bucket(store))
            loads.append(load_average())
        except Interrupted:
            print("interrupted: reporting the runs that finished", flush=True)
            skipped["(run)"] = f"stopped early by SIGTERM after {len(results)} runs"
        bucket_bytes = sum(r.bucket_bytes for r in results)  # what the rounds wrote (emptied after each)
    finally:
        proxy.stop()
        minio.stop()
    raw = {"size": size_name, "workload": asdict(w), "rounds": rounds, "limits": limit, "restore": restore, "loads": loads,
           "versions": versions(), "command": command, "skipped": skipped, "bucket_bytes_end": bucket_bytes,
           "results": [asdict(r) for r in results], "extras": extra}
    (base / "peer-results.json").write_text(json.dumps(raw))
    if args.raw_out:
        Path(args.raw_out).write_text(json.dumps(raw, indent=0))
    print(f"raw results: {base / 'peer-results.json'}", flush=True)
    write(raw, args.no_write)
    if args.raw_out:  # a smoke run: keep the per-run logs for a look
        print(f"per-run logs kept in {base}", flush=True)
    else:
        shutil.rmtree(base, ignore_errors=True)
    # An extras-only or limits-only run (--rounds 0 or --setups "") succeeded if any figure has a number.
    return 0 if results or restore or any(extra.get(k) for k in extras.PHASES) else 1


def extras_plan(p: argparse.ArgumentParser, args: argparse.Namespace, size_name: str) -> extras.ExtrasPlan:
    phases = tuple(x for x in args.extras.split(",") if x and x != "none")
    if set(phases) - set(extras.PHASES):
        p.error(f"--extras: unknown {sorted(set(phases) - set(extras.PHASES))}; choose from {extras.PHASES}")
    default_sizes = {"small": "tiny", "medium": "100m", "full": "100m,1g"}[size_name]
    sizes = tuple(x for x in (args.sizes or default_sizes).split(",") if x)
    if set(sizes) - set(churn.SIZES):
        p.error(f"--sizes: unknown {sorted(set(sizes) - set(churn.SIZES))}; choose from {sorted(churn.SIZES)}")
    if args.small and set(sizes) - {"tiny"}:
        p.error("--sizes: --small runs only the tiny size (1g/4g take hours: use --full --sizes ...)")
    try:
        churns = tuple(float(x) for x in args.churn.split(",") if x)
    except ValueError:
        p.error(f"--churn: {args.churn!r} is not a comma-separated list of fractions")
    if not churns or any(not 0 < c <= 1 for c in churns):
        p.error(f"--churn: fractions must be in (0, 1], got {args.churn!r}")
    minutes = args.retention_minutes if args.retention_minutes is not None else 1.5 if args.small else 30.0
    if minutes <= 0:
        p.error("--retention-minutes must be positive")
    if args.steady_batches is not None and args.steady_batches < 10:
        p.error("--steady-batches must be >= 10 (a checkpoint interval is 10 batches)")
    with_flink = "flink" in args.setups.split(",")
    recovery_setups = tuple(x for x in args.recovery_setups.split(",") if x)
    if set(recovery_setups) - set(extras.RECOVERY_SETUPS):
        p.error(f"--recovery-setups: choose from {extras.RECOVERY_SETUPS}")
    churn_setups = tuple(x for x in args.churn_setups.split(",") if x)
    if set(churn_setups) - set(extras.CHURN_SETUPS):
        p.error(f"--churn-setups: choose from {extras.CHURN_SETUPS}")
    churn_nice = _int_list(p, "--churn-nice", args.churn_nice, 0, 19)
    churn_inline = _int_list(p, "--churn-inline", args.churn_inline, 0, 65536)
    if churn_nice and churn_inline:
        p.error("--churn-nice and --churn-inline: one A/B at a time")
    if args.churn_rounds < 1:
        p.error("--churn-rounds must be >= 1")
    if not 1 <= args.churn_partitions <= 64:
        p.error("--churn-partitions must be in 1..64")
    churn_opts = {"churn_setups": churn_setups, "churn_nice": churn_nice, "churn_inline": churn_inline,
                  "churn_rounds": args.churn_rounds, "churn_partitions": args.churn_partitions}
    retention_setups = tuple(x for x in args.retention_setups.split(",") if x)
    if set(retention_setups) - set(extras.RETENTION_SETUPS):
        p.error(f"--retention-setups: choose from {extras.RETENTION_SETUPS}")
    if args.small:  # GC must get a few passes in a minute or two
        return extras.ExtrasPlan(phases, sizes, churns, minutes * 60, 10.0, True, gc_interval="10s",
                                 grace="20s", grace_seconds=20.0, steady_batches=args.steady_batches or 12, flink=with_flink,
                                 recovery_setups=recovery_setups, replay_intervals=(2, 10), replay_rounds=1,
                                 retention_setups=retention_setups, **churn_opts)
    return extras.ExtrasPlan(phases, sizes, churns, minutes * 60, 30.0, False, flink=with_flink,
                             steady_batches=args.steady_batches or 30,
                             recovery_setups=recovery_setups, retention_setups=retention_setups,
                             retention_size="100m" if size_name == "full" else "tiny", **churn_opts)


def write(raw: dict, no_write: bool) -> None:
    if no_write:  # plots too go elsewhere, so a smoke run leaves the measured ones in docs/img alone
        saved, report.IMG = report.IMG, Path(tempfile.mkdtemp(prefix="peer-plots-"))
        try:
            section = render(raw, report.plot)
        finally:
            print(f"plots in {report.IMG}", flush=True)
            report.IMG = saved
    else:
        section = render(raw, report.plot)
    print(section)
    if not no_write:
        report.write_section(START, END, section)
        (REPO / "docs" / "img" / "peer-results.json").write_text(json.dumps(raw, indent=0))


if __name__ == "__main__":
    sys.exit(main())
