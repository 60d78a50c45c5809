"""Kafka -> Delta end to end (issue 27): Sparkpoint's delta sink beside vanilla Spark's Parquet file
sink, both reading the same topic of one local broker, both stores on one MinIO behind a toxiproxy
with the same injected round-trip latency (20 ms by default; bench/peers/toxiproxy.py, hadoop-aws as
in the peer benchmark). The query (bench/kafka/ingest.py): JSON events deduplicated by id within a
30 s watermark, every new event written at once with its Kafka timestamp.

1. Throughput at the machine's limit: a backlog of events is produced first; each run reads it from
   the start in batches of `--max-offsets`; events/s over the batches after the warm-up. Sparkpoint's
   checkpoints (every 10 s: state, offsets and the batches' Parquet files uploaded, one Delta commit)
   run beside the batches; vanilla's checkpoint is in every batch (offset and commit logs and the
   state store commit on s3a), its file sink commits every batch to `_spark_metadata/`.
2. Latency: a producer writes `--rate` events a second for `--seconds`; per row, from its Kafka
   timestamp (send time) to the commit that made it visible (bench/kafka/latency.py).
Runs alternate the setups (A B A B) so drift hits both alike; ratios are per round, side by side.

    python bench/kafka_bench.py --small     # minutes
    python bench/kafka_bench.py             # the figure in docs/benchmarks.md
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import shutil
import signal
import statistics
import subprocess
import sys
import tempfile
import time
import uuid
from dataclasses import asdict, dataclass, replace
from pathlib import Path
from typing import Any

import report  # bench/report.py
import yaml
from kafka_delta import latency
from peers import vanilla
from peers.common import completed_checkpoints, json_lines
from peers.toxiproxy import Toxiproxy

from harness.kafka_server import KafkaServer, jars_dir
from harness.minio_server import MinioServer
from harness.runtime_job import RuntimeProcess
from sparkpoint.runtime.sink.keys import sink_root
from sparkpoint.runtime.store import JobRef, open_store

REPO = Path(__file__).resolve().parents[1]
KAFKA_DIR = Path(__file__).resolve().parent / "kafka_delta"
START, END = "<!-- kafka-bench:start -->", "<!-- kafka-bench:end -->"
RAW = REPO / "docs" / "img" / "kafka-results.json"
BUCKET = "bench"
SETUPS = ("sparkpoint-delta", "vanilla-parquet")
WARMUP_BATCHES = 2
WARMUP_ID = 10**12  # the latency run's first event: an id no other event has


@dataclass(frozen=True)
class Plan:
    backlog: int  # events in the throughput topic
    max_offsets: int  # per batch (maxOffsetsPerTrigger)
    rounds: int
    rate: int  # events/s of the latency runs
    seconds: float  # how long the latency producer writes
    latency_ms: int  # injected store round trip
    interval: str = "10s"  # Sparkpoint's checkpoint interval
    trigger: str = "100ms"
    partitions: int = 2  # shuffle (state) partitions of both


def sparkpoint_spec(name: str, bootstrap: str, topic: str, store_url: str, plan: Plan, max_offsets: int | None) -> dict:
    return {"apiVersion": "sparkpoint.dev/v1alpha1", "kind": "StreamingJob",
            "metadata": {"name": name, "namespace": "default"},
            "spec": {"job": {"entrypoint": "ingest:build", "pythonPath": [str(KAFKA_DIR)],
                             "args": {"bootstrap": bootstrap, "topic": topic, "max_offsets_per_trigger": max_offsets},
                             "triggerInterval": plan.trigger, "sink": {"kind": "delta", "path": "events"}},
                     "spark": {"master": "local[2]", "shufflePartitions": plan.partitions,
                               "eventLog": {"enabled": False}},
                     "checkpoint": {"interval": plan.interval, "retain": 3, "storage": {"url": store_url}}}}


@dataclass
class Bench:
    base: Path
    env: dict[str, str]  # the jobs' store settings: the endpoint is the proxy
    endpoint: str
    bootstrap: str
    plan: Plan
    jars: str  # vanilla's spark.jars: hadoop-aws and the Kafka connector

    def sparkpoint(self, tag: str, topic: str, max_offsets: int | None, done) -> dict[str, Any]:  # type: ignore[no-untyped-def]
        """Runs until done(batches, checkpoints) says so; returns the log's batches and checkpoints."""
        store_url = f"s3://{BUCKET}/{tag}-{uuid.uuid4().hex[:8]}"
        job = self.base / f"{tag}.yaml"
        job.write_text(yaml.safe_dump(sparkpoint_spec("kafka-bench", self.bootstrap, topic, store_url, self.plan,
                                                      max_offsets), sort_keys=False))
        log = self.base / f"{tag}.log"
        p = RuntimeProcess(job, self.base / f"{tag}-pod", log, until_batch=None,
                           env={**self.env, "SPARKPOINT_SPARK_JARS_DIR": str(jars_dir("spark-kafka"))}).start()
        try:
            while not done(*self._sparkpoint_log(log)):
                if not p.alive():
                    raise RuntimeError(f"{tag} exited; see {log}")
                time.sleep(1)
        finally:
            p.kill()
        batches, checkpoints = self._sparkpoint_log(log)
        return {"batches": batches, "checkpoints": checkpoints, "store": store_url,
                "table": sink_root(JobRef("default", "kafka-bench"), "events")}

    @staticmethod
    def _sparkpoint_log(log: Path) -> tuple[list[dict], list[dict]]:
        events = json_lines(log) if log.exists() else []
        batches = [{"batch": e["batchId"], "rows": e["inputRows"], "seconds": e["durationSeconds"], "ts": e["ts"]}
                   for e in events if e.get("msg") == "batch completed"]
        checkpoints = [{"batch": c.get("batchId"), "seconds": c["syncSeconds"] + c["asyncSeconds"],
                        "sync": c["syncSeconds"], "async": c["asyncSeconds"]} for c in completed_checkpoints(events)]
        return batches, checkpoints

    def vanilla(self, tag: str, topic: str, max_offsets: int | None, done) -> dict[str, Any]:  # type: ignore[no-untyped-def]
        prefix = f"{tag}-{uuid.uuid4().hex[:8]}"
        args = ["--jars", self.jars, "--endpoint", self.endpoint, "--bootstrap", self.bootstrap, "--topic", topic,
                "--checkpoint", f"s3a://{BUCKET}/{prefix}/checkpoint", "--output", f"s3a://{BUCKET}/{prefix}/out",
                "--max-offsets", str(max_offsets or 0), "--trigger", self.plan.trigger,
                "--shuffle-partitions", str(self.plan.partitions)]
        log = self.base / f"{tag}.log"
        with open(log, "wb") as out:
            proc = subprocess.Popen([sys.executable, str(KAFKA_DIR / "vanilla_kafka_job.py"), *args], stdout=out,
                                    stderr=subprocess.STDOUT, env={**os.environ, **self.env, "TZ": "UTC"},
                                    start_new_session=True)
        try:
            while not done(*self._vanilla_log(log)):
                if proc.poll() is not None:
                    raise RuntimeError(f"{tag} exited {proc.returncode}; see {log}")
                time.sleep(1)
        finally:
            with contextlib.suppress(ProcessLookupError):  # it may have exited already
                os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()
        batches, checkpoints = self._vanilla_log(log)
        return {"batches": batches, "checkpoints": checkpoints, "out": f"{prefix}/out"}

    @staticmethod
    def _vanilla_log(log: Path) -> tuple[list[dict], list[dict]]:
        events = [e for e in json_lines(log) if e.get("event") == "batch"]
        batches = [{"batch": e["batchId"], "rows": e["rows"], "seconds": e["durationMs"]["triggerExecution"] / 1000,
                    "ts": e["ts"]} for e in events]
        # in the batch: offset and commit log writes and the state store commit (as the peer benchmark counts)
        checkpoints = [{"batch": e["batchId"], "seconds": (e["durationMs"].get("walCommit", 0)
                                                           + e["durationMs"].get("commitOffsets", 0)
                                                           + (e.get("stateCommitMs") or 0)) / 1000}
                       for e in events if e["rows"]]
        return batches, checkpoints

    def run(self, setup: str, tag: str, topic: str, max_offsets: int | None, done) -> dict[str, Any]:  # type: ignore[no-untyped-def]
        runner = self.sparkpoint if setup == "sparkpoint-delta" else self.vanilla
        return runner(tag, topic, max_offsets, done)


