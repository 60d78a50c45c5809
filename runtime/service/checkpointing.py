"""The two phases of one checkpoint, as the coordinator calls them (docs/design.md §4 and §6).

sync:  freeze the hot dir (hard links) and note which staged output the checkpoint covers.
async: hash + upload (CheckpointWriter) and upload the sink's locally staged output, manifest, then
       publish the sink's commit entry, and for a savepoint copy the checkpoint into a self-contained
       savepoint. A failure here (a store outage) fails only this checkpoint: the coordinator retries
       with backoff and the next one covers everything since the last published entry.
"""

from __future__ import annotations

import logging
import os
import shutil
import threading
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from sparkpoint.runtime.checkpoint import CheckpointWriter, FencedError, create_savepoint
from sparkpoint.runtime.checkpoint.coordinator import CheckpointRequest, NothingToCheckpoint
from sparkpoint.runtime.checkpoint.freeze import FreezeResult, freeze, latest_committed_batch
from sparkpoint.runtime.store import JobRef, ObjectStore

from . import faults
from .metrics import RuntimeMetrics

log = logging.getLogger("sparkpoint.checkpoint")


@dataclass
class Frozen:
    dir: Path
    result: FreezeResult
    extra: dict[str, Any]
    ticket: int  # fixes this checkpoint's place in the id order (batch order), see tickets.py


NICE_ENV = "SPARKPOINT_CHECKPOINT_NICE"


def checkpoint_nice() -> int:
    """The async phase's nice value: 0 by default, 0-19 by the env. Not 10 any more: in the peer
    benchmark's alternating rounds nice 10 made batches slower than nice 0 in every round
    (docs/benchmarks.md). The likely cause (not profiled): a niced upload thread that holds the GIL
    when the kernel preempts it keeps the batch's Python (the sink's foreachBatch) waiting."""
    try:
        return min(19, max(0, int(os.environ.get(NICE_ENV, "0"))))
    except ValueError:
        return 0


def _lower_thread_priority() -> None:
    """With SPARKPOINT_CHECKPOINT_NICE > 0, hashing and upload yield the CPU to Spark's batch threads
    (Linux nice is per thread, and the writer's hash/upload pools inherit it from this thread). The
    default is 0: see checkpoint_nice."""
    nice = checkpoint_nice()
    try:
        tid = threading.get_native_id()
        if os.getpriority(os.PRIO_PROCESS, tid) < nice:
            os.setpriority(os.PRIO_PROCESS, tid, nice)
    except (AttributeError, OSError):  # not Linux, or not permitted: run at normal priority
        pass


