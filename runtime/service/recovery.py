"""Restore on start (DESIGN.md §5): local recovery, or a remote restore, or a fresh start.

Decision (pure, in `plan_restore`):
- `restoreFrom` in the spec is honoured once: until a checkpoint exists whose lineage says it
  descends from that restore point, the job restores from it; afterwards it continues normally.
- local recovery when enabled, the hot dir belongs to this job, Spark can restart from it, and it
  is not older than the latest completed checkpoint;
- otherwise the latest completed checkpoint, or a fresh start when there is none.
"""

from __future__ import annotations

import json
import logging
import shutil
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from sparkpoint.runtime.checkpoint import latest_checkpoint, restore
from sparkpoint.runtime.checkpoint.freeze import FreezeError, check_restartable
from sparkpoint.runtime.config import RestoreFrom
from sparkpoint.runtime.store import JobRef, Manifest, ObjectStore

log = logging.getLogger("sparkpoint.restore")


@dataclass(frozen=True)
class RestorePlan:
    source: str  # local | remote | fresh
    checkpoint_id: str | None = None
    savepoint: str | None = None
    reason: str = ""


@dataclass
class RestoreOutcome:
    source: str
    batch_id: int | None  # committed batch the query resumes after (None: fresh)
    manifest: Manifest | None  # the manifest restored from, or the latest one for local recovery
    seconds: float
    lineage: dict[str, Any]
    reason: str


def restore_tag(restore_from: RestoreFrom | None) -> str | None:
    if restore_from is None:
        return None
    if restore_from.savepoint:
        return f"savepoint:{restore_from.savepoint}"
    if restore_from.checkpoint:
        return f"checkpoint:{restore_from.checkpoint}"
    return None


def plan_restore(*, restore_from: RestoreFrom | None, latest: Manifest | None, local_recovery: bool,
                 local_batch: int | None, local_problem: str | None) -> RestorePlan:
    """Pure decision of where the state comes from."""
    tag = restore_tag(restore_from)
    if tag and not (latest and latest.extra.get("restoredFrom") == tag):
        return RestorePlan("remote", checkpoint_id=restore_from.checkpoint, savepoint=restore_from.savepoint,
                           reason=f"restoreFrom {tag} not applied yet")
    if local_recovery and local_batch is not None:
        if latest is None or latest.batch_id is None or local_batch >= latest.batch_id:
            return RestorePlan("local", reason=f"hot dir is valid at batch {local_batch}")
        local_problem = f"hot dir batch {local_batch} is older than checkpoint {latest.id}"
    if latest is not None:
        why = "local recovery disabled" if not local_recovery else (local_problem or "no hot dir")
        return RestorePlan("remote", checkpoint_id=latest.id, reason=why)
    return RestorePlan("fresh", reason="no checkpoint in the store")


OWNER_FILE = "owner.json"


def owner_of(work_dir: Path) -> dict[str, Any] | None:
    try:
        return json.loads((work_dir / OWNER_FILE).read_text())
    except (OSError, ValueError):
        return None


def write_owner(work_dir: Path, job: JobRef, store_url: str) -> None:
    work_dir.mkdir(parents=True, exist_ok=True)
    (work_dir / OWNER_FILE).write_text(json.dumps({"job": str(job), "store": store_url}))


def inspect_local(work_dir: Path, hot_dir: Path, job: JobRef, store_url: str) -> tuple[int | None, str | None]:
    """(restartable batch, None) or (None, why not)."""
    owner = owner_of(work_dir)
    if owner is None:
        return None, "no local hot dir (new pod or wiped disk)"
    if owner != {"job": str(job), "store": store_url}:
        return None, f"local hot dir belongs to {owner.get('job')} at {owner.get('store')}"
    try:
        return check_restartable(hot_dir), None
    except FreezeError as exc:
        return None, str(exc)


def restore_on_start(*, store: ObjectStore, job: JobRef, store_url: str, work_dir: Path, hot_dir: Path,
                     restore_from: RestoreFrom | None, local_recovery: bool) -> RestoreOutcome:
    """Prepare the hot dir; raises RestoreError (loudly) if the chosen restore point is unusable."""
    started = time.perf_counter()
    latest = latest_checkpoint(store, job)
    local_batch, problem = inspect_local(work_dir, hot_dir, job, store_url)
    plan = plan_restore(restore_from=restore_from, latest=latest, local_recovery=local_recovery,
                        local_batch=local_batch, local_problem=problem)
    log.info("restore plan", extra={"source": plan.source, "checkpoint": plan.checkpoint_id,
                                    "savepoint": plan.savepoint, "reason": plan.reason})
    if plan.source == "local":
        lineage = {"restoredFrom": latest.extra["restoredFrom"]} if latest and "restoredFrom" in latest.extra else {}
        return RestoreOutcome("local", local_batch, latest, time.perf_counter() - started, lineage, plan.reason)
    shutil.rmtree(hot_dir, ignore_errors=True)
    write_owner(work_dir, job, store_url)
    if plan.source == "fresh":
        return RestoreOutcome("fresh", None, None, time.perf_counter() - started, {}, plan.reason)
    result = restore(store, job, hot_dir, checkpoint_id=plan.checkpoint_id, savepoint=plan.savepoint)
    manifest = result.manifest
    if plan.savepoint or (restore_tag(restore_from) and plan.checkpoint_id == restore_from.checkpoint):
        lineage = {"restoredFrom": restore_tag(restore_from)}
    else:
        lineage = {"restoredFrom": manifest.extra["restoredFrom"]} if "restoredFrom" in manifest.extra else {}
    return RestoreOutcome("remote", manifest.batch_id, manifest, time.perf_counter() - started, lineage,
                          plan.reason)
