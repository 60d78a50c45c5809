"""Spark's event logs of an attempt, uploaded to the job's store for the History Server
(docs/design.md §3 `history/`, §9 "Event logs"; issue 30).

Spark writes rolling, compressed event logs into `<work dir>/event-log/<attempt>.<start>/`
(`event_log_conf`): `attempt` is the operator's attempt of the pod (SPARKPOINT_ATTEMPT; a local run's
start number), `start` the number this start of the runtime claimed in the store (every start claims
one, a restart in the same pod too), so in-place restarts of one attempt stay apart. One
directory per SparkContext, `eventlog_v2_<app id>/`, holding `events_<index>_<app id>[.zstd]` files
and an empty `appstatus_<app id>[.inprogress]` marker. Spark appends only to the newest events file
and closes a file for good when it rolls to the next one (`spark.eventLog.rolling.maxFileSize`).

The uploader copies them to `history/<attempt>/<start>/<dir>/<file>` like checkpoint files: after every
completed checkpoint and at the end of the attempt, only files whose size or mtime changed since
their last upload. A closed events file is uploaded once and then removed from the local disk; the
open one (and the `.inprogress` marker) is uploaded again when it changed, at most every
`SPARKPOINT_EVENT_LOG_UPLOAD_INTERVAL` seconds (default 60; every checkpoint at 0) and always at the
end, so a crashed attempt leaves its log up to its last upload; the next start in the same pod
(local recovery) uploads what the crashed one left in its folder (`upload_leftovers`) and removes the
folder, and the next attempt on a shared hot volume does the same with an older attempt's work dir
before it removes that dir (`save_leftovers`; a dir whose upload failed stays). The runtime never deletes from the
store: a completed attempt's stale `.inprogress` marker is removed by the GC sidecar
(checkpoint/history_gc.py). Upload failures are logged and retried at the next sync; they never fail
a checkpoint or the query.
"""

from __future__ import annotations

import logging
import os
import re
import shutil
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from sparkpoint.runtime.store import JobRef, ObjectStore, StoreError
from sparkpoint.runtime.store.layout import history_key

log = logging.getLogger("sparkpoint.eventlog")

UPLOAD_INTERVAL_ENV = "SPARKPOINT_EVENT_LOG_UPLOAD_INTERVAL"
_EVENTS = re.compile(r"^events_(\d+)_")
_RUN_DIR = re.compile(r"^(\d{1,9})(?:\.(\d{1,9}))?$")  # '<attempt>.<start>'; a legacy '<start>' alone


def run_dir_name(attempt: int, start: int) -> str:
    return f"{attempt:06d}.{start:06d}"


def run_of_dir(name: str) -> tuple[int, int] | None:
    """'000002.000007' -> (2, 7); a folder an older runtime named by its start alone, '000007' -> (7, 7)."""
    m = _RUN_DIR.match(name)
    if not m:
        return None
    start = int(m.group(2) or m.group(1))
    return int(m.group(1)), start


def event_log_conf(local_dir: Path) -> dict[str, str]:
    """Spark's own rolling, compressed event log into the work dir (a user's spark.conf may tune the
    rolling size or the codec; the switch and the directory are the runtime's)."""
    return {
        "spark.eventLog.enabled": "true",
        "spark.eventLog.dir": local_dir.absolute().as_uri(),
        "spark.eventLog.rolling.enabled": "true",
        "spark.eventLog.rolling.maxFileSize": "16m",  # Spark refuses less than 10m
        "spark.eventLog.compress": "true",  # zstd, Spark's default codec
    }


def upload_interval_seconds() -> float:
    try:
        return max(0.0, float(os.environ.get(UPLOAD_INTERVAL_ENV, "60")))
    except ValueError:
        return 60.0


@dataclass(frozen=True)
class LocalFile:
    relative: str  # '<eventlog_v2_app>/<file>'
    size: int
    mtime_ns: int
    closed: bool  # Spark will never write it again


def scan(local_dir: Path, live_app_dir: str | None) -> list[LocalFile]:
    """The event log files under local_dir; hidden files (Hadoop's .crc) are left out. A file is
    closed unless it is the newest events file or the `.inprogress` marker of the live app's dir."""
    found: list[LocalFile] = []
    if not local_dir.is_dir():
        return found
    for app_dir in sorted(p for p in local_dir.iterdir() if p.is_dir() and p.name.startswith("eventlog_v2_")):
        entries = [(p, p.stat()) for p in app_dir.iterdir() if p.is_file() and not p.name.startswith(".")]
        indexes = [int(m.group(1)) for p, _ in entries if (m := _EVENTS.match(p.name))]
        newest = max(indexes, default=None)
        live = app_dir.name == live_app_dir
        for path, st in sorted(entries, key=lambda e: _upload_order(e[0].name)):
            m = _EVENTS.match(path.name)
            open_now = live and ((m is not None and int(m.group(1)) == newest) or path.name.endswith(".inprogress"))
            found.append(LocalFile(f"{app_dir.name}/{path.name}", st.st_size, st.st_mtime_ns, not open_now))
    return found


def _upload_order(name: str) -> tuple[int, int]:
    """Events files by index, the appstatus marker last (a reader finds the events it announces)."""
    m = _EVENTS.match(name)
    return (0, int(m.group(1))) if m else (1, 0)


def plan(files: list[LocalFile], uploaded: dict[str, tuple[int, int]], *, open_due: bool) -> list[LocalFile]:
    """What to upload now: every changed closed file, and the changed open ones when they are due."""
    return [f for f in files if uploaded.get(f.relative) != (f.size, f.mtime_ns) and (f.closed or open_due)]