def throughput(batches: list[dict], warmup: int = WARMUP_BATCHES) -> dict[str, Any]:
    """events/s from the end of the warm-up's last batch to the end of the last batch that read events."""
    data = [b for b in batches if b["rows"]]
    if len(data) <= warmup + 1:
        return {"events_per_s": None, "batches": len(data)}
    measured = data[warmup + 1:]
    span = measured[-1]["ts"] - data[warmup]["ts"]
    return {"events_per_s": round(sum(b["rows"] for b in measured) / span, 1) if span > 0 else None,
            "batches": len(measured), "median_batch_s": round(statistics.median(b["seconds"] for b in measured), 3)}


def produce(bootstrap: str, topic: str, *args: str) -> dict[str, Any]:
    run = subprocess.run([sys.executable, str(KAFKA_DIR / "producer.py"), bootstrap, topic, *args],
                         capture_output=True, text=True, timeout=3600,
                         env={**os.environ, "SPARKPOINT_SPARK_JARS_DIR": str(jars_dir("spark-kafka"))})
    if run.returncode != 0:
        raise RuntimeError(f"the producer failed: {run.stderr[-2000:]}")
    return json.loads(run.stdout.strip().splitlines()[-1])


def read_all(total: int):  # type: ignore[no-untyped-def]
    return lambda batches, checkpoints: sum(b["rows"] for b in batches) >= total


