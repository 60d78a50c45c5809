"""Restore on start (docs/design.md §5): local recovery, or a remote restore with fallbacks, or a fresh start.

Decision (pure, in `plan_restore`):
- `restoreFrom` in the spec is honoured once: until it is applied, the job restores from it, and
  from nothing else (a failure is an error for the operator, never silently replaced by another
  point). "Applied" is durable (issue 25): the start that applies a point writes a lineage record
  (layout.lineage_record_key) before its query runs, and claims the hot dir with it; a point is
  applied when the previous attempt's hot dir says so, or the newest record names it, or (no record:
  an older runtime's history) the newest readable manifest descends from it. When neither the
  records nor the latest manifest can be read, the start fails (LineageUnknownError, retried)
  rather than apply the point again and discard the history that descends from it.
- local recovery when enabled and the hot dir is this job's, restartable, continues the store's
  history (it wrote or restored the store's latest checkpoint, and no other attempt claimed the
  fence since its own), is not older than that checkpoint, and no start from it failed already
  (an unreadable latest checkpoint does not rule it out when it is the hot dir's own);
- otherwise the retained checkpoints newest first, then savepoints newest first: the first one that
  restores completely wins; every one skipped is logged at warning level with its reason, counted
  by reason, and listed in `/status` under `restore.fallbacks`;
- a fresh start when the store has no checkpoint, or when nothing of an applied `fresh:` point's
  history restores (its fallbacks listed as above).
"""

from __future__ import annotations

import json
import logging
import shutil
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, TypeGuard

from sparkpoint.runtime.checkpoint import restore
from sparkpoint.runtime.checkpoint.catalog import list_checkpoint_ids, load_manifest
from sparkpoint.runtime.checkpoint.restore import LocalCopy, RestoreError, choose_manifest
from sparkpoint.runtime.spec import RestoreFrom
from sparkpoint.runtime.store import JobRef, Manifest, ObjectStore, StoreError
from sparkpoint.runtime.store.layout import (
    lineage_prefix,
    lineage_record_key,
    lineage_record_of,
    savepoints_prefix,
)

from .hotdir import LocalState, claim, inspect_local

log = logging.getLogger("sparkpoint.restore")


class LineageUnknownError(StoreError):
    """Whether restoreFrom was applied cannot be read now. A store error (exit 1: the operator and
    the supervisor retry the same point), not a RestoreError (exit 3 would replace the point)."""


@dataclass(frozen=True)
class RestorePoint:
    kind: str  # checkpoint | savepoint
    id: str

    @property
    def tag(self) -> str:
        return f"{self.kind}:{self.id}"


@dataclass(frozen=True)
class Fallback:
    """A restore point that was passed over, and why."""

    point: RestorePoint
    error: str
    reason: str  # bounded label for the metric: see RestoreError.reason, or failed_start

    def to_json(self) -> dict[str, str]:
        return {self.point.kind: self.point.id, "error": self.error}


@dataclass(frozen=True)
class LineageFacts:
    """Which restore points the store shows applied (facts only; `plan_restore` judges them)."""

    recorded: str | None = None  # the point of the newest lineage record (None: no record)
    recorded_attempt: int | None = None  # the attempt that wrote it (that application of the point)
    # The newest record was written by another incarnation of the job's name (deleted with
    # gc.onDelete retain and created again): this StreamingJob has applied nothing yet.
    foreign: str | None = None
    records_problem: str | None = None  # the lineage records could not be listed
    newest_readable: str | None = None  # restoredFrom of the newest manifest that reads, if not the latest


@dataclass(frozen=True)
class RestorePlan:
    source: str  # local | remote | fresh | impossible | unknown (whether restoreFrom was applied)
    candidates: tuple[RestorePoint, ...] = ()  # remote: tried in this order
    reason: str = ""
    explicit: bool = False  # a restoreFrom not applied yet: no fallback to another point
    lineage_tag: str | None = None  # only points descending from this restoreFrom may be used
    # ...and written since its newest application: a point applied twice (a savepoint restored
    # again after the history moved on) has checkpoints of the earlier run that carry the same tag.
    lineage_since: int | None = None
    skipped: tuple[Fallback, ...] = ()  # points ruled out before trying (a failed start)

    @property
    def checkpoint_id(self) -> str | None:
        return self.candidates[0].id if self.candidates and self.candidates[0].kind == "checkpoint" else None

    @property
    def savepoint(self) -> str | None:
        return self.candidates[0].id if self.candidates and self.candidates[0].kind == "savepoint" else None


