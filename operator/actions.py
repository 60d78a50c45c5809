"""Act: what a round's decision asks for (decisions/model.py's actions), each idempotent, done after its
status is stored (reconcile.py says when a round waits for that).

A refusal by the API server of an attempt's objects (quota, admission, a missing ServiceAccount) is
recorded in status for the machine to count as a failed start; a failed call to the runtime is an
Event, and the next round decides again on what it then observes.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable
from typing import Any

from kubernetes.client.rest import ApiException

from sparkpoint.runtime.checkpoint import delete_savepoint
from sparkpoint.runtime.spec import JobSpec
from sparkpoint.runtime.store import JobRef as StoreJob

from .decisions import hot_node
from .decisions.model import (
    CheckpointResult,
    CreateAttempt,
    CreateStandby,
    Decision,
    DeletePod,
    DeleteSavepoint,
    Emit,
    PinCheckpoints,
    PodObs,
    PromoteStandby,
    StopRuntime,
    TriggerCheckpoint,
    TriggerSavepoint,
)
from .decisions.status_model import CreateFailed, StandbyTrack
from .kube import builders, control_token, hot_confine, isolation
from .kube.client import Kube
from .kube.refusals import refusal_message, refused
from .kube.resource import JobMeta, StreamingJob
from .kube.status_writer import StatusWriter
from .metrics import OperatorMetrics
from .runtime_client import RuntimeApiError, RuntimeClient, base_url
from .store.facts import StoreFacts

log = logging.getLogger("sparkpoint.operator")
# Attempts whose objects are being created at once. Each takes four API calls, so this still keeps
# every kube thread busy; beyond it, jobs wait as cheap coroutines instead of queueing thousands of
# request bodies in the executor when 1,000 jobs appear together (the operator's peak RSS).
ATTEMPT_CREATES = 16
EventFn = Callable[[dict[str, Any], str, str, str], None]
WriterFn = Callable[[str, str], StatusWriter]  # the job's status writer (reconcile.Reconciler owns them)


class Actions:
    def __init__(self, kube: Kube, client: RuntimeClient, metrics: OperatorMetrics, post_event: EventFn,
                 store: StoreFacts, writer: WriterFn, job_service_account: str | None = None,
                 driver_service_account: str | None = None, ui_path_prefix: str | None = None):
        self.kube, self.client, self.metrics, self.post_event = kube, client, metrics, post_event
        self.store, self.writer = store, writer
        self.job_service_account = job_service_account
        self.driver_service_account = driver_service_account  # pods of spark.master k8s jobs
        self.ui_path_prefix = ui_path_prefix  # the UI behind the chart's Ingress (builders._with_ui)
        self._creating = asyncio.Semaphore(ATTEMPT_CREATES)
        # whether the runtime answered a trigger (the reconciler's liveness.py bookkeeping)
        self.note_liveness: Callable[[tuple[str, str], str, RuntimeApiError | None], None] = lambda *_: None

    async def act(self, action: Any, job: StreamingJob, decision: Decision, pod: PodObs | None) -> None:
        ns, name, spec = job.meta.namespace, job.meta.name, job.spec
        base = base_url(pod.ip, builders.CONTROL_PORT, ns, name) if pod and pod.ip else None
        match action:
            case CreateAttempt(attempt=attempt, restore_from=restore_from, spec=override):
                async with self._creating:
                    try:
                        await self.create_attempt(job.meta.ref, override or spec, attempt, restore_from,
                                                   decision.state.tracking.gc_pins or [],
                                                   decision.state.hot_volume_node)
                    except ApiException as exc:
                        if not refused(exc):
                            raise
                        await self._record_refusal(job, decision, attempt, exc)
            case CreateStandby(attempt=attempt, spec_key=key, point=point, spec=override):
                await self._create_standby(job, override or spec, attempt, key, point, decision)
            case PromoteStandby(pod=pod_name, attempt=attempt, ip=ip):
                await self._promote(job, decision, pod_name, attempt, ip)
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

    async def create_attempt(self, job: builders.JobRef, run_spec: JobSpec, attempt: int,
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

    async def _create_standby(self, job: StreamingJob, run_spec: JobSpec, attempt: int, key: str,
                              point: str | None, decision: Decision) -> None:
        """The standby pod (builders.build_standby_pod), placed as the attempt's pod is (hostPath node, the
        hot volume's confined mounts). A refusal is an Event; the machine sees no pod and the standby's
        backoff decides when to try again."""
        ref = job.meta.ref
        pod = builders.build_standby_pod(ref, run_spec, attempt, key, point, self.job_service_account,
                                         self.driver_service_account, self.ui_path_prefix)
        if run_spec.spark.master == "k8s":
            isolation.with_spark_auth(pod, ref)
        try:
            await self.kube.create(hot_node.pinned(hot_confine.confine_hot_mounts(pod, ref), run_spec,
                                                   decision.state.hot_volume_node))
        except ApiException as exc:
            if not refused(exc):
                raise
            self.post_event(job.body, "Warning", "StandbyCreateFailed", f"standby for attempt {attempt}: "
                                                                         f"{refusal_message(exc)}")

    async def _promote(self, job: StreamingJob, decision: Decision, pod_name: str, attempt: int,
                       ip: str | None) -> None:
        """POST /promote {"attempt": n} to the standby pod (its IP from the pods the round saw). A 409 is
        written to status.tracking.standby.promoteRefused (the machine gives the attempt up for a cold
        pod); no answer is left to the next round, which asks the runtime again (decisions/standby.py)."""
        ns, name = job.meta.namespace, job.meta.name
        try:
            if not ip:
                raise RuntimeApiError(f"standby pod {pod_name} has no IP")
            await self.client.promote(base_url(ip, builders.CONTROL_PORT, ns, name), attempt)
            log.info("standby promoted", extra={"job": job.meta.label, "pod": pod_name, "attempt": attempt})
        except RuntimeApiError as exc:
            log.warning("standby promotion failed", extra={"job": job.meta.label, "pod": pod_name,
                                                           "status": exc.status, "error": str(exc)})
            if exc.status == 409:
                track = (decision.state.tracking.standby or StandbyTrack()).model_copy(deep=True)
                track.promote_refused = CreateFailed(attempt=attempt, reason="Conflict",
                                                     message=str(exc.body.get("error") or exc)[:300])
                await self.amend_tracking(job.meta, decision, standby=track).flush()
            else:
                self.post_event(job.body, "Warning", "PromoteFailed", f"attempt {attempt}: {exc}")

    def amend_tracking(self, meta: JobMeta, decision: Decision, **changes: Any) -> StatusWriter:
        """What an action learnt, written into the decided status's tracking (snake_case fields;
        None removes one) for the next round to decide on; returns the writer, to flush when the
        round must wait."""
        amended = decision.state.model_copy(deep=True)
        for field, value in changes.items():
            setattr(amended.tracking, field, value)
        writer = self.writer(*meta.key)
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
            self.amend_tracking(job.meta, decision, gc_pins=None)

    async def _record_refusal(self, job: StreamingJob, decision: Decision, attempt: int, exc: ApiException) -> None:
        """The API server refused the attempt's objects (quota, admission, a missing ServiceAccount):
        the machine counts it as a failed start (status.tracking.createFailed, read next round)."""
        message = refusal_message(exc)
        await self.amend_tracking(job.meta, decision, create_failed=CreateFailed(
            attempt=attempt, reason=exc.reason or f"HTTP{exc.status}", message=message)).flush()
        self.post_event(job.body, "Warning", "PodCreateFailed", f"attempt {attempt}: {message}")
        log.warning("attempt refused", extra={"job": job.meta.label, "attempt": attempt,
                                              "status": exc.status, "error": message})

    async def trigger(self, ns: str, name: str, pod: PodObs | None, decision: Decision) -> bool:
        """POST /checkpoints; the request id goes into the decided status (written with it). False when
        the runtime did not take it (the next interval tries again)."""
        tracking = decision.state.tracking
        try:
            if pod is None or not pod.ip:
                raise RuntimeApiError("no pod IP")
            doc = await self.client.trigger_checkpoint(base_url(pod.ip, builders.CONTROL_PORT, ns, name))
            self.note_liveness((ns, name), pod.name, None)
            if tracking.pending_trigger is not None:
                tracking.pending_trigger.id = doc.get("id")
        except RuntimeApiError as exc:
            if pod is not None and pod.ip:
                self.note_liveness((ns, name), pod.name, exc)
            self.metrics.triggers.labels("error").inc()
            log.warning("checkpoint trigger failed", extra={"job": f"{ns}/{name}", "error": str(exc)})
            tracking.clear("pending_trigger")  # the next interval tries again
            decision.status = decision.state.document()
            return False
        decision.status = decision.state.document()
        return True

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
