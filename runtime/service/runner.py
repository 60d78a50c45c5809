"""One attempt of a job: fence, restore, Spark query, checkpoints, control API, drain.

Work dir layout (local disk, an emptyDir in a pod):
  hot/            Spark's checkpointLocation (the hot checkpoint dir)
  sink-journal/   sink output staged per batch until a checkpoint uploads and publishes it
                  (sink/journal.py; budget: $SPARKPOINT_SINK_STAGED_BUDGET, default 1Gi)
  freeze/<req>/   hard-linked checkpoint sets while they upload
  hash-cache.json file hashes by inode/size/mtime
  owner.json      which job, store, attempt and checkpoint the hot dir belongs to (hotdir.py)
  event-log/<a>.<s>/  Spark's event logs of attempt a's runtime start s until uploaded to history/
                  (event_log.py)
"""

from __future__ import annotations

import json
import logging
import os
import signal
import threading
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from sparkpoint.runtime.checkpoint import CheckpointWriter, FencedError, HashCache, write_fence
from sparkpoint.runtime.checkpoint.coordinator import CheckpointCoordinator
from sparkpoint.runtime.checkpoint.fence import restarts_before
from sparkpoint.runtime.checkpoint.freeze import latest_committed_batch
from sparkpoint.runtime.spec import JobIdentity, JobSpec, parse_duration
from sparkpoint.runtime.store import STS_DURATION_ENV, JobRef, ObjectStore, StoreError, open_store

from . import attempt_dirs, faults, hotdir, job_dirs, ui_front, warmup
from .checkpointing import CheckpointPipeline
from .drain import drain
from .early_start import EarlyStart
from .event_log import EventLogUploader, event_log_conf
from .metrics import RuntimeMetrics
from .names import app_name, history_attempt, job_uid, latest_planned_batch, launch
from .recovery import RestoreOutcome, restore_on_start
from .sink_setup import make_sink
from .standby import Standby
from .start_phases import StartPhases
from .status import status_of
from .store_wait import wait_for_store

log = logging.getLogger("sparkpoint.runtime")

EXIT_OK, EXIT_FAILED, EXIT_BAD_INPUT, EXIT_RESTORE, EXIT_RESCALE = 0, 1, 2, 3, 4


@dataclass
class RunOptions:
    work_dir: Path
    host: str = "127.0.0.1"
    port: int = 8080
    token: str | None = None  # the control API's bearer token; None: no authentication (loopback)
    metrics_port: int | None = None  # a separate /metrics-only port (9091 in a pod)
    until_batch: int | None = None  # drain once this batch has committed (demo, tests, bench)
    grace_seconds: float = 25.0
    job_uid: str | None = None
    handle_signals: bool = True
    external_triggers: bool = False  # an operator triggers checkpoints; the own timer is a fallback
    full_upload: bool = False  # benchmarks' baseline: every checkpoint uploads every file (CheckpointWriter)
    serial_start: bool = False  # benchmarks' baseline: the JVM starts after the restore, not beside it
    standby: bool = False  # follow the checkpoints without an attempt until POST /promote (standby.py)
    standby_interval: float = 2.0
    standby_warmup: bool = False  # a standby runs the query once before its promotion (warmup.py)


def default_store_url(work_dir: Path) -> str:
    return f"file://{(work_dir / 'store').absolute()}"


