"""A standby attempt (issue 43; docs/design.md §8 "Standby"): a second runtime of the job whose JVM and
SparkSession are up and whose disk holds the newest checkpoint's objects, ready to be promoted.

Until promoted it claims no attempt and writes nothing to the store: it lists the completed
checkpoints every `interval` seconds (one LIST), and when a newer one completed reads its manifest
(one GET) and downloads only the objects it does not hold yet, each checked for size and digest
like a restore's (fetch_verified) into a `.part` file renamed once complete, so no half-downloaded
file ever carries an object's name. Objects are kept by content (standby-objects/<sha256>), which is
what a checkpoint's files are in the store; those the newest checkpoint no longer references go.

`POST /promote` ends the following; the runner then goes on exactly as a new pod's start: the fence,
the restore's plan (restore_on_start: lineage, restoreFrom, fallbacks), the sink, the query. The only
difference is where the chosen point's bytes come from: `ObjectCache.place` puts a held object into
the restore's staging tree (a hard link) after checking its size and digests again; one that does
not match is deleted and downloaded like any other. A work dir whose hot dir has an owner record was
promoted already (a container restart after the promotion): that start is a normal one.
"""

from __future__ import annotations

import json
import logging
import os
import shutil
import threading
import time
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import Any

from sparkpoint.runtime.checkpoint.catalog import list_checkpoint_ids, load_manifest
from sparkpoint.runtime.checkpoint.fence import read_fence
from sparkpoint.runtime.checkpoint.restore import fetch_verified, local_copy_matches
from sparkpoint.runtime.store import FileEntry, JobRef, ObjectStore, StoreError
from sparkpoint.runtime.store.layout import checkpoint_number, object_key

from . import hotdir
from .names import launch

log = logging.getLogger("sparkpoint.standby")

DEFAULT_INTERVAL = 2.0  # seconds between two looks at the store (STANDBY_INTERVAL_ENV)
OBJECTS_DIR = "standby-objects"
ENDPOINT_FILE = "standby.json"  # where the standby's API listens (api.json is written after a restore)


# --- pure: what to fetch and what to drop ----------------------------------------------------------
def plan_fetch(files: Iterable[FileEntry], have: set[str]) -> list[FileEntry]:
    """The objects of a checkpoint's files not held yet: one per digest, inline files need none;
    largest first (the long downloads start while the rest still queue)."""
    todo: dict[str, FileEntry] = {}
    for f in files:
        if not f.inline and f.sha256 not in have:
            todo.setdefault(f.sha256, f)
    return sorted(todo.values(), key=lambda f: (-f.size, f.sha256))


def plan_prune(files: Iterable[FileEntry], have: set[str]) -> set[str]:
    """Held objects that the checkpoint now held no longer references."""
    return have - {f.sha256 for f in files}


def checkpoints_behind(ids: list[str], held: str | None) -> int:
    """Completed checkpoints newer than the one held (all of them when none is held)."""
    if held is None:
        return len(ids)
    return sum(1 for i in ids if checkpoint_number(i) > checkpoint_number(held))


# --- the objects held on disk ------------------------------------------------------------------------
class ObjectCache:
    def __init__(self, root: Path):
        self.root = root
        root.mkdir(parents=True, exist_ok=True)
        for part in root.glob("*.part"):  # an interrupted download is never trusted
            part.unlink(missing_ok=True)
        self.placed = self.rejected = 0
        self._lock = threading.Lock()

    def shas(self) -> set[str]:
        return {p.name for p in self.root.iterdir() if not p.name.endswith(".part")}

    def fetch(self, store: ObjectStore, key: str, entry: FileEntry) -> None:
        part = self.root / f"{entry.sha256}.part"
        try:
            fetch_verified(store, key, entry, part)
            os.replace(part, self.root / entry.sha256)
        finally:
            part.unlink(missing_ok=True)

    def prune(self, shas: set[str]) -> None:
        for sha in shas:
            (self.root / sha).unlink(missing_ok=True)

    def usage(self) -> tuple[int, int]:
        files = [p for p in self.root.iterdir() if not p.name.endswith(".part")]
        return len(files), sum(p.stat().st_size for p in files)

    def place(self, entry: FileEntry, dest: Path) -> bool:
        """A held object checked again (size and the restore's digests) and linked to `dest`; False
        when not held or when it does not match (then deleted: the restore downloads it)."""
        src = self.root / entry.sha256
        try:
            ok = local_copy_matches(src, entry)
        except FileNotFoundError:
            return False
        if not ok:
            log.warning("held object does not match its checkpoint; downloading it again",
                        extra={"path": entry.path, "sha256": entry.sha256})
            src.unlink(missing_ok=True)
            with self._lock:
                self.rejected += 1
            return False
        try:
            os.link(src, dest)
        except OSError:  # another filesystem: a copy
            shutil.copyfile(src, dest)
        with self._lock:
            self.placed += 1
        return True

    def remove(self) -> None:
        shutil.rmtree(self.root, ignore_errors=True)


