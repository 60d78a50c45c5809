"""Mirror jobs' event logs (`history/<attempt>/<start>/eventlog_v2_<app>/...`, docs/design.md §3) into one
local directory that Spark's History Server reads (`spark.history.fs.logDirectory`); the chart's
History Server runs it as a sidecar (`sparkpoint history sync`, docs/design.md §9).

Why a mirror and not s3a: the History Server reads the top level of one directory, while a job's
logs live under its own prefix, per attempt; and s3a needs hadoop-aws and the AWS SDK bundle in the
image. The mirror uses the store client every other part uses (S3 or a directory store), so the
History Server holds no new jars and only a read credential.

Local names: `eventlog_v2_<namespace>_<job>_<attempt>_<start>_<app id>/` (Spark accepts any directory
name starting with `eventlog_v2_`; the application's id and name come from the events; a start in the
layout before the attempt level, `history/<start>/...`, mirrors with attempt = start). A file is
downloaded again when the store's size or modification time changed, into a hidden temp file renamed
into place, so the History Server never reads a half-written file. When the store holds both markers
of an application (`appstatus_X.inprogress` and `appstatus_X`, before GC removes the stale one), only
the completed one is mirrored. Local directories whose store files are gone (collected by GC) are
removed. The mirror never writes to or deletes from the store.

Which jobs: the ones named (`--job`), or, without names, every job of the store, found again at every
pass (`discover_jobs`). The store lists with a delimiter for that
(`ObjectStore.list_children`: S3's CommonPrefixes, a directory's subdirectories): one request for the
namespaces under the store's root, one per namespace for its jobs, then each job's `history/` listing
(empty for a job without logs), so a pass costs 1 + namespaces + jobs listings, never a listing of
the jobs' checkpoint objects. Names that are not DNS labels (`.sparkpoint-check`) are not jobs.
"""

from __future__ import annotations

import logging
import os
import shutil
from dataclasses import dataclass, field
from pathlib import Path

from sparkpoint.runtime.store import JobRef, ObjectInfo, ObjectStore, StoreError
from sparkpoint.runtime.store.layout import history_entry_of, history_prefix

log = logging.getLogger("sparkpoint.history")

_PREFIX = "eventlog_v2_"


def local_dir_name(job: JobRef, attempt: int, start: int, app_dir: str) -> str:
    return f"{_PREFIX}{job.namespace}_{job.name}_{attempt:06d}_{start:06d}_{app_dir.removeprefix(_PREFIX)}"


def job_dir_prefix(job: JobRef) -> str:
    return f"{_PREFIX}{job.namespace}_{job.name}_"


def wanted(infos: list[ObjectInfo], job: JobRef) -> dict[str, ObjectInfo]:
    """Local relative path -> the store object to mirror there (stale `.inprogress` markers left out)."""
    out: dict[str, ObjectInfo] = {}
    for info in infos:
        entry = history_entry_of(info.key, job)
        if entry is not None and not entry.name.startswith("."):
            out[f"{local_dir_name(job, entry.attempt, entry.start, entry.app_dir)}/{entry.name}"] = info
    for rel in [r for r in out if r.endswith(".inprogress")]:
        if rel.removesuffix(".inprogress") in out:
            del out[rel]
    return out


@dataclass
class SyncResult:
    downloaded: int = 0
    downloaded_bytes: int = 0
    removed: int = 0
    jobs: int = 0
    applications: int = 0
    errors: list[str] = field(default_factory=list)


def discover_jobs(store: ObjectStore) -> list[JobRef]:
    """Every <namespace>/<job> of the store (whether it has event logs shows in its history/ listing,
    which the pass makes anyway: checking first would cost the same request again)."""
    jobs = []
    for namespace in store.list_children(""):
        if not _is_label(namespace):
            continue
        for name in store.list_children(f"{namespace}/"):
            if _is_label(name):
                jobs.append(JobRef(namespace, name))
    return jobs


def _is_label(name: str) -> bool:
    try:
        JobRef(name, name)
    except ValueError:
        return False
    return True


class HistoryMirror:
    """jobs: the jobs to mirror, or None: every job of the store with event logs, found at each pass."""

    def __init__(self, store: ObjectStore, jobs: list[JobRef] | None, dest: Path):
        self.store, self.jobs, self.dest = store, jobs, dest
        self.seen: dict[str, tuple[int, float]] = {}  # local relative path -> (size, store mtime) mirrored
        dest.mkdir(parents=True, exist_ok=True)

    def sync(self) -> SyncResult:
        result = SyncResult()
        try:
            jobs = self.jobs if self.jobs is not None else discover_jobs(self.store)
        except StoreError as exc:  # nothing known this pass: keep every local copy
            result.errors.append(f"discovering jobs: {type(exc).__name__}: {exc}")
            log.warning("history job discovery failed", extra={"error": str(exc)})
            return result
        want: dict[str, ObjectInfo] = {}
        failed: list[JobRef] = []
        for job in jobs:
            try:
                want.update(self._sync_job(job, result))
            except Exception as exc:  # noqa: BLE001 - one job's store trouble must not stop the others
                failed.append(job)
                result.errors.append(f"{job}: {type(exc).__name__}: {exc}")
                log.warning("history sync failed", extra={"job": str(job), "error": str(exc)})
        self._remove_unwanted(want, failed, result)
        result.jobs = len(jobs)
        result.applications = len({rel.split("/", 1)[0] for rel in want})
        return result

    def _sync_job(self, job: JobRef, result: SyncResult) -> dict[str, ObjectInfo]:
        want = wanted(list(self.store.list(history_prefix(job))), job)
        for rel, info in sorted(want.items(), key=lambda kv: kv[0].rsplit("/", 1)[1].startswith("appstatus_")):
            target = self.dest / rel
            if self.seen.get(rel) == (info.size, info.last_modified) and target.exists():
                continue
            target.parent.mkdir(parents=True, exist_ok=True)
            tmp = target.parent / f".{target.name}.sync"
            self.store.get_file(info.key, str(tmp))
            os.replace(tmp, target)
            self.seen[rel] = (info.size, info.last_modified)
            result.downloaded += 1
            result.downloaded_bytes += info.size
        return want

    def _remove_unwanted(self, want: dict[str, ObjectInfo], failed: list[JobRef], result: SyncResult) -> None:
        """What the store no longer has (collected attempts, a replaced .inprogress marker, a job gone
        from the list or the store) goes locally too; a job whose listing failed keeps its copies."""
        keep = tuple(job_dir_prefix(j) for j in failed)
        for app_dir in [d for d in self.dest.iterdir() if d.is_dir() and d.name.startswith(_PREFIX)]:
            if keep and app_dir.name.startswith(keep):
                continue
            for f in [f for f in app_dir.iterdir() if f.is_file() and not f.name.startswith(".")]:
                rel = f"{app_dir.name}/{f.name}"
                if rel not in want:
                    f.unlink(missing_ok=True)
                    self.seen.pop(rel, None)
                    result.removed += 1
            if not any(rel.startswith(f"{app_dir.name}/") for rel in want):
                shutil.rmtree(app_dir, ignore_errors=True)