def removable(f: LocalFile) -> bool:
    """A closed events file is not needed locally once uploaded (the markers and the open file stay)."""
    return f.closed and _EVENTS.match(f.relative.split("/", 1)[1]) is not None


class EventLogUploader:
    """Copies the work dir's event logs to history/<attempt>/<start>/ (sync() is thread-safe; start()
    runs a thread that syncs whenever request() is called, so no checkpoint waits for it)."""

    def __init__(self, store: ObjectStore, job: JobRef, attempt: int, start: int, local_dir: Path, *,
                 interval_seconds: float | None = None, clock: Callable[[], float] = time.monotonic):
        self.store, self.job, self.attempt, self.start_number, self.local_dir = store, job, attempt, start, local_dir
        self.interval = upload_interval_seconds() if interval_seconds is None else interval_seconds
        self.clock = clock
        self.live_app_dir: str | None = None  # 'eventlog_v2_<app id>' of this process's SparkContext
        self.uploaded: dict[str, tuple[int, int]] = {}
        self.uploaded_bytes = 0
        self.failed = False  # the last sync stopped at an error
        self._last_open_upload: float | None = None
        self._lock = threading.Lock()
        self._wake = threading.Event()
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        local_dir.mkdir(parents=True, exist_ok=True)

    def set_app(self, app_id: str) -> None:
        self.live_app_dir = f"eventlog_v2_{app_id}"

    def sync(self, *, final: bool = False) -> int:
        """Upload what changed; returns the files uploaded. `final`: the SparkContext has stopped,
        every file is closed."""
        with self._lock:
            now = self.clock()
            open_due = final or self._last_open_upload is None or now - self._last_open_upload >= self.interval
            files = scan(self.local_dir, None if final else self.live_app_dir)
            todo = plan(files, self.uploaded, open_due=open_due)
            done, self.failed = 0, False
            try:
                for f in todo:
                    self.store.put_file(history_key(self.job, self.attempt, self.start_number, f.relative),
                                        str(self.local_dir / f.relative))
                    self.uploaded[f.relative] = (f.size, f.mtime_ns)
                    self.uploaded_bytes += f.size
                    done += 1
                    if removable(f) and not final:
                        (self.local_dir / f.relative).unlink(missing_ok=True)
            except (StoreError, OSError) as exc:
                self.failed = True
                log.warning("event log upload failed; retried at the next checkpoint",
                            extra={"attempt": self.attempt, "start": self.start_number, "error": str(exc)})
                return done
            if open_due and any(not f.closed for f in files):
                self._last_open_upload = now
            return done

    @classmethod
    def upload_leftovers(cls, store: ObjectStore, job: JobRef, root: Path, current: str) -> list[tuple[int, int]]:
        """Earlier starts' folders under root (runtime starts before this one in the same work dir):
        upload what changed as closed files, then remove the folder. Returns their (attempt, start)."""
        done = []
        for sub in sorted(root.iterdir()) if root.is_dir() else []:
            run = run_of_dir(sub.name)
            if not sub.is_dir() or run is None or sub.name == current:
                continue
            leftover = cls(store, job, run[0], run[1], sub, interval_seconds=0)
            leftover.sync(final=True)
            if not leftover.failed:
                shutil.rmtree(sub, ignore_errors=True)
                done.append(run)
        return done

    @classmethod
    def save_leftovers(cls, store: ObjectStore, job: JobRef, root: Path) -> bool:
        """An older attempt's `event-log/` folder on a shared hot volume (attempt_dirs.py): upload
        every run folder in it as closed files; True once none is left (the dir may then go)."""
        cls.upload_leftovers(store, job, root, "")
        return not root.is_dir() or not any(run_of_dir(p.name) for p in root.iterdir() if p.is_dir())

    @classmethod
    def for_attempt(cls, store: ObjectStore, job: JobRef, attempt: int, start: int,
                    work_dir: Path) -> EventLogUploader:
        """The uploader of `<work dir>/event-log/<attempt>.<start>/`, after the leftovers of earlier starts."""
        root = work_dir / "event-log"
        name = run_dir_name(attempt, start)
        uploaded = cls.upload_leftovers(store, job, root, name)
        if uploaded:
            log.info("uploaded the event logs earlier starts left", extra={"runs": uploaded})
        return cls(store, job, attempt, start, root / name)

    def finish(self, spark: object | None) -> None:
        """The attempt ends: stop the SparkContext (Spark closes the log and marks it completed),
        then upload everything that changed."""
        self.close()
        if spark is not None:
            try:
                spark.stop()  # type: ignore[attr-defined]
            except Exception as exc:  # noqa: BLE001 - a JVM already gone: upload what it left
                log.warning("spark stop failed before the last event log upload", extra={"error": str(exc)})
        self.sync(final=True)
        log.info("event log uploaded", extra={"attempt": self.attempt, "start": self.start_number,
                                              "files": len(self.uploaded),
                                              "bytes": self.uploaded_bytes, "failed": self.failed})

    # --- background thread -------------------------------------------------------------------
    def start(self) -> None:
        self._thread = threading.Thread(target=self._loop, name="event-log-upload", daemon=True)
        self._thread.start()

    def request(self) -> None:
        self._wake.set()

    def _loop(self) -> None:
        while not self._stop.is_set():
            self._wake.wait()
            self._wake.clear()
            if not self._stop.is_set():
                self.sync()

    def close(self) -> None:
        """Stop the thread (the caller then runs the final sync itself)."""
        self._stop.set()
        self._wake.set()
        if self._thread is not None:
            self._thread.join(timeout=30)