@dataclass
class RestoreOutcome:
    source: str
    batch_id: int | None  # committed batch the query resumes after (None: fresh)
    manifest: Manifest | None  # the manifest restored from, or the latest one for local recovery
    seconds: float
    lineage: dict[str, Any]
    reason: str
    fallbacks: list[Fallback] = field(default_factory=list)

    @property
    def point(self) -> RestorePoint | None:
        """The store point this start restored (None: local or fresh)."""
        if self.source != "remote" or self.manifest is None:
            return None
        return RestorePoint(self.manifest.kind, self.manifest.id)


def restore_tag(restore_from: RestoreFrom | None) -> str | None:
    if restore_from is None:
        return None
    if restore_from.savepoint:
        return f"savepoint:{restore_from.savepoint}"
    if restore_from.checkpoint:
        return f"checkpoint:{restore_from.checkpoint}"
    if restore_from.fresh:
        return f"fresh:{restore_from.fresh}"
    return None


def _restorable(tag: str | None) -> TypeGuard[str]:
    """A fresh start's tag names no point in the store (only the history that starts there)."""
    return tag is not None and tag != "" and not tag.startswith("fresh:")


def _failed_start(local: LocalState, point: RestorePoint | None) -> str | None:
    """The error of an earlier start from `point` (None: local) that died before committing a batch."""
    for f in local.failed_starts:
        if (point is None and f.get("source") == "local") or (
                point is not None and (f.get("source"), f.get("id")) == (point.kind, point.id)):
            return str(f.get("error") or "the query failed")
    return None


def judge_local(local: LocalState, latest: Manifest | None, latest_problem: str | None,
                attempt: int, latest_id: str | None = None) -> str | None:
    """Pure: None when the hot dir may be resumed, else why not."""
    if local.batch is None:
        return local.problem or "no local hot dir"
    if local.failed_starts:  # the hot dir holds what that start began from (local or restored)
        last = local.failed_starts[-1]
        return (f"the previous start ({last.get('source')} {last.get('id') or ''}) failed before committing "
                f"a batch: {last.get('error')}")
    if local.attempt is None:
        return "the hot dir's owner record names no attempt (written by an older runtime)"
    if attempt != local.attempt + 1:
        return (f"attempt {attempt}: another attempt claimed the fence after this hot dir's attempt "
                f"{local.attempt}")
    if latest_problem:  # its own: no other attempt ran since, so the hot dir is at or past it
        return None if latest_id == local.checkpoint else \
            f"the store's latest checkpoint is unreadable ({latest_problem})"
    if latest is None:
        return None  # nothing durable yet: the hot dir is the only history
    if latest.id != local.checkpoint and latest.attempt != local.attempt:
        return (f"the store's latest checkpoint {latest.id} (attempt {latest.attempt}) was not written or "
                f"restored by this hot dir (it last held {local.checkpoint or 'none'})")
    if latest.batch_id is not None and local.batch < latest.batch_id:
        return f"hot dir batch {local.batch} is older than checkpoint {latest.id} (batch {latest.batch_id})"
    return None


def applied(tag: str, *, latest: Manifest | None, latest_problem: str | None, lineage: LineageFacts,
            local: LocalState, attempt: int) -> tuple[bool | None, str]:
    """Pure: whether restore point `tag` was applied already, and the evidence; None: nothing tells."""
    if local.lineage == tag and local.attempt is not None and attempt == local.attempt + 1:
        return True, f"the previous attempt ({local.attempt}) ran its history from this hot dir"
    if lineage.foreign is not None:
        return False, f"the newest lineage record is an earlier job's of this name (incarnation {lineage.foreign})"
    if lineage.records_problem is None and lineage.recorded is not None:
        # Written before anything of a point's history is durable: the newest one is the lineage.
        return lineage.recorded == tag, f"the newest lineage record names {lineage.recorded}"
    shown = latest.extra.get("restoredFrom") if latest else lineage.newest_readable
    if shown == tag:
        return True, "a checkpoint descends from it"
    if lineage.records_problem is None or latest_problem is None:
        return False, "nothing descends from it"
    return None, (f"cannot tell whether restoreFrom {tag} was applied: the lineage records are unreadable "
                  f"({lineage.records_problem}) and so is the latest checkpoint ({latest_problem}); not applying "
                  "it again, which would discard the history that descends from it")


