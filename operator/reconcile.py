"""Observe -> decide -> act for one StreamingJob.

Observe: the CR, the job's pods, the runtime's GET /status (when its pod is ready), the store's
recent manifests and savepoints (cached, refreshed every STORE_REFRESH seconds, sooner when the
runtime cannot be asked). Decide: machine.decide. Act: write the decided status first (so an
operator killed now finds its intent there), then the actions, each idempotent.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from sparkpoint.runtime.checkpoint.savepoint import delete_savepoint
from sparkpoint.runtime.config import JobSpec, SpecError, parse_spec
from sparkpoint.runtime.store import JobRef as StoreJob

from . import builders, control_token, store_view
from .checkpoints import iso
from .kube import Kube, merge_patch
from .machine import DRAIN_GRACE, decide
from .metrics import OperatorMetrics
from .model import (
    CheckpointResult,
    CreateAttempt,
    DeletePod,
    DeleteSavepoint,
    Emit,
    Observed,
    PodObs,
    StopRuntime,
    TriggerCheckpoint,
    TriggerSavepoint,
)
from .observe import pod_observation
from .runtime_client import RuntimeApiError, RuntimeClient, base_url
from .status import apply_conditions

log = logging.getLogger("sparkpoint.operator")
STORE_REFRESH = 60.0
STORE_REFRESH_BLIND = 15.0  # while the runtime is unreachable the store is the only source
SAVEPOINT_RECHECK = 3.0  # a savepoint the runtime or status names but the cache lacks: look again this soon
OWN_STATUS_SKIP = ("kopf",)  # kopf's bookkeeping in status is not ours to diff


class Draining(Exception):
    """Deletion must wait (pods still draining); the handler retries after `delay` seconds."""

    def __init__(self, message: str, delay: float = 3.0):
        super().__init__(message)
        self.delay = delay


@dataclass
class _StoreCache:
    read_at: float = 0.0
    checkpoints: list | None = None
    savepoints: list | None = None


def _expected_savepoints(status: dict[str, Any], runtime: dict[str, Any] | None) -> set[str]:
    """Savepoints that should be in the store: the restore target of a drain, and those the
    runtime reports completed (so status.savepoints shows them without waiting a full refresh)."""
    names = {r.get("savepoint") for r in (runtime or {}).get("recentCheckpoints") or []
             if r.get("kind") == "savepoint" and r.get("status") == "completed"}
    tracking = status.get("tracking") or {}
    drain_at = (tracking.get("drain") or {}).get("at", 0)
    target = tracking.get("restoreTarget") if time.time() - drain_at < 2 * DRAIN_GRACE else None
    pending = (tracking.get("pendingSavepoint") or {}).get("name")
    return {n for n in names | {target, pending} if n}


EventFn = Callable[[dict[str, Any], str, str, str], None]


class Reconciler:
    def __init__(self, kube: Kube, client: RuntimeClient, metrics: OperatorMetrics, post_event: EventFn,
                 clock: Callable[[], float] = time.time, upgrade_timeout: float = 300.0,
                 job_service_account: str | None = None):
        self.kube, self.client, self.metrics, self.post_event, self.clock = kube, client, metrics, post_event, clock
        self.upgrade_timeout = upgrade_timeout
        self.job_service_account = job_service_account
        self._store: dict[tuple[str, str], _StoreCache] = {}
        self._wake: dict[tuple[str, str], asyncio.Event] = {}

    # --- the per-job loop (run by a kopf daemon) ----------------------------------------------------
    def wake(self, namespace: str, name: str) -> None:
        event = self._wake.get((namespace, name))
        if event is not None:
            event.set()

    async def run(self, namespace: str, name: str, stopped: Any) -> None:
        wake = self._wake.setdefault((namespace, name), asyncio.Event())
        try:
            while not stopped:
                wake.clear()
                t0 = time.perf_counter()
                try:
                    delay = await self.reconcile(namespace, name)
                except Exception as exc:  # the loop must survive anything; kopf would stop the daemon
                    self.metrics.reconcile_errors.labels(type(exc).__name__).inc()
                    log.exception("reconcile failed", extra={"job": f"{namespace}/{name}"})
                    delay = 5.0
                self.metrics.reconcile_seconds.observe(time.perf_counter() - t0)
                if delay is None:
                    return
                deadline = time.monotonic() + delay
                while not stopped and not wake.is_set() and time.monotonic() < deadline:
                    with contextlib.suppress(TimeoutError):
                        await asyncio.wait_for(wake.wait(), min(1.0, deadline - time.monotonic()))
        finally:
            self._wake.pop((namespace, name), None)

    # --- one round -------------------------------------------------------------------------------------
    async def reconcile(self, namespace: str, name: str) -> float | None:
        body = await self.kube.get_job(namespace, name)
        if body is None or body["metadata"].get("deletionTimestamp"):
            return None
        meta = body["metadata"]
        own = {k: v for k, v in (body.get("status") or {}).items() if k not in OWN_STATUS_SKIP}
        try:
            spec = parse_spec(body.get("spec"))
        except SpecError as exc:
            await self._invalid_spec(body, own, str(exc))
            return 300.0
        pods = [pod_observation(p) for p in await self.kube.job_pods(namespace, name)]
        current = next((p for p in pods if p.attempt == own.get("attempt")), None)
        runtime = await self._runtime_status(current, namespace, name)
        cache = await self._store_facts(namespace, name, spec, blind=runtime is None,
                                        expect=_expected_savepoints(own, runtime))
        obs = Observed(spec=spec, generation=meta.get("generation", 1), status=own, pods=pods, now=self.clock(),
                       name=name, runtime=runtime, store_checkpoints=cache.checkpoints,
                       store_savepoints=cache.savepoints, upgrade_timeout=self.upgrade_timeout)
        decision = decide(obs)
        await self.kube.patch_status(namespace, name, merge_patch(own, decision.status))
        self._count_restarts(namespace, name, own, decision.status)
        for action in decision.actions:
            await self._act(action, body, spec, decision.status, current)
        return decision.requeue_after

    async def _invalid_spec(self, body: dict[str, Any], own: dict[str, Any], message: str) -> None:
        meta = body["metadata"]
        generation = meta.get("generation", 1)
        # failedGeneration: the next edit of the spec leaves Failed (machine._terminal).
        tracking = dict(own.get("tracking") or {}, failedGeneration=generation)
        new = dict(own, phase="Failed", observedGeneration=generation, tracking=tracking,
                   lastFailure={"reason": "InvalidSpec", "message": message, "at": iso(self.clock())})
        apply_conditions(new, meta.get("generation", 1), self.clock())
        await self.kube.patch_status(meta["namespace"], meta["name"], merge_patch(own, new))
        if (own.get("lastFailure") or {}).get("message") != message:
            self.post_event(body, "Warning", "InvalidSpec", message)
        self.metrics.job_phase(meta["namespace"], meta["name"], "Failed")

    async def _runtime_status(self, pod: PodObs | None, namespace: str, name: str) -> dict[str, Any] | None:
        if pod is None or not pod.ip or pod.deleting or pod.phase != "Running":
            return None
        try:
            return await self.client.status(base_url(pod.ip, builders.CONTROL_PORT, namespace, name))
        except RuntimeApiError:
            return None

    async def _store_facts(self, namespace: str, name: str, spec: JobSpec, blind: bool,
                           expect: set[str]) -> _StoreCache:
        cache = self._store.setdefault((namespace, name), _StoreCache())
        age = self.clock() - cache.read_at
        known = {s["name"] for s in cache.savepoints or []}
        missing = bool(expect - known) and age >= SAVEPOINT_RECHECK
        if age < (STORE_REFRESH_BLIND if blind else STORE_REFRESH) and not missing:
            return cache
        cache.read_at = self.clock()
        try:
            store = await self._open_store(namespace, spec)
            if store is None:
                return cache
            job = StoreJob(namespace, name)
            cache.checkpoints = await asyncio.to_thread(store_view.recent_checkpoints, store, job)
            cache.savepoints = await asyncio.to_thread(store_view.savepoints, store, job)
        except Exception as exc:  # the store may be down: decide on what the runtime says
            log.warning("store not readable", extra={"job": f"{namespace}/{name}", "error": type(exc).__name__})
        return cache

    async def _open_store(self, namespace: str, spec: JobSpec) -> Any:
        storage = spec.checkpoint.storage
        if storage is None:
            return None
        secret = await self.kube.secret_data(namespace, storage.secret_ref.name) if storage.secret_ref else None
        return store_view.open_job_store(spec, secret)

    def _count_restarts(self, namespace: str, name: str, old: dict[str, Any], new: dict[str, Any]) -> None:
        local = new.get("localRecoveries", 0) - old.get("localRecoveries", 0)
        total = new.get("restarts", 0) - old.get("restarts", 0)
        if local > 0:
            self.metrics.restarts.labels(namespace, name, "local").inc(local)
        if total - local > 0:
            self.metrics.restarts.labels(namespace, name, "attempt").inc(total - local)
        self.metrics.job_phase(namespace, name, new.get("phase"))
        healthy = (new.get("tracking") or {}).get("checkpointHealthy", True)
        self.metrics.checkpoint_unhealthy.labels(namespace, name).set(0 if healthy else 1)

    # --- actions -----------------------------------------------------------------------------------------
    async def _act(self, action: Any, body: dict[str, Any], spec: JobSpec, status: dict[str, Any],
                   pod: PodObs | None) -> None:
        meta = body["metadata"]
        ns, name = meta["namespace"], meta["name"]
        job = builders.JobRef(ns, name, meta["uid"])
        base = base_url(pod.ip, builders.CONTROL_PORT, ns, name) if pod and pod.ip else None
        match action:
            case CreateAttempt(attempt=attempt, restore_from=restore_from, spec=override):
                run_spec = override or spec  # a rollback runs the last stable spec
                await self.kube.apply_config_map(builders.build_config_map(job, run_spec, restore_from))
                # Created once (an existing Secret is kept): the token never changes under a pod.
                await self.kube.create(builders.build_control_token_secret(job, control_token.new_token()))
                await self.kube.create(builders.build_service(job))
                await self.kube.create(builders.build_pod(job, run_spec, attempt, self.job_service_account))
            case DeletePod(name=pod_name, force=force):
                await self.kube.delete_pod(ns, pod_name, force)
            case TriggerCheckpoint(lag=lag):
                self.metrics.trigger_lag.observe(max(0.0, lag))
                await self._trigger(ns, name, base, status)
            case TriggerSavepoint(name=sp_name):
                await self._call(body, "SavepointFailed", self.client.trigger_savepoint, base, sp_name)
            case StopRuntime(savepoint=sp_name):
                await self._call(body, "StopFailed", self.client.stop, base, sp_name, True)
            case DeleteSavepoint(name=sp_name):
                await self._delete_savepoint(body, spec, sp_name)
            case CheckpointResult(result=result):
                self.metrics.triggers.labels(result).inc()
            case Emit(type=type_, reason=reason, message=message):
                self.post_event(body, type_, reason, message)
                log.info(message, extra={"job": f"{ns}/{name}", "reason": reason})

    async def _trigger(self, ns: str, name: str, base: str | None, status: dict[str, Any]) -> None:
        pending = (status.get("tracking") or {}).get("pendingTrigger") or {}
        try:
            if base is None:
                raise RuntimeApiError("no pod IP")
            doc = await self.client.trigger_checkpoint(base)
            pending = dict(pending, id=doc.get("id"))
        except RuntimeApiError as exc:
            self.metrics.triggers.labels("error").inc()
            log.warning("checkpoint trigger failed", extra={"job": f"{ns}/{name}", "error": str(exc)})
            pending = None  # the next interval tries again
        await self.kube.patch_status(ns, name, {"tracking": {"pendingTrigger": pending}})

    async def _delete_savepoint(self, body: dict[str, Any], spec: JobSpec, sp_name: str) -> None:
        ns, name = body["metadata"]["namespace"], body["metadata"]["name"]
        try:
            store = await self._open_store(ns, spec)
            if store is not None:
                await asyncio.to_thread(delete_savepoint, store, StoreJob(ns, name), sp_name)
                self.post_event(body, "Normal", "SavepointPruned", f"periodic savepoint {sp_name} deleted "
                                                                   f"(savepoint.retain {spec.savepoint.retain})")
        except Exception as exc:  # retried after PRUNE_RETRY while still listed
            self.post_event(body, "Warning", "SavepointPruneFailed", f"{sp_name}: {type(exc).__name__}")

    async def _call(self, body: dict[str, Any], failure: str, fn: Any, base: str | None, *args: Any) -> None:
        try:
            if base is None:
                raise RuntimeApiError("no pod IP")
            await fn(base, *args)
        except RuntimeApiError as exc:
            self.post_event(body, "Warning", failure, str(exc))

    # --- deletion (the finalizer) ----------------------------------------------------------------------
    async def finalize(self, body: dict[str, Any]) -> None:
        """Drain the job (final checkpoint), then keep or delete its checkpoints per gc.onDelete.
        Raises Draining while pods remain."""
        meta = body["metadata"]
        ns, name = meta["namespace"], meta["name"]
        own = {k: v for k, v in (body.get("status") or {}).items() if k not in OWN_STATUS_SKIP}
        tracking = own.get("tracking") or {}
        pods = [pod_observation(p) for p in await self.kube.job_pods(ns, name)]
        now = self.clock()
        if pods:
            drain_at = tracking.get("deleteDrainAt")
            for pod in pods:
                if drain_at is None and pod.can_drain:
                    await self._call(body, "StopFailed", self.client.stop,
                                     base_url(pod.ip, builders.CONTROL_PORT, ns, name), None, True)
                elif not pod.deleting and (drain_at is None or now - drain_at > DRAIN_GRACE
                                           or pod.exit_code is not None or pod.phase not in ("Running", "Pending")):
                    await self.kube.delete_pod(ns, name=pod.name, force=pod.node_lost)
            if drain_at is None:
                await self.kube.patch_status(ns, name, {"tracking": {"deleteDrainAt": now}})
            raise Draining(f"waiting for {len(pods)} pod(s) of {ns}/{name} to stop")
        try:
            spec = parse_spec(body.get("spec"))
        except SpecError:
            spec = None
        if spec is not None and spec.gc.on_delete == "delete":
            store = await self._open_store(ns, spec)
            if store is not None:
                count = await asyncio.to_thread(store_view.delete_checkpoints, store, StoreJob(ns, name))
                log.info("checkpoints deleted", extra={"job": f"{ns}/{name}", "objects": count})
        self.metrics.job_phase(ns, name, None)
        self._store.pop((ns, name), None)