# --- the standby -------------------------------------------------------------------------------------
class Standby:
    def __init__(self, job: JobRef, work_dir: Path, interval: float, stop: threading.Event,
                 clock: Any = time.monotonic):
        self.job, self.work_dir, self.interval, self.stop, self.clock = job, work_dir, interval, stop, clock
        self.cache = ObjectCache(work_dir / OBJECTS_DIR)
        self.store: ObjectStore | None = None
        self.promote = threading.Event()
        self.promoted = False
        self.held: str | None = None  # the checkpoint whose objects are all held
        self.held_batch: int | None = None
        self.newest: str | None = None
        self.behind = 0
        self.fetched_objects = self.fetched_bytes = 0
        self.requests = {"list": 0, "get": 0}
        self.rounds = 0
        self.last_error: str | None = None
        self.last_round: float | None = None
        self.promotion: dict[str, Any] = {}
        self.warmup: dict[str, Any] | None = None  # how its warm-up ended (warmup.py), once it has

    @staticmethod
    def already_promoted(work_dir: Path) -> bool:
        """The hot dir was claimed by an attempt: this work dir's standby was promoted before."""
        return hotdir.owner_of(work_dir) is not None

    # --- following (the main thread, until promoted or stopped) ---------------------------------
    def wait_for_promotion(self, runtime: Any, server: Any, warm_up: Callable[[], Any] | None = None) -> bool:
        """Start the session (and its warm-up, warmup.py), follow the checkpoints; True once promoted,
        False when stopped. The warm-up ends before either: its query never runs beside the job's."""
        self.store = store = runtime.store
        runtime.phase = "standby"
        (self.work_dir / ENDPOINT_FILE).write_text(json.dumps({"host": server.host, "port": server.port,
                                                               "metricsPort": server.metrics_port,
                                                               "pid": os.getpid()}))
        # The session's name and event log carry the attempt it will most likely claim (the operator's
        # attempt of the pod when it sets one); claimed() corrects the event log's start number.
        runtime.launch, runtime.attempt = launch(), read_fence(store, self.job) + 1
        shutil.rmtree(self.work_dir / "event-log", ignore_errors=True)  # an earlier standby's: no query ran
        if not self.stop.is_set():
            runtime.early.start_session(runtime._build_session)
        warm = warm_up() if warm_up is not None and not self.stop.is_set() else None
        log.info("standby: following the checkpoints", extra={"job": str(self.job), "interval": self.interval})
        while not self.stop.is_set():
            if warm is not None and (self.promote.is_set() or warm.outcome.get("state") != "pending"):
                self.warmup, warm = warm.end(), None
            if self.promote.is_set():
                self.promoted = True
                runtime.start_phases.mark("promoted")
                log.info("standby promoted", extra={"job": str(self.job), "held": self.held,
                                                     "behind": self.behind})
                return True
            self.follow_once()
            deadline = self.clock() + self.interval
            while self.clock() < deadline and not self.stop.is_set() and not self.promote.is_set():
                self.promote.wait(0.1)
        # Stopped unpromoted: its session's event log stays on local disk (the runner would upload it).
        if warm is not None:
            self.warmup = warm.end()
        runtime.early.join()
        if runtime.spark is not None:
            runtime.spark.stop()
        runtime.event_log = None
        log.info("standby stopped before a promotion", extra={"job": str(self.job), "held": self.held})
        return False

    def follow_once(self) -> None:
        """One look at the store: the newest completed checkpoint's missing objects, if it is new."""
        assert self.store is not None
        self.rounds += 1
        try:
            ids = list_checkpoint_ids(self.store, self.job)
            self.requests["list"] += 1
            self.newest = ids[-1] if ids else None
            self.behind = checkpoints_behind(ids, self.held)
            if self.newest is None or self.newest == self.held:
                self.last_error = None
                return
            manifest = load_manifest(self.store, self.job, self.newest)
            self.requests["get"] += 1
            objects = size = 0
            for entry in plan_fetch(manifest.files, self.cache.shas()):
                if self.promote.is_set() or self.stop.is_set():
                    return  # the promotion's restore fetches the rest
                self.cache.fetch(self.store, object_key(self.job, entry.sha256), entry)
                self.requests["get"] += 1
                objects, size = objects + 1, size + entry.size
                self.fetched_objects, self.fetched_bytes = self.fetched_objects + 1, self.fetched_bytes + entry.size
            self.cache.prune(plan_prune(manifest.files, self.cache.shas()))
            self.held, self.held_batch = manifest.id, manifest.batch_id
            self.behind = checkpoints_behind(ids, self.held)
            self.last_error = None
            log.info("standby holds a checkpoint", extra={"checkpoint": manifest.id, "batch": manifest.batch_id,
                                                          "fetchedObjects": objects, "fetchedBytes": size})
        except StoreError as exc:  # e.g. an object GC removed with its checkpoint: the next round's newer one
            self.last_error = str(exc)[:500]
            log.warning("standby: following failed; retrying", extra={"error": self.last_error})
        finally:
            self.last_round = self.clock()

    # --- the control API's thread ------------------------------------------------------------------
    def request_promotion(self, attempt: int | None, launch: int | None, phase: str) -> tuple[int, dict[str, Any]]:
        """POST /promote: 202 promoting, 200 promoted already, 409 when it cannot be this pod's."""
        if attempt is not None and attempt != launch:
            return 409, {"error": f"this standby would start attempt {launch}, not {attempt}"}
        if self.promote.is_set():
            return (200 if self.promoted else 202), {"promoting": True, "phase": phase}
        if self.stop.is_set():
            return 409, {"error": f"the standby is stopping ({phase})"}
        self.promote.set()
        return 202, {"promoting": True, "phase": phase}

    # --- after the promotion (the runner's hooks) ------------------------------------------------
    def claimed(self, runtime: Any) -> None:
        """The fence is claimed: the event log uploads under the start number actually claimed."""
        if runtime.event_log is not None:
            runtime.event_log.start_number = runtime.attempt
        self.promotion["attempt"] = runtime.attempt

    def restored(self, outcome: Any) -> None:
        """What the top-up downloaded, then the held objects go (the hot dir's links keep theirs)."""
        manifest = outcome.manifest
        stored = sum(1 for f in manifest.files if not f.inline) if manifest is not None else 0
        self.promotion.update({"source": outcome.source, "checkpoint": manifest.id if manifest else None,
                               "reusedFiles": self.cache.placed, "rejectedFiles": self.cache.rejected,
                               "downloadedFiles": max(0, stored - self.cache.placed)})
        self.cache.remove()

    def to_json(self) -> dict[str, Any]:
        objects, size = self.cache.usage() if self.cache.root.is_dir() else (0, 0)
        return {"promoted": self.promoted, "checkpoint": self.held, "batchId": self.held_batch,
                "newestCheckpoint": self.newest, "behindCheckpoints": self.behind,
                "lastRoundSecondsAgo": None if self.last_round is None else round(self.clock() - self.last_round, 3),
                "heldObjects": objects, "heldBytes": size,
                "fetchedObjects": self.fetched_objects, "fetchedBytes": self.fetched_bytes,
                "storeRequests": dict(self.requests), "rounds": self.rounds, "lastError": self.last_error,
                "promotion": self.promotion or None, "warmup": self.warmup}