def committed_all(total: int, setup: str):  # type: ignore[no-untyped-def]
    """Every event read, and (Sparkpoint) a checkpoint covering that batch: then the table holds it."""
    def done(batches: list[dict], checkpoints: list[dict]) -> bool:
        seen, last = 0, None
        for b in batches:
            seen += b["rows"]
            if seen >= total:
                last = b["batch"]
                break
        if last is None:
            return False
        return setup != "sparkpoint-delta" or any((c["batch"] or -1) >= last for c in checkpoints)
    return done


def latency_of(bench: Bench, setup: str, result: dict[str, Any], since: float) -> dict[str, Any]:
    if setup == "sparkpoint-delta":
        store = open_store(result["store"])
        commits = latency.delta_commits(store, result["table"])
    else:
        store = open_store(f"s3://{BUCKET}")
        commits = latency.file_sink_commits(store, result["out"], latency.s3a_key(""))
    return latency.summary(list(latency.latencies(store, commits, since)))


def measure(bench: Bench, setups: list[str], earlier: dict[str, Any] | None = None) -> dict[str, Any]:
    """Throughput rounds, then a latency run per setup; `earlier` (a raw results file's) keeps its
    throughput rounds and runs only the latency part."""
    if earlier is not None:
        return {"throughput": earlier["throughput"], "latency": [latency_run(bench, setup) for setup in setups]}
    plan = bench.plan
    topic = f"backlog-{uuid.uuid4().hex[:6]}"
    backlog = produce(bench.bootstrap, topic, "--count", str(plan.backlog))
    print(f"backlog: {backlog}", flush=True)
    runs: list[dict[str, Any]] = []
    for rnd in range(plan.rounds):
        for setup in setups:
            tag = f"{setup}-r{rnd}"
            print(f"== throughput {tag} (load {load()})", flush=True)
            r = bench.run(setup, tag, topic, plan.max_offsets, read_all(plan.backlog))
            t = throughput(r["batches"])
            cps = [c["seconds"] for c in r["checkpoints"]]
            runs.append({"setup": setup, "round": rnd, **t, "checkpoints": r["checkpoints"],
                         "checkpoint_median_s": round(statistics.median(cps), 3) if cps else None,
                         "load": load()})
            print(f"   {runs[-1]['events_per_s']} events/s over {t['batches']} batches", flush=True)
    lat = [latency_run(bench, setup) for setup in setups]
    return {"throughput": runs, "latency": lat}


def latency_run(bench: Bench, setup: str) -> dict[str, Any]:
    """One warm-up event creates the topic and gives the job a first batch; once that ran (JVM and
    query up), a producer writes `rate` events a second for `seconds` (this poll blocks meanwhile, the
    job reads on); the run stops once all are committed. The warm-up row is not in the figure."""
    plan, live = bench.plan, f"live-{uuid.uuid4().hex[:6]}"
    print(f"== latency {setup} at {plan.rate}/s for {plan.seconds:.0f} s (load {load()})", flush=True)
    produce(bench.bootstrap, live, "--count", "1", "--first-id", str(WARMUP_ID))
    produced: dict[str, Any] = {}

    def done(batches: list[dict], checkpoints: list[dict]) -> bool:
        if not produced:
            if not batches:
                return False
            produced.update(produce(bench.bootstrap, live, "--rate", str(plan.rate), "--seconds", str(plan.seconds)))
        return committed_all(produced["produced"] + 1, setup)(batches, checkpoints)
    r = bench.run(setup, f"{setup}-latency", live, None, done)
    summary = latency_of(bench, setup, r, since=produced["from"])
    print(f"   {summary}", flush=True)
    return {"setup": setup, "rate": plan.rate, "seconds": plan.seconds, **produced, **summary, "load": load()}


