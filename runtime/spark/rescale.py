"""Rescale a stateful query's state to spec.spark.shufflePartitions before it starts (issue 26).

Spark pins a restarted query's shuffle partitions to the number its offset log recorded (the state
store keeps one partition per shuffle partition), so editing spark.shufflePartitions alone changes
nothing. Spark's own StreamingCheckpointManager.repartition (pyspark >= 4.2) rewrites the state
into n partitions as a new batch N+1 that reads no input; the runtime runs it on the restored hot
dir before the query starts (docs/design.md §9, "Rescaling state").
"""

from __future__ import annotations

import json
import logging
import os
import shutil
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

log = logging.getLogger("sparkpoint.spark")

SHUFFLE_PARTITIONS = "spark.sql.shuffle.partitions"


class RescaleError(Exception):
    """Spark refused or failed to repartition the state; the restored hot dir is not started."""

    def __init__(self, message: str, reason: str, source: int, target: int):
        super().__init__(message)
        self.reason, self.source, self.target = reason, source, target

    def to_json(self) -> dict[str, Any]:
        return {"from": self.source, "to": self.target, "reason": self.reason, "error": str(self)[:1500]}


@dataclass(frozen=True)
class Rescale:
    """A repartition that happened: from and to partitions, how long it took, the batch it wrote."""
    source: int
    target: int
    seconds: float
    batch: int | None

    def to_json(self) -> dict[str, Any]:
        return {"from": self.source, "to": self.target, "seconds": round(self.seconds, 3), "batch": self.batch}


def _batch_files(folder: Path) -> dict[int, Path]:
    try:
        names = os.listdir(folder)
    except FileNotFoundError:
        return {}
    return {int(n): folder / n for n in names if n.isdigit()}


def _committed(hot_dir: Path) -> int | None:
    return max(_batch_files(hot_dir / "commits"), default=None)


def has_state(hot_dir: Path) -> bool:
    """The query has stateful operators: Spark wrote a state folder per operator."""
    try:
        return any(n.isdigit() for n in os.listdir(hot_dir / "state"))
    except FileNotFoundError:
        return False


def recorded_partitions(hot_dir: Path) -> int | None:
    """The shuffle partitions the newest offset log entry pins (what a restart of the query uses),
    or None when the hot dir has no state or no offset log."""
    offsets = _batch_files(hot_dir / "offsets")
    if not offsets or not has_state(hot_dir):
        return None
    lines = offsets[max(offsets)].read_text().splitlines()
    if len(lines) < 2:  # "v1", then the batch's metadata (its conf), then one line per source
        return None
    value = (json.loads(lines[1]).get("conf") or {}).get(SHUFFLE_PARTITIONS)
    return int(value) if value is not None else None


def needed(hot_dir: Path, target: int) -> int | None:
    """The partition count to rescale from, or None when nothing is to do (no state, or the same)."""
    current = recorded_partitions(hot_dir)
    return current if current is not None and current != target else None


def clean_for_repartition(hot_dir: Path) -> list[str]:
    """Make the hot dir what repartition accepts: it refuses a last offset that has no commit
    (LAST_BATCH_FAILED), and a Hadoop `.N.crc` left beside no `N` breaks it. An offset past the
    newest commit is dropped (its batch is planned again from the committed end offsets, as after a
    remote restore), and so are orphaned `.crc` sidecars. Returns what was removed, relative."""
    removed: list[str] = []
    committed = _committed(hot_dir)
    for batch, path in sorted(_batch_files(hot_dir / "offsets").items()):
        if committed is None or batch > committed:
            path.unlink()
            removed.append(f"offsets/{path.name}")
    for log_dir in ("offsets", "commits"):
        folder = hot_dir / log_dir
        present = set(_batch_files(folder))
        for name in sorted(os.listdir(folder)) if folder.is_dir() else []:
            number = name[1:-4] if name.startswith(".") and name.endswith(".crc") else ""
            if number.isdigit() and int(number) not in present:
                (folder / name).unlink()
                removed.append(f"{log_dir}/{name}")
    return removed


def drop_unused_partitions(hot_dir: Path, partitions: int) -> list[str]:
    """Remove the state partitions a query of `partitions` partitions never reads (ids >= it):
    repartition leaves the old ones in place after a scale-down, and every later checkpoint would
    carry them. Returns what was removed, relative."""
    removed: list[str] = []
    state = hot_dir / "state"
    for op in sorted(state.iterdir()) if state.is_dir() else []:
        if not op.name.isdigit() or not op.is_dir():
            continue
        for part in sorted(op.iterdir(), key=lambda p: p.name):
            if part.name.isdigit() and int(part.name) >= partitions and part.is_dir():
                shutil.rmtree(part)
                removed.append(f"state/{op.name}/{part.name}")
    return removed


def repartition(spark: Any, hot_dir: Path, source: int, target: int,
                clock: Callable[[], float] = time.monotonic) -> Rescale:
    """Spark's repartition of the hot dir's state into `target` partitions (the query is not
    running). Raises RescaleError naming Spark's reason."""
    removed = clean_for_repartition(hot_dir) + drop_unused_partitions(hot_dir, source)
    if removed:
        log.info("hot dir cleaned for the repartition", extra={"removed": removed})
    started = clock()
    try:
        spark._streamingCheckpointManager.repartition(str(hot_dir), target)
    except Exception as exc:  # Py4J wraps Spark's error class in its message
        text = str(exc)
        reason = "last-batch-failed" if "LAST_BATCH_FAILED" in text else (
            "invalid-checkpoint" if "STATE_REPARTITION_INVALID_CHECKPOINT" in text else "spark")
        if len(text) > 1500:
            text = f"{text[:500]} ... {text[-1000:]}"
        raise RescaleError(f"repartitioning the state from {source} to {target} partitions failed: {text}",
                           reason, source, target) from exc
    seconds = clock() - started
    dropped = drop_unused_partitions(hot_dir, target)
    if dropped:
        log.info("state partitions the new count does not use removed", extra={"removed": dropped})
    return Rescale(source, target, seconds, _committed(hot_dir))
