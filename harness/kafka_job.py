"""The Kafka example job (sparkpoint/examples/kafka_events.py) for tests and `make demo-kafka`: its
input events, its spec, an independent oracle of its output, and "has it read everything?".

Events are produced up front (or in parts around a broker outage) with event times 100 ms apart, so
the output depends only on the events, never on how Spark cut them into batches."""

from __future__ import annotations

import calendar
import json
import shutil
import signal
import time
import uuid
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

from sparkpoint.runtime.checkpoint.freeze import latest_committed_batch
from sparkpoint.runtime.sink.delta_table import DeltaLocation, delta_location
from sparkpoint.runtime.sink.keys import sink_root
from sparkpoint.runtime.sink.transactional import read_committed
from sparkpoint.runtime.store import JobRef, open_store

from .runtime_job import RuntimeProcess, committed, wait_until

T0_MS = 1_700_000_000_000  # a multiple of every window length used here
STEP_MS = 100


@dataclass
class KafkaJob:
    bootstrap: str
    topic: str
    name: str = "kafka-demo"
    events: int = 3000  # (events - 1) * STEP_MS must not be a multiple of the window: see expected_rows
    users: int = 50
    window_seconds: int = 10
    watermark_seconds: int = 30
    max_offsets_per_trigger: int | None = 150
    trigger: str = "1s"
    checkpoint_interval: str = "3s"
    extra_args: dict[str, Any] = field(default_factory=dict)
    sink: dict[str, Any] | None = None  # job.sink (default: the transactional sink at outputs/default)
    entrypoint: str = "sparkpoint.examples.kafka_events:build"
    python_path: list[str] = field(default_factory=list)

    def values(self, start: int = 0, stop: int | None = None) -> list[str]:
        """The JSON values of events start..stop-1 (all by default)."""
        return [json.dumps({"user": f"u{i % self.users}", "amount": i % 97, "ts": T0_MS + i * STEP_MS})
                for i in range(start, self.events if stop is None else stop)]

    def spec(self, store_url: str, restore_from: dict[str, Any] | None = None, **args: Any) -> dict[str, Any]:
        job_args = {"bootstrap": self.bootstrap, "topic": self.topic, "window": f"{self.window_seconds} seconds",
                    "watermark": f"{self.watermark_seconds} seconds",
                    "max_offsets_per_trigger": self.max_offsets_per_trigger, **self.extra_args, **args}
        job: dict[str, Any] = {"entrypoint": self.entrypoint, "args": job_args, "triggerInterval": self.trigger}
        if self.sink:
            job["sink"] = self.sink
        if self.python_path:
            job["pythonPath"] = self.python_path
        spec: dict[str, Any] = {"job": job, "spark": {"master": "local[2]"},
                                "checkpoint": {"interval": self.checkpoint_interval, "storage": {"url": store_url}}}
        if restore_from:
            spec["restoreFrom"] = restore_from
        return {"apiVersion": "sparkpoint.dev/v1alpha1", "kind": "StreamingJob",
                "metadata": {"name": self.name, "namespace": "default"}, "spec": spec}

    def write(self, path: Path, store_url: str, restore_from: dict[str, Any] | None = None, **args: Any) -> Path:
        """The job file; `args` override job.args (a restart may change maxOffsetsPerTrigger)."""
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(yaml.safe_dump(self.spec(store_url, restore_from, **args), sort_keys=False))
        return path

    def expected_rows(self) -> Counter:
        """The failure-free output computed in Python: the windows the final watermark (newest event
        time minus the delay) has closed, with their per-user counts and sums."""
        w, last = self.window_seconds * 1000, T0_MS + (self.events - 1) * STEP_MS
        watermark = last - self.watermark_seconds * 1000
        acc: dict[tuple[int, str], list[int]] = {}
        for i in range(self.events):
            ts = T0_MS + i * STEP_MS
            start = ts - ts % w
            if start + w > watermark:
                continue  # still open at the end: never emitted in append mode
            row = acc.setdefault((start // 1000, f"u{i % self.users}"), [0, 0])
            row[0] += 1
            row[1] += i % 97
        return Counter(json.dumps([s, u, n, a]) for (s, u), (n, a) in acc.items())


def canonical(rows: list[dict[str, Any]]) -> Counter:
    """Committed sink rows -> comparable multiset ([window start in epoch seconds, user, events, amount])."""
    out: Counter[str] = Counter()
    for row in rows:
        start = calendar.timegm(time.strptime(row["window"]["start"][:19], "%Y-%m-%dT%H:%M:%S"))
        out[json.dumps([start, row["user"], row["events"], row["amount"]])] += 1
    return out


def batch_offsets(work_dir: Path, batch: int) -> dict[str, int] | None:
    """{"topic/partition": end offset} of one batch from Spark's offset log in the hot dir."""
    path = work_dir / "hot" / "offsets" / str(batch)
    try:
        last = path.read_text().strip().splitlines()[-1]
    except (OSError, IndexError):
        return None
    return {f"{topic}/{part}": int(end) for topic, parts in json.loads(last).items() for part, end in parts.items()}


def read_all(work_dir: Path, events: int) -> bool:
    """True once the committed batches have read all `events` and the batch after the last data batch
    (the one the advanced watermark triggers, which emits the windows it closed) has committed too."""
    batch = latest_committed_batch(work_dir / "hot")
    if batch is None or batch < 1:
        return False
    ends = [batch_offsets(work_dir, b) for b in (batch - 1, batch)]
    return all(e is not None and sum(e.values()) == events for e in ends)


def drain(p: RuntimeProcess, timeout: float = 120) -> int:
    """SIGTERM the runtime only (not its JVM's group): it drains, takes a final checkpoint that
    publishes the output, and exits 0."""
    assert p.proc is not None
    p.proc.send_signal(signal.SIGTERM)
    return p.wait(timeout)


class JobRuns:
    """Runtimes of one KafkaJob in one pod dir against one store: started, killed and restored."""

    def __init__(self, base: Path, job: KafkaJob, store_url: str, env: dict[str, str], timeout: float = 600):
        self.base, self.job, self.store_url, self.env, self.timeout = base, job, store_url, env, timeout
        self.ref = JobRef("default", job.name)
        self.pod = base / "pod"
        self.starts = 0
        self.processes: list[RuntimeProcess] = []

    def start(self, restore_from: dict[str, Any] | None = None, env: dict[str, str] | None = None,
              **args: Any) -> RuntimeProcess:
        """A runtime on the pod dir; `args` override job.args for this start and later ones' files;
        `restore_from` is the spec's restoreFrom, `env` more environment (a fault to inject)."""
        self.starts += 1
        job_file = self.job.write(self.base / f"job-{self.starts}.yaml", self.store_url, restore_from, **args)
        p = RuntimeProcess(job_file, self.pod, self.base / f"logs/run-{self.starts}.log", until_batch=None,
                           env={**self.env, **(env or {})})
        self.processes.append(p)
        return p.start()

    def close(self) -> None:
        """Kill what is still running (a failed wait leaves the runtime and its JVM behind otherwise)."""
        for p in self.processes:
            if p.alive():
                p.kill()

    def __enter__(self) -> JobRuns:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def checkpoints(self) -> int:
        store = open_store(self.store_url, env=self.env)
        return sum(1 for o in store.list(f"{self.ref.root}/checkpoints/") if o.key.endswith(".json"))

    def wait_for(self, p: RuntimeProcess, batches: int, checkpoints: int) -> None:
        wait_until(lambda: self.checkpoints() >= checkpoints and committed(self.pod) >= batches, self.timeout,
                   f"{checkpoints} checkpoints and batch {batches}", p)

    def restart(self, p: RuntimeProcess, wipe: bool, restore_from: dict[str, Any] | None = None,
                **args: Any) -> tuple[RuntimeProcess, dict[str, Any]]:
        """SIGKILL, optionally wipe the pod's disk (a new pod: remote restore), start again; returns the
        new process and its restore report once it committed a batch past the kill."""
        p.kill()
        killed_at = committed(self.pod)
        if wipe:
            shutil.rmtree(self.pod)
        p = self.start(restore_from, **args)
        wait_until(lambda: p.restore_info(), self.timeout, "the restart", p)
        info = {**(p.restore_info() or {}), "killed_at": killed_at}
        wait_until(lambda: committed(self.pod) > max(killed_at, info.get("batch") or -1), self.timeout,
                   "a batch after the kill", p)
        return p, info

    def finish(self, p: RuntimeProcess) -> None:
        """Wait until everything was read and its windows emitted, then drain (publishes the output)."""
        wait_until(lambda: read_all(self.pod, self.job.events), self.timeout, "every event read", p)
        code = drain(p)
        if code != 0:
            raise RuntimeError(f"the drain ended with exit code {code}; see {p.log_path}")

    def sink_path(self) -> str:
        return str((self.job.sink or {}).get("path", "default"))

    def output(self) -> Counter:
        return canonical(read_committed(open_store(self.store_url, env=self.env), self.ref, self.sink_path()))

    def table(self) -> DeltaLocation:
        """Where the job's Delta table is (job.sink.kind: delta)."""
        return delta_location(open_store(self.store_url, env=self.env), sink_root(self.ref, self.sink_path()))

    def table_output(self, reader: str = "deltalake") -> Counter:
        return table_rows(self.table(), reader)


def table_rows(loc: DeltaLocation, reader: str = "deltalake") -> Counter:
    """A Delta table's current rows as canonical() counts them, read by delta-rs or by polars (libraries
    other than this project's reader, which follows the commit entries)."""
    if reader == "polars":
        import polars as pl

        rows = pl.read_delta(loc.uri, storage_options=loc.storage_options or None).to_dicts()
    else:
        from deltalake import DeltaTable

        rows = DeltaTable(loc.uri, storage_options=loc.storage_options).to_pyarrow_table().to_pylist()
    return Counter(json.dumps([int(r["window"]["start"].timestamp()), r["user"], r["events"], r["amount"]])
                   for r in rows)


def new_topic() -> str:
    return f"events-{uuid.uuid4().hex[:8]}"