class JobRuntime:
    def __init__(self, ident: JobIdentity, spec: JobSpec, options: RunOptions):
        self.ident, self.spec, self.opts = ident, spec, options
        self.job = JobRef(ident.namespace, ident.name)
        self.work_dir = options.work_dir.absolute()
        self.hot_dir = self.work_dir / "hot"
        storage = spec.checkpoint.storage
        self.store_url = storage.url if storage else default_store_url(self.work_dir)
        self.metrics = RuntimeMetrics()
        self.phase = "starting"
        self.attempt = 0  # the number this start claimed in the store (the fence, §5)
        self.launch: int | None = None  # the operator's attempt of the pod (SPARKPOINT_ATTEMPT)
        self.restart = 0  # in-place restarts of the operator's attempt before this start
        self.restore: RestoreOutcome | None = None
        self.rescale: Any = None  # spark.rescale.Rescale once this attempt repartitioned its state
        self.last_progress: dict[str, Any] | None = None
        self.stop_event = threading.Event()
        self.stop_request: dict[str, Any] = {}
        self.query: Any = None
        self.spark: Any = None
        self.coordinator: CheckpointCoordinator | None = None
        self.pipeline: CheckpointPipeline | None = None
        self.store: ObjectStore | None = None
        self.sink: Any = None
        self.sink_failed = False
        self.event_log: EventLogUploader | None = None
        self.ui_front: ui_front.UiFront | None = None  # the UI under its Ingress path (ui_front.py)
        self.start_phases = StartPhases()  # where this start's seconds go (start_phases.py)
        # the JVM and the SparkSession started beside the fence and the restore (early_start.py)
        self.early = EarlyStart(spec.spark, spec.spark.master != "k8s" and not options.serial_start,
                                self.start_phases)
        self.standby = Standby(self.job, self.work_dir, options.standby_interval, self.stop_event) \
            if options.standby and not Standby.already_promoted(self.work_dir) else None

    # --- status (read by the control API from another thread) ----------------------------------
    def committed_batch(self) -> int | None:
        return latest_committed_batch(self.hot_dir)

    def ready(self) -> bool:
        return self.phase == "running" and self.query is not None and self.query.isActive

    def healthy(self) -> bool:
        return self.phase in ("waiting_for_store", "standby", "starting", "restoring", "rescaling", "running",
                              "draining")

    def status(self) -> dict[str, Any]:
        return status_of(self)

    def _staged_bytes(self) -> int:
        staged = getattr(self.sink, "staged_bytes", None)
        return staged() if staged else 0

    def request_stop(self, savepoint: str | bool | None = None, checkpoint: bool = True) -> None:
        if not self.stop_event.is_set():
            self.stop_request = {"savepoint": savepoint, "checkpoint": checkpoint}
            self.stop_event.set()

    # --- the attempt ------------------------------------------------------------------------------
    def run(self) -> int:
        from sparkpoint.runtime.spark.entrypoint import load_entrypoint

        spec = self.spec
        self.start_phases.mark("imports")
        if self.opts.handle_signals:
            install_signal_handlers(self)
        # Fail fast on a bad entrypoint before any state is touched or a JVM starts.
        func = load_entrypoint(spec.job.entrypoint, spec.job.python_path)
        self.start_phases.mark("entrypoint")
        if not self.stop_event.is_set():
            self.early.launch_jvm()
        storage = spec.checkpoint.storage
        env = dict(os.environ)
        if storage and storage.endpoint and not env.get("SPARKPOINT_S3_ENDPOINT"):
            env["SPARKPOINT_S3_ENDPOINT"] = storage.endpoint  # the environment wins over the spec
        if storage and storage.sts_duration and not env.get(STS_DURATION_ENV):
            env[STS_DURATION_ENV] = str(int(parse_duration(storage.sts_duration)))
        self.store = store = open_store(self.store_url, env=env)
        from .api import ControlServer

        # The control API answers from the start: /healthz while the store is waited for and the
        # state restored (a long remote restore must not fail the liveness probe), /readyz once
        # the query runs.
        server = ControlServer(self, self.opts.host, self.opts.port, self.opts.token, self.opts.metrics_port)
        server.start()
        self.start_phases.mark("api")
        try:
            self.phase = "waiting_for_store"
            if not wait_for_store(store, self.stop_event, writes=self.standby is None):
                log.info("stopped while waiting for the checkpoint store")
                return EXIT_OK
            if self.standby is not None and not self.standby.wait_for_promotion(self, server,
                                                                                 warmup.for_runtime(self, func)):
                return EXIT_OK  # stopped before a promotion: nothing claimed, nothing written
            self.phase = "starting"
            # fence first: older attempts can no longer commit (and an older pod does not start)
            incarnation, self.launch = self.opts.job_uid or job_uid(self.job), launch()
            try:
                self.attempt = write_fence(store, self.job, incarnation=incarnation, launch=self.launch)
            except FencedError as exc:  # exit 0: the kubelet does not restart it; the operator removes the pod
                log.warning("superseded by a newer attempt: not starting", extra={"job": str(self.job),
                                                                                  "reason": str(exc)})
                return EXIT_OK
            # a shared hot volume's old attempts (§9), their event logs' last minutes uploaded first
            attempt_dirs.remove_older_attempt_dirs(self.work_dir, save=lambda old: EventLogUploader.save_leftovers(
                store, self.job, old / "event-log"))
            job_dirs.remove_other_incarnations(self.work_dir)  # ...and deleted jobs of the same name
            self.restart = restarts_before(store, self.job, self.attempt, incarnation, self.launch)
            self.metrics.attempt.set(self.attempt)
            self.metrics.checkpoint_interval.set(parse_duration(spec.checkpoint.interval))
            log.info("attempt started", extra={"job": str(self.job), "attempt": self.attempt})
            self.start_phases.mark("fence")
            if self.standby is not None:
                self.standby.claimed(self)
            if not self.stop_event.is_set():
                self.early.start_session(self._build_session)
            self.phase = "restoring"
            self.restore = restore_on_start(
                store=store, job=self.job, store_url=self.store_url, work_dir=self.work_dir,
                hot_dir=self.hot_dir, restore_from=spec.restore_from,
                local_recovery=self._earlier_executors_gone() and spec.checkpoint.local_recovery,
                attempt=self.attempt, incarnation=self.opts.job_uid or job_uid(self.job),
                local_copy=self.standby.cache.place if self.standby else None)
            self.start_phases.mark("restored")
            if self.standby is not None:
                self.standby.restored(self.restore)
            self.metrics.restore_duration.labels(self.restore.source).set(self.restore.seconds)
            for fallback in self.restore.fallbacks:
                self.metrics.restore_fallbacks.labels(fallback.reason).inc()
            self.sink = make_sink(spec.job.sink, store, self.job, attempt=self.attempt,
                                  incarnation=self.opts.job_uid or job_uid(self.job), work_dir=self.work_dir,
                                  restore=self.restore)
            # Where the API listens (the port may have been picked by the OS with --port 0); written
            # once the state is restored, so a reader of this file finds a runtime past its restore.
            (self.work_dir / "api.json").write_text(json.dumps({"host": self.opts.host, "port": server.port,
                                                                "metricsPort": server.metrics_port,
                                                                "pid": os.getpid(), "attempt": self.attempt}))
            return self._run_query(func)
        finally:
            if self.pipeline is not None:  # however the run ends, nothing will reuse what failed checkpoints
                self.pipeline.writer.close()  # uploaded: drop their kept markers (in-flight ones stay)
            self.early.join()  # a session started beside a restore that failed: stopped below
            if self.event_log is not None:  # however the run ends, the History Server gets its log
                self.event_log.finish(self.spark)
            if self.ui_front is not None:
                self.ui_front.stop()
            server.stop()

    def _earlier_executors_gone(self) -> bool:
        """An in-place restart of a spark.master k8s driver: the crashed start's executors may still
        write into the hot dir. Wait them out; not known gone: no local recovery (docs/design.md §9)."""
        if self.spec.spark.master != "k8s" or not self.restart:
            return True
        from sparkpoint.runtime.spark.earlier_executors import earlier_executors_gone
        from sparkpoint.runtime.spark.executors import driver_from_env

        outcome = earlier_executors_gone(driver_from_env(os.environ, self.job.namespace, self.job.name,
                                                         self.attempt), self.attempt)
        if not outcome.gone:
            log.warning("executors of an earlier start may still run: local recovery skipped, restoring from "
                        "the store", extra={"left": outcome.left, "error": outcome.error})
        return outcome.gone

    def _on_progress(self, p: Any) -> None:
        m = self.metrics
        m.batch_duration.observe(p.duration_seconds)
        m.input_rows.inc(p.input_rows)
        m.state_rows.set(p.state_rows)
        m.last_committed_batch.set(p.batch_id)
        self.last_progress = {"batchId": p.batch_id, "durationSeconds": p.duration_seconds,
                              "inputRows": p.input_rows, "stateRows": p.state_rows}
        log.info("batch completed", extra={**self.last_progress, "phaseSeconds": p.phases})

    def _write_batch(self, df: Any, batch_id: int) -> None:
        try:
            self.sink.write_batch(df, batch_id)
        except (StoreError, OSError):
            # The output path failed (store or staging disk), not the restored state. Spark's own
            # errors (a state file that fails to load) also surface here, as Py4J errors.
            self.sink_failed = True
            raise
        faults.point("batch")

    def _build_session(self) -> Any:
        from sparkpoint.runtime.spark.session import build_session, wants_fast_restore

        spec = self.spec
        cluster_conf = None
        if spec.spark.master == "k8s":  # this pod is the driver of executor pods (docs/design.md §9)
            from sparkpoint.runtime.spark.executors import prepare_driver

            cluster_conf = prepare_driver(spec, self.job.namespace, self.job.name, self.work_dir, os.environ,
                                          self.attempt)
        event_log = None
        attempt = history_attempt(self.launch, self.attempt)
        if spec.spark.event_log.enabled:
            self.event_log = EventLogUploader.for_attempt(self.store, self.job, attempt, self.attempt, self.work_dir)
            event_log = event_log_conf(self.event_log.local_dir)
        # The UI and the History Server list applications by this name: job, attempt, restart (§9).
        self.spark = spark = build_session(spec.spark, app_name(self.job, attempt, self.restart), cluster_conf,
                                           event_log, wants_fast_restore(spec.standby))
        self.start_phases.mark("session")
        return spark

    def _run_query(self, func: Any) -> int:
        from sparkpoint.runtime.spark.entrypoint import build_stream
        from sparkpoint.runtime.spark.query import install_progress_listener, start_query

        spec = self.spec
        if self.stop_event.is_set():  # stopped while restoring: nothing ran, nothing to checkpoint
            self.phase = "stopped"
            return EXIT_OK
        spark = self.early.session(self._build_session)
        if self.event_log is not None:
            self.event_log.set_app(spark.sparkContext.applicationId)
            self.event_log.start()
        self.ui_front = ui_front.start_if_proxied(spark, spec.spark.ui.enabled, self.opts.host)
        if self.opts.handle_signals:
            install_signal_handlers(self)  # again: SparkContext replaces the SIGINT handler
        self._rescale_state(spark)
        df = build_stream(func, spark, spec.job.args, spec.job.entrypoint)
        self.start_phases.mark("built")
        self.listener = install_progress_listener(spark, self._on_progress)
        r = self.restore
        writer = CheckpointWriter(self.store, self.job, attempt=self.attempt,
                                  job_uid=self.opts.job_uid or job_uid(self.job),
                                  hash_cache=HashCache(self.work_dir / "hash-cache.json"),
                                  # No reuse by age: a checkpoint reuses only the base's objects and
                                  # those of this writer's kept markers, so GC may delete an orphan
                                  # as soon as nothing references it (its grace covers clock skew).
                                  reuse_window_seconds=0, carry_failed=True, full_upload=self.opts.full_upload,
                                  pending_timeout_seconds=parse_duration(spec.gc.pending_timeout))
        self.pipeline = pipeline = CheckpointPipeline(
            store=self.store, job=self.job, writer=writer, sink=self.sink, hot_dir=self.hot_dir,
            freeze_root=self.work_dir / "freeze", metrics=self.metrics, lineage=r.lineage,
            spark_version=spark.version, state_provider=spec.spark.state_store,
            last_batch=r.manifest.batch_id if r.manifest else None)
        ck = spec.checkpoint
        self.coordinator = coord = CheckpointCoordinator(
            sync_phase=pipeline.sync, async_phase=pipeline.run_async, on_finished=self._on_checkpoint_finished,
            interval=parse_duration(ck.interval), timeout=parse_duration(ck.timeout),
            min_pause=parse_duration(ck.min_pause), max_concurrent=ck.max_concurrent,
            external_triggers=self.opts.external_triggers)
        self.query = start_query(df, hot_dir=str(self.hot_dir), sink_kind=spec.job.sink.kind,
                                 write_batch=self._write_batch, trigger_interval=spec.job.trigger_interval,
                                 query_name=f"{self.job.namespace}_{self.job.name}".replace("-", "_"))
        if hasattr(self.sink, "on_over_budget"):  # staged output full: publish it now, not at the interval
            self.sink.on_over_budget = lambda: coord.request_unless_busy("sink-budget")
        self.start_phases.mark("query")
        self.metrics.checkpoint_consecutive_failures.set_function(coord.consecutive_failures)
        self.metrics.sink_staged_bytes.set_function(self._staged_bytes)
        self.metrics.sink_short_writes.set_function(lambda: getattr(self.sink, "short_writes", 0))
        coord.start()
        if self.rescale is not None:  # the repartitioned state is only in the hot dir: make it durable now
            coord.request(kind="checkpoint", trigger="rescale")
        self.phase = "running"
        log.info("query running", extra={"job": str(self.job), "restore": r.source, "batch": r.batch_id,
                                         "restore_seconds": round(r.seconds, 3), "attempt": self.attempt,
                                         "fallbacks": len(r.fallbacks)})
        return self._wait_and_drain()

    def _rescale_state(self, spark: Any) -> None:
        """spark.shufflePartitions differs from what the restored state was written with: Spark
        repartitions it before the query starts (raises RescaleError: exit 4, the start failed)."""
        from sparkpoint.runtime.spark import rescale

        target = self.spec.spark.shuffle_partitions
        source = rescale.needed(self.hot_dir, target)
        if source is None:
            return
        self.phase = "rescaling"
        log.info("repartitioning the state", extra={"from": source, "to": target, "batch": self.committed_batch()})
        self.rescale = done = rescale.repartition(spark, self.hot_dir, source, target)
        log.info("state rescaled", extra=done.to_json())

    def _on_checkpoint_finished(self, req: Any) -> None:
        self.pipeline.on_finished(req)
        if req.status == "completed" and req.kind == "checkpoint" and req.checkpoint_id:
            # The hot dir now holds this checkpoint's history (a restart may trust it: hotdir.py).
            hotdir.update_owner(self.work_dir, checkpoint=req.checkpoint_id)
        if req.status == "completed" and self.event_log is not None:
            self.event_log.request()  # on its own thread: the next checkpoint never waits for it

    def _start_proved(self) -> bool:
        """True once this start committed a batch past its restore point (then it is not suspect)."""
        committed, restored = self.committed_batch(), self.restore.batch_id
        return committed is not None and (restored is None or committed > restored)

    def _record_failed_start(self, error: str) -> None:
        """The query died before committing a batch: the next start must not pick this point again."""
        r = self.restore
        if r.source == "fresh" or self.sink_failed or self._start_proved():
            return
        hotdir.record_failed_start(self.work_dir, r.point, batch=r.batch_id, attempt=self.attempt, error=error)

    def _wait_and_drain(self) -> int:
        until = self.opts.until_batch
        proved = False
        while not self.stop_event.wait(0.2 if self.start_phases.has("firstBatchCommitted") else 0.05):
            self._note_first_batch()
            if not self.query.isActive:
                exc = self.query.exception()
                log.error("query terminated", extra={"error": str(exc) if exc else None})
                self._record_failed_start(str(exc) if exc else "the query stopped")
                self.phase = "failed"
                self.coordinator.stop()
                return EXIT_FAILED
            if not proved and self._start_proved():
                proved = True
                hotdir.update_owner(self.work_dir, failedStarts=[])
            if until is not None and (self.committed_batch() or -1) >= until:
                self.request_stop(checkpoint=True)
        return self._drain()

    def _note_first_batch(self) -> None:
        """The first batch after the restored one, planned and committed: then the start's phases
        are complete, and logged once."""
        phases = self.start_phases
        if phases.has("firstBatchCommitted"):
            return
        phases.note_batches(latest_planned_batch(self.hot_dir), self.committed_batch(), self.restore.batch_id)
        if phases.has("firstBatchCommitted"):
            log.info("start phases", extra={"job": str(self.job), "attempt": self.attempt,
                                            "restore": self.restore.source, "phases": phases.to_json()})

    def _drain(self) -> int:
        """Finish the running batch, stop the query, take the final checkpoint/savepoint, exit."""
        self.phase = "draining"
        ok = drain(self.query, self.coordinator, sink=self.sink, spark=self.spark,
                   listener=getattr(self, "listener", None), hot_dir=self.hot_dir,
                   grace_seconds=self.opts.grace_seconds, stop_request=self.stop_request)
        self.phase = "stopped" if ok else "failed"
        log.info("drained", extra={"ok": ok, "committed_batch": self.committed_batch()})
        return EXIT_OK if ok else EXIT_FAILED


def install_signal_handlers(runtime: JobRuntime) -> None:
    """SIGTERM/SIGINT drain like POST /stop (final checkpoint, exit 0 within the grace period)."""
    def handler(signum: int, _frame: Any) -> None:
        log.info("signal received; draining", extra={"signal": signal.Signals(signum).name})
        runtime.request_stop(checkpoint=True)
    signal.signal(signal.SIGTERM, handler)
    signal.signal(signal.SIGINT, handler)
