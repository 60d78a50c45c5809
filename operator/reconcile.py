"""Observe -> decide -> act for one StreamingJob.

Observe: the CR (kopf's watched body, or what our own last status PATCH returned when the watch
has not caught up), the job's pods (a kopf index fed by the pod watch), the runtime's GET /status
(when its pod is ready; a round that only triggers the next checkpoint reuses the last answer,
runtime_view.py), the store's recent manifests and savepoints (store_facts.py). Decide: machine.decide. Act: write
the decided status (only what changed), then the actions, each idempotent. The status goes
through the job's StatusWriter: a round that creates or deletes something waits until its status
is stored (an operator killed then finds its intent there); a round that only triggers a
checkpoint does not wait, and triggers before its status is written, so a slow API server does
not make triggers late (an operator killed between the two triggers once more: one extra
checkpoint, the runtime runs one at a time). The trigger's own bookkeeping is written with its
completion (status_writer.py, lazy).
"""

from __future__ import annotations

import asyncio
import dataclasses
import json
import logging
import time
from collections.abc import Callable, Iterable
from typing import Any

from kubernetes.client.rest import ApiException

from sparkpoint.runtime.checkpoint import delete_savepoint
from sparkpoint.runtime.config import JobSpec, parse_spec
from sparkpoint.runtime.store import JobRef as StoreJob

from . import builders, control_token, hot_confine, hot_node, isolation
from .caches import SpecCache, fresher_body
from .checkpoints import iso, only_trigger_bookkeeping
from .deletion import JobDeletion
from .kube import Kube
from .liveness import Liveness, NodeObs, answered, of_pod, unanswered
from .machine import DRAIN_GRACE, decide
from .metrics import OperatorMetrics
from .model import (
    CheckpointResult,
    CreateAttempt,
    Decision,
    DeletePod,
    DeleteSavepoint,
    Emit,
    Observed,
    PinCheckpoints,
    PodObs,
    StopRuntime,
    TriggerCheckpoint,
    TriggerSavepoint,
)
from .observe import node_observation, pod_observation
from .pod_view import confirm_before_create, needs_direct_read, owned_pods
from .resource import JobMeta, StreamingJob, parse_job
from .runtime_client import RuntimeApiError, RuntimeClient, base_url
from .runtime_view import Answer, may_reuse
from .status import apply_conditions
from .status_model import CreateFailed, Failure, JobStatus
from .status_writer import StatusWriter
from .step import effective_spec
from .store_facts import StoreFacts

log = logging.getLogger("sparkpoint.operator")
# Attempts whose objects are being created at once. Each takes four API calls, so this still keeps
# every kube thread busy; beyond it, jobs wait as cheap coroutines instead of queueing thousands of
# request bodies in the executor when 1,000 jobs appear together (the operator's peak RSS).
ATTEMPT_CREATES = 16
PodSource = Callable[[str, str], Iterable[PodObs]]


_NO_WAIT = (TriggerCheckpoint, CheckpointResult, Emit)  # actions that need no stored status first


class StatusNotWritten(Exception):
    """The status write of a round failed: its other actions wait for the next round."""


def _expected_savepoints(status: JobStatus, runtime: dict[str, Any] | None) -> set[str]:
    """Savepoints that should be in the store: the restore target of a drain, and those the
    runtime reports completed (so status.savepoints shows them without waiting a full refresh)."""
    names = {r.get("savepoint") for r in (runtime or {}).get("recentCheckpoints") or []
             if r.get("kind") == "savepoint" and r.get("status") == "completed"}
    tr = status.tracking
    drain_at = tr.drain.at if tr.drain else 0
    target = tr.restore_target if time.time() - drain_at < 2 * DRAIN_GRACE else None
    pending = tr.pending_savepoint.name if tr.pending_savepoint else None
    return {n for n in names | {target, pending} if n}


EventFn = Callable[[dict[str, Any], str, str, str], None]


def refused(exc: ApiException) -> bool:
    """A refusal that retrying the same request will not change (403 quota or admission, 422
    invalid, 404 a missing ServiceAccount or namespace): not a conflict, throttling or outage."""
    return exc.status is not None and 400 <= exc.status < 500 and exc.status not in (408, 409, 429)


def refusal_message(exc: ApiException) -> str:
    """The API server's own message (its Status body), else the HTTP reason."""
    try:
        return str(json.loads(exc.body or "")["message"])[:500]
    except (ValueError, TypeError, KeyError):
        return f"{exc.status} {exc.reason}"