def load() -> str:
    return " ".join(f"{x:.1f}" for x in os.getloadavg())


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--small", action="store_true", help="a small backlog, one round (minutes)")
    p.add_argument("--latency-ms", type=int, default=20)
    p.add_argument("--no-write", action="store_true", help="print, do not update docs/benchmarks.md")
    p.add_argument("--render-only", metavar="JSON", help="rewrite the section from saved raw results")
    p.add_argument("--latency-only", metavar="JSON", help="keep these raw results' throughput rounds (and plan), "
                   "run the latency part again")
    p.add_argument("--raw-out", metavar="JSON", help="also write the raw results here")
    for flag, kind in (("--backlog", int), ("--max-offsets", int), ("--rounds", int), ("--rate", int),
                       ("--seconds", float)):
        p.add_argument(flag, type=kind, help="override the plan's value (a run that fits a time budget)")
    args = p.parse_args(argv)
    if args.render_only:
        write(json.loads(Path(args.render_only).read_text()), args.no_write)
        return 0
    plan = (Plan(backlog=100_000, max_offsets=10_000, rounds=1, rate=500, seconds=20, latency_ms=args.latency_ms)
            if args.small else
            Plan(backlog=1_000_000, max_offsets=50_000, rounds=2, rate=2000, seconds=60, latency_ms=args.latency_ms))
    earlier = json.loads(Path(args.latency_only).read_text()) if args.latency_only else None
    if earlier is not None:
        plan = Plan(**{**earlier["plan"], "latency_ms": args.latency_ms})
    plan = replace(plan, **{k: v for k in ("backlog", "max_offsets", "rounds", "rate", "seconds")
                            if (v := getattr(args, k)) is not None})
    base = Path(tempfile.mkdtemp(prefix="sparkpoint-kafka-bench-"))
    loads = [load()]
    minio, proxy = MinioServer().start(), Toxiproxy().start()
    try:
        with KafkaServer(data_dir=str(base / "kafka"), heap="1g") as broker:
            minio.make_bucket(BUCKET)
            listen = proxy.proxy("minio", f"127.0.0.1:{minio.port}")
            proxy.set_latency("minio", plan.latency_ms)
            os.environ.update(minio.env())  # this process reads the results from MinIO directly
            jar_list = ",".join([vanilla.jars(), *(str(j) for j in sorted(jars_dir("spark-kafka").glob("*.jar")))])
            bench = Bench(base, {**minio.env(), "SPARKPOINT_S3_ENDPOINT": f"http://{listen}"}, f"http://{listen}",
                          broker.bootstrap, plan, jar_list)
            results = measure(bench, list(SETUPS), earlier)
    finally:
        proxy.stop()
        minio.stop()
    loads.append(load())
    raw = {"plan": asdict(plan), "loads": loads, "versions": versions(), "small": args.small,
           "command": "python bench/kafka_bench.py " + " ".join(argv if argv is not None else sys.argv[1:]), **results}
    if earlier is not None:  # the throughput rounds' run, then this one's latency part
        raw.update(loads=[*earlier["loads"], *loads], command=f"{earlier['command']}; then {raw['command']}",
                   versions={**raw["versions"], "throughput_commit": earlier["versions"]["commit"]})
    if args.raw_out:
        Path(args.raw_out).write_text(json.dumps(raw, indent=0))
    write(raw, args.no_write)
    shutil.rmtree(base, ignore_errors=True)
    return 0 if all(r.get("events_per_s") for r in results["throughput"]) else 1


def versions() -> dict[str, str]:
    import deltalake
    import pyspark

    commit = subprocess.run(["git", "rev-parse", "--short", "HEAD"], capture_output=True, text=True,
                            cwd=REPO).stdout.strip()
    return {"pyspark": pyspark.__version__, "deltalake": deltalake.__version__, "commit": commit}


def write(raw: dict[str, Any], no_write: bool) -> None:
    from kafka_delta.render import render

    section = render(raw, START, END)
    print(section)
    if not no_write:
        report.write_section(START, END, section)
        RAW.write_text(json.dumps(raw, indent=0))


if __name__ == "__main__":
    sys.exit(main())
