"""What every setup shares: the workload, the run context and the result of one run."""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any


@dataclass(frozen=True)
class Workload:
    """The windowed keyed aggregation of sparkpoint/examples/windowed_aggregation.py over the
    deterministic rate-micro-batch source; `payload_bytes` per key sets the state size."""
    rows_per_batch: int
    keys: int
    batches: int
    payload_bytes: int = 0
    trigger: str = "100ms"
    warmup_batches: int = 5  # JIT, first RocksDB files: not measured

    @property
    def until_batch(self) -> int:
        return self.batches + 3


@dataclass
class Context:
    base: Path  # scratch dir for this benchmark run
    bucket: str
    endpoint: str  # what the jobs talk to: the toxiproxy listener in front of MinIO
    env: dict[str, str]  # store credentials (+ SPARKPOINT_S3_ENDPOINT = endpoint)
    latency_ms: int = 0


@dataclass
class RunResult:
    setup: str
    latency_ms: int
    durations: list[float]  # measured micro-batch durations (s), warm-up excluded
    active_seconds: float  # from the first to the last measured batch (request rates use it)
    checkpoints: list[dict[str, Any]] = field(default_factory=list)  # bytes, new_bytes, sync_s, async_s
    command: str = ""
    note: str = ""
    requests: dict[str, int] = field(default_factory=dict)
    bucket_bytes: int = 0
    objects_by_area: dict[str, int] = field(default_factory=dict)  # left in the bucket at the run's end
    window: list[float] = field(default_factory=list)  # wall time of the first and last measured batch
    requests_window: dict[str, int] = field(default_factory=dict)  # requests inside `window` only
    window_seconds: float = 0.0
    cpu_window: dict[str, float] = field(default_factory=dict)  # CPU seconds by process kind inside `window`
    phases: dict[str, list[float]] = field(default_factory=dict)  # Spark's durationMs per measured batch (s)


def batch_phases(durations_ms: list[dict[str, Any]]) -> dict[str, list[float]]:
    """Spark's per-phase durations (ms, one dict per batch) as seconds per phase, one value per batch
    (0 where a batch lacks the phase), triggerExecution (the whole batch) left out."""
    names = sorted({k for d in durations_ms for k in d} - {"triggerExecution"})
    return {k: [float(d.get(k, 0)) / 1000.0 for d in durations_ms] for k in names}


def group(results: list[dict[str, Any]]) -> dict[tuple[int, str], list[dict[str, Any]]]:
    """Raw results (dicts) with measured batches, by (latency, setup), in run order (their rounds)."""
    out: dict[tuple[int, str], list[dict[str, Any]]] = {}
    for r in results:
        if r["durations"]:
            out.setdefault((r["latency_ms"], r["setup"]), []).append(r)
    return out


def json_lines(path: Path) -> list[dict[str, Any]]:
    out = []
    for line in path.read_text(errors="replace").splitlines():
        if line.startswith("{"):
            try:
                out.append(json.loads(line))
            except ValueError:
                continue
    return out


def completed_checkpoints(events: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The requests of the completed checkpoints (and savepoints) in a Sparkpoint runtime's log."""
    return [e["request"] for e in events
            if e.get("msg") == "checkpoint request finished" and e["request"]["status"] == "completed"]