class Reconciler:
    def __init__(self, kube: Kube, client: RuntimeClient, metrics: OperatorMetrics, post_event: EventFn,
                 clock: Callable[[], float] = time.time, upgrade_timeout: float = 300.0,
                 job_service_account: str | None = None, driver_service_account: str | None = None,
                 ui_path_prefix: str | None = None, host_path_prefix: str | None = None,
                 store_own_identity: bool = False):
        self.kube, self.client, self.metrics, self.post_event, self.clock = kube, client, metrics, post_event, clock
        self.upgrade_timeout = upgrade_timeout
        self.job_service_account = job_service_account
        self.driver_service_account = driver_service_account  # pods of spark.master k8s jobs
        self.ui_path_prefix = ui_path_prefix  # the UI behind the chart's Ingress (builders._with_ui)
        self.host_path_prefix = host_path_prefix  # hostPath hot volumes only under it (hot_confine.py)
        self.store = StoreFacts(kube, clock, own_identity=store_own_identity)
        self._wake: dict[tuple[str, str], asyncio.Event] = {}
        self._writers: dict[tuple[str, str], StatusWriter] = {}
        self._answers: dict[tuple[str, str], Answer] = {}  # each job's last GET /status
        self._liveness: dict[tuple[str, str], Liveness] = {}  # whether the runtime answers (liveness.py)
        self._pod_doubt: dict[tuple[str, str], float | None] = {}  # pod_view: since when the index is doubted
        self._specs = SpecCache(parse_spec)
        self._creating = asyncio.Semaphore(ATTEMPT_CREATES)
        self.deletion = JobDeletion(kube, self.store, client, metrics, post_event, clock)
        self.deletion.host_path_prefix = host_path_prefix

    # --- the per-job loop (run by a kopf daemon) ----------------------------------------------------
    def wake(self, namespace: str, name: str) -> None:
        event = self._wake.get((namespace, name))
        if event is not None:
            event.set()

    async def run(self, namespace: str, name: str, stopped: Any, body: Any = None,
                  pods: PodSource | None = None) -> None:
        """The job's loop: one round, then sleep until the round's requeue time (the next trigger
        is due then), a wake-up (pod event, spec change) or the stop. `body` is kopf's live view
        of the CR, `pods` the pod index; without them each round reads both from the API."""
        key = (namespace, name)
        wake = self._wake.setdefault(key, asyncio.Event())
        stop = asyncio.ensure_future(stopped.wait()) if hasattr(stopped, "wait") else None
        try:
            woken = True  # the first round asks the runtime
            while not stopped:
                wake.clear()
                t0 = time.perf_counter()
                try:
                    delay = await self.reconcile(namespace, name, dict(body) if body is not None else None,
                                                 list(pods(namespace, name)) if pods is not None else None,
                                                 woken=woken)
                except Exception as exc:  # the loop must survive anything; kopf would stop the daemon
                    self.metrics.reconcile_errors.labels(type(exc).__name__).inc()
                    log.exception("reconcile failed", extra={"job": f"{namespace}/{name}"})
                    delay = 5.0
                self.metrics.reconcile_seconds.observe(time.perf_counter() - t0)
                if delay is None:
                    return
                waiting = asyncio.ensure_future(wake.wait())
                await asyncio.wait({waiting, stop} - {None}, timeout=delay, return_when=asyncio.FIRST_COMPLETED)
                waiting.cancel()
                woken = wake.is_set()
        finally:
            if stop is not None:
                stop.cancel()
            for cache in (self._wake, self._writers, self._answers, self._pod_doubt, self._liveness):
                cache.pop(key, None)
            self._specs.forget(key)
            self.store.forget_job(key)

    # --- one round -------------------------------------------------------------------------------------
    async def reconcile(self, namespace: str, name: str, body: dict[str, Any] | None = None,
                        pods: list[PodObs] | None = None, woken: bool = True) -> float | None:
        """One round; `woken`: an event (pod, spec) started it, not its requeue time."""
        writer = self._writer(namespace, name)
        if body is None:
            body = await self.kube.get_job(namespace, name)
        elif not writer.writing:
            body = fresher_body(body, writer.stored)  # the watch may not have delivered our last write
            if body is not writer.stored:
                writer.stored = None  # the watch has caught up: do not keep a second copy
        if body is None or body["metadata"].get("deletionTimestamp"):
            return None
        job = parse_job(body, writer.current() or None, lambda raw: self._specs.get((namespace, name), raw))
        own, spec = job.status, job.spec
        refusal = job.spec_error if spec is None else hot_confine.host_path_refusal(spec, self.host_path_prefix)
        if spec is None or refusal:
            await self._invalid_spec(job, refusal or "invalid spec")
            return 300.0
        pods, direct = await self._pods(namespace, name, job.meta.uid, own, pods)
        current = next((p for p in pods if own.attempt and p.attempt == own.attempt), None)
        runtime = await self._runtime_status(current, namespace, name, own, woken)
        alive = of_pod(self._liveness.get((namespace, name)), current.name if current else None)
        node = await self._silent_node(current, alive)
        # The store of the spec the job runs: after a rollback the CR still holds the rejected spec,
        # whose storage URL may differ (its listing would mix another store into this one's history).
        cache = await self.store.facts(namespace, name, effective_spec(spec, own.tracking), blind=runtime is None,
                                       expect=_expected_savepoints(own, runtime))
        obs = Observed(spec=spec, generation=job.meta.generation, status=own, pods=pods, now=self.clock(),
                       name=name, runtime=runtime, store_checkpoints=cache.checkpoints,
                       store_savepoints=cache.savepoints, upgrade_timeout=self.upgrade_timeout,
                       runtime_silent_since=alive.silent_since if alive else None,
                       runtime_unreachable_since=alive.unreachable_since if alive else None, node=node)
        decision = decide(obs)
        if confirm_before_create(own, bool(decision.of(CreateAttempt)), direct):
            listed = await self._listed_pods(namespace, name, job.meta.uid)
            if {p.name for p in listed} != {p.name for p in pods}:
                decision = decide(dataclasses.replace(obs, pods=listed))
        for trigger in decision.of(TriggerCheckpoint):
            self.metrics.trigger_lag.observe(max(0.0, trigger.lag))
            await self._trigger(namespace, name, current, decision)
        writer.submit(job.stored_status, decision.status)
        if any(not isinstance(a, _NO_WAIT) for a in decision.actions) and not await writer.flush():
            raise StatusNotWritten(f"status of {namespace}/{name} not written; actions not taken")
        self._count_restarts(job.meta, own, decision.state)
        for action in decision.actions:
            await self._act(action, job, decision, current)
        return decision.requeue_after

    async def _pods(self, namespace: str, name: str, uid: str, own: JobStatus,
                    indexed: list[PodObs] | None) -> tuple[list[PodObs], bool]:
        """(the index's view of the job's pods, or the API server's where pod_view says to check;
        whether it is the API server's). Either way only the pods this job owns (pod_view.owned_pods)."""
        key = (namespace, name)
        if indexed is not None:
            indexed = owned_pods(list(indexed), name, uid)
            read, self._pod_doubt[key] = needs_direct_read(own, indexed, key in self._answers,
                                                           self._pod_doubt.get(key), self.clock())
            if not read:
                return indexed, False
        return await self._listed_pods(namespace, name, uid), True

    async def _listed_pods(self, namespace: str, name: str, uid: str) -> list[PodObs]:
        return owned_pods([pod_observation(p) for p in await self.kube.job_pods(namespace, name)], name, uid)

    def _writer(self, namespace: str, name: str) -> StatusWriter:
        writer = self._writers.get((namespace, name))
        if writer is None:
            def patch(doc: dict[str, Any]) -> Any:
                return self.kube.patch_status(namespace, name, doc, routine=not writer.urgent)

            def failed(exc: Exception) -> None:
                self.metrics.reconcile_errors.labels(type(exc).__name__).inc()
            writer = self._writers[(namespace, name)] = StatusWriter(patch, failed, lazy=only_trigger_bookkeeping)
        return writer

    async def _invalid_spec(self, job: StreamingJob, message: str) -> None:
        meta, new = job.meta, job.status.model_copy(deep=True)
        new.phase, new.observed_generation = "Failed", meta.generation
        new.tracking = new.tracking  # (assigned: written)
        new.tracking.failed_generation = meta.generation  # the next edit of the spec leaves Failed (machine._terminal)
        new.last_failure = Failure(reason="InvalidSpec", message=message, at=iso(self.clock()))
        apply_conditions(new, meta.generation, self.clock())
        writer = self._writer(*meta.key)
        writer.submit(job.stored_status, new.document())
        await writer.flush()
        if (job.status.last_failure and job.status.last_failure.message) != message:
            self.post_event(job.body, "Warning", "InvalidSpec", message)
        self.metrics.job_phase(meta.namespace, meta.name, "Failed")

    async def _runtime_status(self, pod: PodObs | None, namespace: str, name: str, status: JobStatus,
                              woken: bool) -> dict[str, Any] | None:
        if pod is None or not pod.ip or pod.deleting or pod.phase != "Running":
            return None
        key, now = (namespace, name), self.clock()
        last = self._answers.get(key)
        if may_reuse(last, pod, status, woken, now):
            return last.doc
        try:
            doc = await self.client.status(base_url(pod.ip, builders.CONTROL_PORT, namespace, name))
        except RuntimeApiError as exc:
            self._answers.pop(key, None)
            self._note_liveness(key, pod.name, exc)
            return None
        self._answers[key] = Answer(pod.name, pod.restart_count, now, doc)
        self._note_liveness(key, pod.name, None)
        return doc

    def _note_liveness(self, key: tuple[str, str], pod: str, error: RuntimeApiError | None) -> None:
        """Any HTTP answer is the runtime seen alive; no answer starts (or continues) its silence."""
        if error is None or error.status is not None:
            self._liveness[key] = answered(pod)
        else:
            self._liveness[key] = unanswered(self._liveness.get(key), pod, self.clock(), error.unreachable)

    async def _silent_node(self, pod: PodObs | None, alive: Liveness | None) -> NodeObs | None:
        """The silent runtime's Node (lost_attempt.py); None while it answers, or when the Node cannot be
        read (the operator's role may not grant it: then only the runtime's own silence counts)."""
        if pod is None or not pod.node or alive is None or alive.silent_since is None:
            return None
        try:
            return node_observation(pod.node, await self.kube.get_node(pod.node))
        except ApiException as exc:
            log.warning("node not read", extra={"node": pod.node, "status": exc.status})
            return None

    def _count_restarts(self, meta: JobMeta, old: JobStatus, new: JobStatus) -> None:
        local = new.local_recoveries - old.local_recoveries
        total = new.restarts - old.restarts
        if local > 0:
            self.metrics.restarts.labels(meta.namespace, meta.name, "local").inc(local)
        if total - local > 0:
            self.metrics.restarts.labels(meta.namespace, meta.name, "attempt").inc(total - local)
        self.metrics.job_phase(meta.namespace, meta.name, new.phase)
        self.metrics.checkpoint_unhealthy.labels(meta.namespace, meta.name).set(
            0 if new.tracking.checkpoint_healthy else 1)

    # --- actions -----------------------------------------------------------------------------------------
    async def _act(self, action: Any, job: StreamingJob, decision: Decision, pod: PodObs | None) -> None:
        ns, name, spec = job.meta.namespace, job.meta.name, job.spec
        base = base_url(pod.ip, builders.CONTROL_PORT, ns, name) if pod and pod.ip else None
        match action:
            case CreateAttempt(attempt=attempt, restore_from=restore_from, spec=override):
                async with self._creating:
                    try:
                        await self._create_attempt(job.meta.ref, override or spec, attempt, restore_from,
                                                   decision.state.tracking.gc_pins or [],
                                                   decision.state.hot_volume_node)
                    except ApiException as exc:
                        if not refused(exc):
                            raise
                        await self._record_refusal(job, decision, attempt, exc)
            case DeletePod(name=pod_name, force=force):
                await self.kube.delete_pod(ns, pod_name, force)
            case PinCheckpoints(ids=ids):
                await self._pin(job, decision, ids)
            case TriggerCheckpoint():
                pass  # made before the status was written (reconcile)
            case TriggerSavepoint(name=sp_name):
                await self._call(job, "SavepointFailed", self.client.trigger_savepoint, base, sp_name)
            case StopRuntime(savepoint=sp_name):
                await self._call(job, "StopFailed", self.client.stop, base, sp_name, True)
            case DeleteSavepoint(name=sp_name):
                await self._delete_savepoint(job, sp_name)
            case CheckpointResult(result=result):
                self.metrics.triggers.labels(result).inc()
            case Emit(type=type_, reason=reason, message=message):
                self.post_event(job.body, type_, reason, message)
                log.info(message, extra={"job": job.meta.label, "reason": reason})

    async def _create_attempt(self, job: builders.JobRef, run_spec: JobSpec, attempt: int,
                              restore_from: Any, pins: list[str], node: str | None = None) -> None:
        """`run_spec`: the CR's, or the last stable one for a rollback. The pod last: it mounts the
        ConfigMap and the token Secret (created once, an existing one is kept: the token never
        changes under a pod); the Service may come in parallel."""
        await asyncio.gather(self.kube.apply_config_map(builders.build_config_map(job, run_spec, restore_from, pins),
                                                        exists=attempt > 1),
                             self.kube.create(builders.build_control_token_secret(job, control_token.new_token())),
                             self.kube.create(builders.build_service(job)),
                             *(self.kube.create(body) for body in isolation.driver_objects(job, run_spec)))
        pod = builders.build_pod(job, run_spec, attempt, self.job_service_account,
                                 self.driver_service_account, self.ui_path_prefix)
        if run_spec.spark.master == "k8s":
            isolation.with_spark_auth(pod, job)
        # node: status.hotVolumeNode, where a hostPath hot volume holds the job's directory
        await self.kube.create(hot_node.pinned(hot_confine.confine_hot_mounts(pod, job), run_spec, node))

    def _amend_tracking(self, meta: JobMeta, decision: Decision, **changes: Any) -> StatusWriter:
        """What an action learnt, written into the decided status's tracking (snake_case fields;
        None removes one) for the next round to decide on; returns the writer, to flush when the
        round must wait."""
        amended = decision.state.model_copy(deep=True)
        for field, value in changes.items():
            setattr(amended.tracking, field, value)
        writer = self._writer(*meta.key)
        writer.submit(writer.current() or decision.status, amended.document())
        return writer

    async def _pin(self, job: StreamingJob, decision: Decision, ids: tuple[str, ...]) -> None:
        """The GC sidecar's pins in the job's ConfigMap (the kubelet updates the mounted file; the
        sidecar reads it every pass). A failed write forgets the decided pins, so the next round
        writes them again."""
        try:
            await self.kube.patch_config_map(job.meta.namespace, builders.config_map_name(job.meta.ref),
                                             {"data": {builders.PINS_FILE: builders.pins_document(ids)}})
        except ApiException as exc:
            log.warning("gc pins not written", extra={"job": job.meta.label, "status": exc.status})
            self._amend_tracking(job.meta, decision, gc_pins=None)

    async def _record_refusal(self, job: StreamingJob, decision: Decision, attempt: int, exc: ApiException) -> None:
        """The API server refused the attempt's objects (quota, admission, a missing ServiceAccount):
        the machine counts it as a failed start (status.tracking.createFailed, read next round)."""
        message = refusal_message(exc)
        await self._amend_tracking(job.meta, decision, create_failed=CreateFailed(
            attempt=attempt, reason=exc.reason or f"HTTP{exc.status}", message=message)).flush()
        self.post_event(job.body, "Warning", "PodCreateFailed", f"attempt {attempt}: {message}")
        log.warning("attempt refused", extra={"job": job.meta.label, "attempt": attempt,
                                              "status": exc.status, "error": message})

    async def _trigger(self, ns: str, name: str, pod: PodObs | None, decision: Decision) -> None:
        """POST /checkpoints; the request id goes into the decided status (written with it)."""
        tracking = decision.state.tracking
        try:
            if pod is None or not pod.ip:
                raise RuntimeApiError("no pod IP")
            doc = await self.client.trigger_checkpoint(base_url(pod.ip, builders.CONTROL_PORT, ns, name))
            self._note_liveness((ns, name), pod.name, None)
            if tracking.pending_trigger is not None:
                tracking.pending_trigger.id = doc.get("id")
        except RuntimeApiError as exc:
            if pod is not None and pod.ip:
                self._note_liveness((ns, name), pod.name, exc)
            self.metrics.triggers.labels("error").inc()
            log.warning("checkpoint trigger failed", extra={"job": f"{ns}/{name}", "error": str(exc)})
            self._answers.pop((ns, name), None)  # the next round asks the runtime again
            tracking.clear("pending_trigger")  # the next interval tries again
        decision.status = decision.state.document()

    async def _delete_savepoint(self, job: StreamingJob, sp_name: str) -> None:
        ns, name = job.meta.namespace, job.meta.name
        try:
            store = await self.store.open_store(ns, job.spec, deletes=True)
            if store is not None:
                await asyncio.to_thread(delete_savepoint, store, StoreJob(ns, name), sp_name)
                self.post_event(job.body, "Normal", "SavepointPruned", f"periodic savepoint {sp_name} deleted "
                                                                       f"(savepoint.retain {job.spec.savepoint.retain})")
        except Exception as exc:  # retried after job_savepoints.PRUNE_RETRY while still listed
            self.post_event(job.body, "Warning", "SavepointPruneFailed", f"{sp_name}: {type(exc).__name__}")

    async def _call(self, job: StreamingJob, failure: str, fn: Any, base: str | None, *args: Any) -> None:
        try:
            if base is None:
                raise RuntimeApiError("no pod IP")
            await fn(base, *args)
        except RuntimeApiError as exc:
            self.post_event(job.body, "Warning", failure, str(exc))

    # --- deletion (the finalizer) ----------------------------------------------------------------------
    async def finalize(self, body: dict[str, Any]) -> None:
        """Drain the job, then gc.onDelete (deletion.py). Raises Draining while that must wait."""
        await self.deletion.finalize(body)