def plan_restore(*, restore_from: RestoreFrom | None, checkpoint_ids: list[str], savepoints: list[str],
                 latest: Manifest | None, latest_problem: str | None, local_recovery: bool,
                 local: LocalState, attempt: int, lineage: LineageFacts = LineageFacts()) -> RestorePlan:
    """Pure decision of where the state comes from.

    `checkpoint_ids` oldest first (the last is `latest`), `savepoints` newest first.
    """
    tag = restore_tag(restore_from)
    done, evidence = applied(tag, latest=latest, latest_problem=latest_problem, lineage=lineage, local=local,
                             attempt=attempt) if tag else (True, "")
    if done is None:
        return RestorePlan("unknown", reason=evidence, lineage_tag=tag)
    if tag and not done:
        if not _restorable(tag):  # not applied yet (or died before its first checkpoint): start empty
            return RestorePlan("fresh", reason=f"restoreFrom {tag}: start without state", explicit=True,
                               lineage_tag=tag)
        point = RestorePoint(*tag.split(":", 1))
        failed = _failed_start(local, point)
        if failed:
            return RestorePlan("impossible", reason=f"restoreFrom {tag}: the previous start from it failed "
                                                    f"before committing a batch: {failed}")
        return RestorePlan("remote", (point,), reason=f"restoreFrom {tag} not applied yet", explicit=True,
                           lineage_tag=tag)
    if local_recovery:
        why = judge_local(local, latest, latest_problem, attempt, checkpoint_ids[-1] if checkpoint_ids else None)
        if why is None and tag and local.lineage not in (None, tag):
            why = f"the hot dir's history descends from {local.lineage}, not from restoreFrom {tag}"
        if why is None:
            return RestorePlan("local", reason=f"hot dir is valid at batch {local.batch}", lineage_tag=tag)
    else:
        why = "local recovery disabled"
    if not checkpoint_ids and not _restorable(tag):  # an applied fresh point: nothing of it is durable
        return RestorePlan("fresh", reason=f"no checkpoint in the store; not resuming the hot dir: {why}",
                           lineage_tag=tag)
    points = [RestorePoint("checkpoint", c) for c in reversed(checkpoint_ids)]
    points += [RestorePoint("savepoint", s) for s in savepoints]
    if _restorable(tag) and RestorePoint(*tag.split(":", 1)) not in points:
        points.append(RestorePoint(*tag.split(":", 1)))  # the last resort of an applied restoreFrom
    skipped, candidates = [], []
    for p in points:
        failed = _failed_start(local, p)
        if failed:
            skipped.append(Fallback(p, f"the previous start from it failed before committing a batch: {failed}",
                                    "failed_start"))
        else:
            candidates.append(p)
    if not candidates:
        return RestorePlan("impossible", reason=f"{why}; and every restore point failed to start",
                           skipped=tuple(skipped))
    if tag:
        why = f"{why}; restoreFrom {tag} applied ({evidence}): keeping to its history"
    since = lineage.recorded_attempt if tag and lineage.recorded == tag else None
    return RestorePlan("remote", tuple(candidates), reason=why, lineage_tag=tag, skipped=tuple(skipped),
                       lineage_since=since)


def savepoint_names(store: ObjectStore, job: JobRef) -> list[str]:
    """Completed savepoints, newest first (by the time their manifest was written)."""
    prefix = savepoints_prefix(job)
    found = []
    for info in store.list(prefix):
        rest = info.key[len(prefix):]
        if rest.count("/") == 1 and rest.endswith("/manifest.json"):
            found.append((info.last_modified, rest.split("/", 1)[0]))
    return [name for _, name in sorted(found, reverse=True)]