class CheckpointPipeline:
    def __init__(self, *, store: ObjectStore, job: JobRef, writer: CheckpointWriter, sink: Any,
                 hot_dir: Path, freeze_root: Path, metrics: RuntimeMetrics, lineage: dict[str, Any],
                 spark_version: str, state_provider: str, last_batch: int | None):
        self.store, self.job, self.writer, self.sink = store, job, writer, sink
        self.hot_dir, self.freeze_root, self.metrics = hot_dir, freeze_root, metrics
        self.lineage, self.spark_version, self.state_provider = lineage, spark_version, state_provider
        self.last_checkpointed_batch = last_batch  # batch of the newest completed checkpoint
        self.latest: dict[str, Any] | None = None  # facts about the newest completed checkpoint
        self._maintenance: threading.Thread | None = None  # the sink's compaction, one at a time
        shutil.rmtree(freeze_root, ignore_errors=True)  # leftovers of a killed attempt
        freeze_root.mkdir(parents=True, exist_ok=True)

    # --- sync phase: must stay fast and never wait for Spark ------------------------------------
    def sync(self, req: CheckpointRequest) -> Frozen:
        batch = latest_committed_batch(self.hot_dir)
        if batch is None:
            raise NothingToCheckpoint("no batch committed yet")
        if req.kind == "checkpoint" and req.trigger != "api" and batch == self.last_checkpointed_batch:
            raise NothingToCheckpoint(f"batch {batch} is already checkpointed")
        faults.point("freeze")
        target = self.freeze_root / req.request_id
        result = freeze(self.hot_dir, target)
        req.batch_id = result.batch_id
        extra = {**self.sink.manifest_extra(result.batch_id), **self.lineage}
        self.metrics.checkpoint_duration.labels("sync").observe(result.seconds)
        req.details["freezeFiles"] = len(result.files)
        req.details["freezeSeconds"] = round(result.seconds, 4)
        # Last, and in memory only: the store is not asked here (an outage must not block the freeze).
        return Frozen(dir=target, result=result, extra=extra, ticket=self.writer.tickets.take())

    # --- async phase ----------------------------------------------------------------------------
    def run_async(self, req: CheckpointRequest, frozen: Frozen) -> None:
        _lower_thread_priority()
        t0 = time.perf_counter()
        try:
            # Ids are claimed in ticket order; a timed-out request stops between files and uploads.
            op = self.writer.begin(frozen.dir, batch_id=frozen.result.batch_id,
                                   spark_version=self.spark_version, state_provider=self.state_provider,
                                   extra=frozen.extra, ticket=frozen.ticket,
                                   stop_check=req.check_not_abandoned)
            req.checkpoint_id = op.id
            try:
                if faults.armed_for("upload"):  # killed halfway through the uploads
                    todo = op.plan()
                    for sha in todo[: len(todo) // 2]:
                        op.upload_one(sha)
                    if len(todo) > 1:
                        faults.point("upload")
                op.upload_all()  # plans unless planned: uploads start while the listing is read
                self.sink.upload_staged(frozen.extra)  # staged output of batches (P, C], before the manifest
                req.check_not_abandoned()
                faults.point("manifest")
                result = op.commit()
            except FencedError:
                op.abort(keep=False)  # a fenced writer takes no further checkpoint to reuse it
                raise
            except BaseException:
                op.abort()
                raise
            faults.point("publish")
            if self.sink.publish(result.id, result.manifest.extra):
                self.metrics.output_published.inc()
            if req.kind == "savepoint":
                name = req.savepoint_name or f"sp-{result.id}"
                create_savepoint(self.store, self.job, name, result.id)
                req.savepoint_name = name
        except FencedError:
            self.metrics.checkpoint_failures.labels("fenced").inc()
            raise
        except Exception:
            self.metrics.checkpoint_failures.labels("upload").inc()
            raise
        finally:
            self.writer.tickets.release(frozen.ticket)  # idempotent: begin released it unless it never ran
            shutil.rmtree(frozen.dir, ignore_errors=True)
            if (release := getattr(self.sink, "release_checkpoint", None)) is not None:
                release(frozen.extra)  # a delta sink's compaction may go past its batches now
        seconds = time.perf_counter() - t0
        m = self.metrics
        m.checkpoint_duration.labels("async").observe(seconds)
        m.checkpoints_completed.labels(req.kind).inc()
        m.uploaded_bytes.inc(result.new_bytes)
        m.reused_bytes.inc(result.reused_bytes)
        m.checkpoint_bytes.set(result.bytes)
        m.checkpoint_last_completed.set(time.time())
        self.last_checkpointed_batch = max(self.last_checkpointed_batch or -1, frozen.result.batch_id)
        req.details.update({"files": result.files, "bytes": result.bytes, "newBytes": result.new_bytes,
                            "reusedBytes": result.reused_bytes, "uploadedObjects": result.uploaded_objects,
                            "hashSeconds": result.hash_seconds, "uploadSeconds": result.upload_seconds})
        self.latest = {"id": result.id, "batchId": frozen.result.batch_id,
                       "completed": result.manifest.completion_time.isoformat(), "bytes": result.bytes,
                       "newBytes": result.new_bytes}
        self._maintain_sink()

    def _maintain_sink(self) -> None:
        """A delta sink's compaction or an upsert sink's snapshot, when due, on a thread of its own after the checkpoint completed,
        so it never delays or fails one (a failure is logged and counted; the next interval tries
        again). One at a time; the process may die in one: its records make that safe."""
        maintain = getattr(self.sink, "maintain", None)
        if maintain is None or (self._maintenance is not None and self._maintenance.is_alive()):
            return
        self._maintenance = threading.Thread(target=self._run_maintenance, args=(maintain,),
                                             name="sink-maintenance", daemon=True)
        self._maintenance.start()

    def _run_maintenance(self, maintain: Any) -> None:
        t0 = time.perf_counter()
        try:
            done = maintain()
        except FencedError:
            return  # a newer attempt runs: it compacts
        except Exception:
            self.metrics.compaction_failures.inc()
            log.exception("sink compaction failed")
            return
        if done:
            self.metrics.compactions.inc()
            self.metrics.compacted_files.inc(done["files"])
            self.metrics.compaction_duration.observe(time.perf_counter() - t0)

    def on_finished(self, req: CheckpointRequest) -> None:
        if req.status == "timed_out":
            self.metrics.checkpoint_failures.labels("timeout").inc()
        elif req.status == "failed" and req.error and req.error.startswith("freeze"):
            self.metrics.checkpoint_failures.labels("freeze").inc()
        log.info("checkpoint request finished", extra={"request": req.to_json()})
