"""The GC sidecar: run passes on an interval and export `sparkpoint_gc_*` metrics (docs/design.md 10)."""

from __future__ import annotations

import json
import logging
import threading
import time
from collections.abc import Callable, Iterable
from typing import Protocol

from prometheus_client import Counter, Gauge

from sparkpoint.runtime.store import JobRef, ObjectStore, StoreError

from .gc import GcResult, gc_pass

log = logging.getLogger("sparkpoint.gc")
_LABELS = ("namespace", "job")

DELETED_OBJECTS = Counter("sparkpoint_gc_deleted_objects", "Objects deleted by GC", _LABELS)
DELETED_BYTES = Counter("sparkpoint_gc_deleted_bytes", "Bytes of objects deleted by GC", _LABELS)
DELETED_MANIFESTS = Counter("sparkpoint_gc_deleted_manifests", "Checkpoint manifests deleted by GC", _LABELS)
LIVE_BYTES = Gauge("sparkpoint_gc_live_bytes", "Bytes of objects referenced by kept checkpoints", _LABELS)
ORPHAN_BYTES = Gauge("sparkpoint_gc_orphan_bytes", "Bytes of unreferenced objects inside the grace period",
                     _LABELS)
LAST_RUN = Gauge("sparkpoint_gc_last_run_timestamp_seconds", "End time of the last successful GC pass",
                 _LABELS)
PASS_SECONDS = Gauge("sparkpoint_gc_pass_duration_seconds", "Duration of the last GC pass", _LABELS)
ERRORS = Counter("sparkpoint_gc_errors", "GC passes that failed", (*_LABELS, "reason"))
# The sinks' output (sink/output_gc.py), after each pass. state: committed (what readers, a kept
# checkpoint or a delta table need) or staged (needed by nothing yet: uploads ahead of their publish,
# garbage inside the grace).
OUTPUT_BYTES = Gauge("sparkpoint_gc_output_bytes", "Bytes under the job's outputs/ after the last pass",
                     (*_LABELS, "state"))
OUTPUT_OBJECTS = Gauge("sparkpoint_gc_output_objects", "Objects under the job's outputs/ after the last pass",
                       (*_LABELS, "state"))
OUTPUT_DELETED_OBJECTS = Counter("sparkpoint_gc_output_deleted_objects", "Output objects deleted by GC", _LABELS)
OUTPUT_DELETED_BYTES = Counter("sparkpoint_gc_output_deleted_bytes", "Bytes of output objects deleted by GC",
                               _LABELS)


class OutputCounts(Protocol):
    """What the output pass reports (sink/output_gc.py's OutputGcResult)."""

    dry_run: bool
    counted: bool
    committed_objects: int
    committed_bytes: int
    staged_objects: int
    staged_bytes: int
    deleted_files: int
    deleted_bytes: int
    deleted_entries: list[str]
    deleted_entry_bytes: int


def record(job: JobRef, result: GcResult) -> None:
    labels = {"namespace": job.namespace, "job": job.name}
    if not result.dry_run:
        DELETED_OBJECTS.labels(**labels).inc(result.deleted_objects)
        DELETED_BYTES.labels(**labels).inc(result.deleted_bytes)
        DELETED_MANIFESTS.labels(**labels).inc(len(result.deleted_manifests))
    LIVE_BYTES.labels(**labels).set(result.live_bytes)
    ORPHAN_BYTES.labels(**labels).set(result.orphan_bytes)
    PASS_SECONDS.labels(**labels).set(result.seconds)
    LAST_RUN.labels(**labels).set(time.time())


def record_output(job: JobRef, result: OutputCounts) -> None:
    labels = {"namespace": job.namespace, "job": job.name}
    if not result.dry_run:
        OUTPUT_DELETED_OBJECTS.labels(**labels).inc(result.deleted_files + len(result.deleted_entries))
        OUTPUT_DELETED_BYTES.labels(**labels).inc(result.deleted_bytes + result.deleted_entry_bytes)
    if result.counted:
        for state, objects, size in (("committed", result.committed_objects, result.committed_bytes),
                                     ("staged", result.staged_objects, result.staged_bytes)):
            OUTPUT_OBJECTS.labels(**labels, state=state).set(objects)
            OUTPUT_BYTES.labels(**labels, state=state).set(size)


class PinsFile:
    """Checkpoint ids a file names (a JSON list; the operator keeps it in the job's ConfigMap, so it
    changes under a running sidecar), read at every pass. An unreadable or invalid file keeps the
    last good list: losing a pin could delete the checkpoint an attempt is about to restore."""

    def __init__(self, path: str | None):
        self.path, self.last = path, ()

    def __call__(self) -> tuple[str, ...]:
        if not self.path:
            return ()
        try:
            with open(self.path) as f:
                ids = json.load(f)
            if not isinstance(ids, list) or not all(isinstance(i, str) for i in ids):
                raise ValueError("not a list of checkpoint ids")
            self.last = tuple(ids)
        except FileNotFoundError:
            self.last = ()  # no pins asked for (an older operator's ConfigMap)
        except (OSError, ValueError) as exc:
            log.warning("gc pins file unreadable; keeping the last pins", extra={"path": self.path, "error": str(exc)})
        return self.last


def run_loop(
    store: ObjectStore,
    job: JobRef,
    *,
    interval_seconds: float,
    stop: threading.Event,
    on_result: Callable[[GcResult], None] | None = None,
    pins: Callable[[], Iterable[str]] = lambda: (),
    **pass_options,
) -> None:
    """Run passes until `stop` is set; a failed pass is logged and counted, never fatal."""
    while not stop.is_set():
        try:
            result = gc_pass(store, job, pins=tuple(pins()), **pass_options)
            record(job, result)
            if on_result:
                on_result(result)
        except StoreError as exc:
            ERRORS.labels(namespace=job.namespace, job=job.name, reason=type(exc).__name__).inc()
            log.error("gc pass failed", extra={"job": str(job), "error": str(exc)})
        stop.wait(interval_seconds)