def _latest(store: ObjectStore, job: JobRef, ids: list[str]) -> tuple[Manifest | None, str | None]:
    if not ids:
        return None, None
    try:
        return load_manifest(store, job, ids[-1]), None
    except StoreError as exc:
        return None, f"{ids[-1]}: {exc}"


def read_lineage(store: ObjectStore, job: JobRef, ids: list[str], latest_problem: str | None,
                 incarnation: str | None = None) -> LineageFacts:
    """The lineage records (a failed listing is a fact too), and with an unreadable latest manifest
    the lineage of the newest one that reads."""
    foreign = None
    try:
        records = sorted(r for r in (lineage_record_of(o.key) for o in store.list(lineage_prefix(job))) if r)
        recorded, problem = (records[-1][1] if records else None), None
        since = records[-1][0] if records else None
        if records and incarnation:
            body = json.loads(store.get_bytes(lineage_record_key(job, *records[-1])))
            if body.get("incarnation") not in (None, incarnation):  # (records before 2026-11 name none)
                foreign = str(body["incarnation"])
    except (StoreError, ValueError) as exc:
        recorded, problem, since = None, f"{lineage_prefix(job)}: {exc}", None
    newest_readable = None
    for cid in reversed(ids[:-1] if latest_problem else []):
        try:
            newest_readable = load_manifest(store, job, cid).extra.get("restoredFrom")
            break
        except StoreError:
            continue  # the restore reports it, if it gets that far
    return LineageFacts(recorded=recorded, recorded_attempt=since, records_problem=problem,
                        newest_readable=newest_readable, foreign=foreign)


def record_applied(store: ObjectStore, job: JobRef, attempt: int, tag: str, incarnation: str | None = None) -> None:
    """The durable fact that `attempt` applied `tag`: written before its query runs, so before any
    checkpoint or output of that history exists. Never deleted by GC."""
    body = {"restoreFrom": tag, "attempt": attempt, "appliedAt": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
            **({"incarnation": incarnation} if incarnation else {})}
    store.put_if_absent(lineage_record_key(job, attempt, tag), json.dumps(body).encode())


