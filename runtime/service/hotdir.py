"""Who owns the local hot dir, and what it last held (work_dir/owner.json).

The record lets a restart judge its own hot dir against the store instead of trusting batch numbers:
- `attempt`: the attempt that last ran from this hot dir;
- `checkpoint`: the last checkpoint id this hot dir wrote or restored (None: none yet);
- `restoredFrom`: the restore point its history descends from (the lineage tag, as in manifests):
  with `attempt`, proof that the point was applied even when the store cannot show it;
- `failedStarts`: starts from a restore point (local or a store point) whose query died before
  committing a batch; the next start does not pick that point again. Cleared by the first batch
  a start commits.

Written atomically (temp file + rename), so a crash leaves the old record or the new one.
"""

from __future__ import annotations

import json
import logging
import os
import threading
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from sparkpoint.runtime.checkpoint.freeze import FreezeError, check_restartable
from sparkpoint.runtime.store import JobRef

log = logging.getLogger("sparkpoint.runtime")

OWNER_FILE = "owner.json"


def owner_of(work_dir: Path) -> dict[str, Any] | None:
    try:
        doc = json.loads((work_dir / OWNER_FILE).read_text())
    except (OSError, ValueError):
        return None
    return doc if isinstance(doc, dict) else None


def write_owner(work_dir: Path, doc: dict[str, Any]) -> None:
    work_dir.mkdir(parents=True, exist_ok=True)
    tmp = work_dir / f".{OWNER_FILE}.tmp"
    tmp.write_text(json.dumps(doc))
    os.replace(tmp, work_dir / OWNER_FILE)


def claim(work_dir: Path, job: JobRef, store_url: str, *, attempt: int, checkpoint: str | None,
          failed_starts: list[dict[str, Any]] | None = None, lineage: str | None = None) -> None:
    """Record that `attempt` now runs from this hot dir, which holds `checkpoint`'s history."""
    write_owner(work_dir, {"job": str(job), "store": store_url, "attempt": attempt, "checkpoint": checkpoint,
                           "restoredFrom": lineage, "failedStarts": failed_starts or []})


_update_lock = threading.Lock()  # the checkpoint thread and the main thread both update the record


def update_owner(work_dir: Path, **changes: Any) -> None:
    with _update_lock:
        doc = owner_of(work_dir)
        if doc is not None:
            write_owner(work_dir, {**doc, **changes})


def record_failed_start(work_dir: Path, point: Any, *, batch: int | None, attempt: int, error: str) -> None:
    """A start from `point` (a restore point's kind and id; None: the hot dir itself) died before
    committing a batch: record it, replacing an earlier record of the same point."""
    if len(error) > 600:  # Py4J wraps Spark's cause in a Python traceback: keep both ends
        error = f"{error[:200]} ... {error[-400:]}"
    entry = {"source": "local"} if point is None else {"source": point.kind, "id": point.id}
    owner = owner_of(work_dir) or {}
    failed = [f for f in owner.get("failedStarts") or [] if f.get("source") != entry["source"]
              or f.get("id") != entry.get("id")]
    update_owner(work_dir, failedStarts=[*failed, {**entry, "batch": batch, "attempt": attempt, "error": error}])
    log.warning("start from the restore point failed before committing a batch; the next start "
                "will not use it", extra={**entry, "batch": batch, "error": error})


@dataclass(frozen=True)
class LocalState:
    """What the hot dir offers a restart (facts only; `plan_restore` judges them)."""

    batch: int | None = None  # the committed batch Spark would restart after (None: not restartable)
    problem: str | None = None  # why it is not restartable
    attempt: int | None = None  # the attempt that last ran from it
    checkpoint: str | None = None  # the last checkpoint id it wrote or restored
    failed_starts: list[dict[str, Any]] = field(default_factory=list)
    lineage: str | None = None  # the restore point its history descends from (None: none, or not recorded)


def inspect_local(work_dir: Path, hot_dir: Path, job: JobRef, store_url: str) -> LocalState:
    owner = owner_of(work_dir)
    if owner is None:
        return LocalState(problem="no local hot dir (new pod or wiped disk)")
    if (owner.get("job"), owner.get("store")) != (str(job), store_url):
        return LocalState(problem=f"local hot dir belongs to {owner.get('job')} at {owner.get('store')}")
    failed = [f for f in owner.get("failedStarts") or [] if isinstance(f, dict)]
    attempt = owner.get("attempt")
    lineage = owner.get("restoredFrom")
    facts: dict[str, Any] = {"attempt": attempt if isinstance(attempt, int) else None, "checkpoint": owner.get("checkpoint"),
             "failed_starts": failed, "lineage": lineage if isinstance(lineage, str) else None}
    try:
        return LocalState(batch=check_restartable(hot_dir), **facts)
    except FreezeError as exc:
        return LocalState(problem=str(exc), **facts)