def restore_on_start(*, store: ObjectStore, job: JobRef, store_url: str, work_dir: Path, hot_dir: Path,
                     restore_from: RestoreFrom | None, local_recovery: bool, attempt: int,
                     incarnation: str | None = None, local_copy: LocalCopy | None = None) -> RestoreOutcome:
    """Prepare the hot dir; raises RestoreError (loudly) when no usable restore point is left, and
    LineageUnknownError (hot dir untouched) when whether restoreFrom was applied cannot be read.
    `local_copy`: a promoted standby's verified objects, used instead of downloads (same plan)."""
    started = time.perf_counter()
    ids = list_checkpoint_ids(store, job)
    latest, latest_problem = _latest(store, job, ids)
    facts = read_lineage(store, job, ids, latest_problem, incarnation) if restore_tag(restore_from) else LineageFacts()
    local = inspect_local(work_dir, hot_dir, job, store_url)
    plan = plan_restore(restore_from=restore_from, checkpoint_ids=ids, savepoints=savepoint_names(store, job),
                        latest=latest, latest_problem=latest_problem, local_recovery=local_recovery,
                        local=local, attempt=attempt, lineage=facts)
    log.info("restore plan", extra={"source": plan.source, "candidates": [p.tag for p in plan.candidates],
                                    "reason": plan.reason})
    for f in plan.skipped:
        log.warning("restore point skipped", extra={"point": f.point.tag, "error": f.error})
    if plan.source == "unknown":
        log.error("restore refused", extra={"restoreFrom": plan.lineage_tag, "error": plan.reason})
        raise LineageUnknownError(plan.reason)
    if plan.source == "impossible":
        raise RestoreError(plan.reason, reason="failed_start", points=())

    def take_over(checkpoint: str | None, tag: str | None) -> dict[str, str]:
        """Record the applied restoreFrom (unless the store shows it already), then claim the hot dir."""
        wanted = restore_tag(restore_from)
        if wanted and tag == wanted and (plan.explicit or (facts.records_problem is None and facts.recorded != tag)
                                          or facts.foreign is not None):
            record_applied(store, job, attempt, tag, incarnation)
        claim(work_dir, job, store_url, attempt=attempt, checkpoint=checkpoint, failed_starts=local.failed_starts,
              lineage=tag)
        return {"restoredFrom": tag} if tag else {}

    def elapsed() -> float:
        return time.perf_counter() - started

    if plan.source == "local":
        tag = plan.lineage_tag or (latest.extra.get("restoredFrom") if latest else local.lineage)
        lineage = take_over(latest.id if latest else local.checkpoint, tag)
        return RestoreOutcome("local", local.batch, latest, elapsed(), lineage, plan.reason)
    shutil.rmtree(hot_dir, ignore_errors=True)
    if plan.source == "fresh":
        return RestoreOutcome("fresh", None, None, elapsed(), take_over(None, plan.lineage_tag), plan.reason)
    fallbacks = list(plan.skipped)
    for point in plan.candidates:
        try:
            manifest = _restore_point(store, job, hot_dir, point, plan, local_copy)
        except RestoreError as exc:
            if plan.explicit:
                raise RestoreError(f"restoreFrom {point.tag} failed: {exc}; not falling back to another point "
                                   f"(fix the store or change restoreFrom)", reason=exc.reason,
                                   points=(point.tag,)) from exc
            fallbacks.append(Fallback(point, str(exc), exc.reason))
            log.warning("restore point unusable; trying the next one",
                        extra={"point": point.tag, "reason": exc.reason, "error": str(exc)})
            continue
        if manifest is None:
            continue  # predates the applied restoreFrom: not this job's current history
        tag = plan.lineage_tag if plan.explicit or point.tag == plan.lineage_tag else manifest.extra.get("restoredFrom")
        lineage = take_over(manifest.id if point.kind == "checkpoint" else None, tag)
        reason = plan.reason if not fallbacks else f"{plan.reason}; fell back past {len(fallbacks)} point(s)"
        return RestoreOutcome("remote", manifest.batch_id, manifest, elapsed(), lineage, reason, fallbacks)
    if plan.lineage_tag and not _restorable(plan.lineage_tag):
        # An applied fresh point whose history has no restorable checkpoint: where that history began.
        reason = f"{plan.reason}; no checkpoint of {plan.lineage_tag} restores: starting without state"
        log.warning("no checkpoint of the applied fresh start restores; starting without state",
                    extra={"restoreFrom": plan.lineage_tag, "fallbacks": len(fallbacks)})
        return RestoreOutcome("fresh", None, None, elapsed(), take_over(None, plan.lineage_tag), reason, fallbacks)
    detail = "; ".join(f"{f.point.tag}: {f.error}" for f in fallbacks)
    raise RestoreError(f"no restorable checkpoint or savepoint of job {job}: {detail}", reason="none_restorable",
                       points=tuple(f.point.tag for f in fallbacks if f.reason != "failed_start"))


def _restore_point(store: ObjectStore, job: JobRef, hot_dir: Path, point: RestorePoint,
                   plan: RestorePlan, local_copy: LocalCopy | None = None) -> Manifest | None:
    """Restore `point` into the hot dir; None when it predates the applied restoreFrom."""
    checkpoint_id = point.id if point.kind == "checkpoint" else None
    savepoint = point.id if point.kind == "savepoint" else None
    if plan.lineage_tag and not plan.explicit and point.tag != plan.lineage_tag:
        manifest, _ = choose_manifest(store, job, checkpoint_id=checkpoint_id, savepoint=savepoint)
        earlier_run = plan.lineage_since is not None and manifest.attempt < plan.lineage_since
        if manifest.extra.get("restoredFrom") != plan.lineage_tag or earlier_run:
            log.info("restore point predates restoreFrom; skipped",
                     extra={"point": point.tag, "restoreFrom": plan.lineage_tag, "earlierRun": earlier_run})
            return None
    return restore(store, job, hot_dir, checkpoint_id=checkpoint_id, savepoint=savepoint, local=local_copy).manifest
