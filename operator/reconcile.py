"""Observe -> decide -> act for one StreamingJob.

Observe: the CR (kopf's watched body, or what our own last status PATCH returned when the watch
has not caught up), the job's pods (a kopf index fed by the pod watch), the runtime's GET /status
(when its pod is ready), the store's recent manifests and savepoints (cached, refreshed every
STORE_REFRESH seconds, sooner when the runtime cannot be asked). Decide: machine.decide. Act: write
the decided status (only what changed), then the actions, each idempotent. The status goes
through the job's StatusWriter: a round that creates or deletes something waits until its status
is stored (an operator killed then finds its intent there); a round that only triggers a
checkpoint does not wait, and triggers before its status is written, so a slow API server does
not make triggers late (an operator killed between the two triggers once more: one extra
checkpoint, the runtime runs one at a time).
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Callable, Iterable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from typing import Any

from sparkpoint.runtime.checkpoint.savepoint import delete_savepoint
from sparkpoint.runtime.config import JobSpec, SpecError, parse_spec
from sparkpoint.runtime.store import JobRef as StoreJob

from . import builders, control_token, store_view
from .caches import FactCache, SpecCache, TtlCache, fresher_body, secret_fingerprint
from .checkpoints import iso
from .kube import Kube
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
from .status_writer import StatusWriter

log = logging.getLogger("sparkpoint.operator")
STORE_REFRESH = 60.0
STORE_REFRESH_BLIND = 15.0  # while the runtime is unreachable the store is the only source
SAVEPOINT_RECHECK = 3.0  # a savepoint the runtime or status names but the cache lacks: look again this soon
OWN_STATUS_SKIP = ("kopf",)  # kopf's bookkeeping in status is not ours to diff
SECRET_TTL = 120.0  # a changed storage Secret is read again within this (at once after a store error)
STORE_CLIENT_TTL = 600.0
STORE_THREADS = 8  # blocking store reads (every job's refresh) run here, not in kube's executor
ROUTINE_STORE_READS = 4  # background refreshes at once: the other threads serve rounds that wait
KNOWN_MANIFESTS = 12_000  # checkpoint facts kept (about RECENT_MANIFESTS per job at 1,000 jobs)
PodSource = Callable[[str, str], Iterable[PodObs]]


_NO_WAIT = (TriggerCheckpoint, CheckpointResult, Emit)  # actions that need no stored status first


class StatusNotWritten(Exception):
    """The status write of a round failed: its other actions wait for the next round."""


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
    refresh: asyncio.Task | None = None  # a routine refresh running behind the job's rounds


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
        self._writers: dict[tuple[str, str], StatusWriter] = {}
        self._secrets: TtlCache[dict[str, str]] = TtlCache(SECRET_TTL, 4096)
        self._stores: TtlCache[Any] = TtlCache(STORE_CLIENT_TTL, 64)
        self._facts: FactCache = FactCache(KNOWN_MANIFESTS)
        self._specs = SpecCache(parse_spec)
        self._store_pool = ThreadPoolExecutor(STORE_THREADS, thread_name_prefix="store")
        self._routine_reads = asyncio.Semaphore(ROUTINE_STORE_READS)

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
            while not stopped:
                wake.clear()
                t0 = time.perf_counter()
                try:
                    delay = await self.reconcile(namespace, name, dict(body) if body is not None else None,
                                                 list(pods(namespace, name)) if pods is not None else None)
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
        finally:
            if stop is not None:
                stop.cancel()
            for cache in (self._wake, self._writers):
                cache.pop(key, None)
            self._specs.forget(key)
            if (store := self._store.pop(key, None)) and store.refresh:
                store.refresh.cancel()

    # --- one round -------------------------------------------------------------------------------------
    async def reconcile(self, namespace: str, name: str, body: dict[str, Any] | None = None,
                        pods: list[PodObs] | None = None) -> float | None:
        writer = self._writer(namespace, name)
        if body is None:
            body = await self.kube.get_job(namespace, name)
        elif not writer.pending:
            body = fresher_body(body, writer.stored)  # the watch may not have delivered our last write
            if body is not writer.stored:
                writer.stored = None  # the watch has caught up: do not keep a second copy
        if body is None or body["metadata"].get("deletionTimestamp"):
            return None
        meta = body["metadata"]
        own = writer.current() or {k: v for k, v in (body.get("status") or {}).items() if k not in OWN_STATUS_SKIP}
        try:
            spec = self._specs.get((namespace, name), body.get("spec"))
        except SpecError as exc:
            await self._invalid_spec(body, own, str(exc))
            return 300.0
        if pods is None:
            pods = [pod_observation(p) for p in await self.kube.job_pods(namespace, name)]
        current = next((p for p in pods if p.attempt == own.get("attempt")), None)
        runtime = await self._runtime_status(current, namespace, name)
        cache = await self._store_facts(namespace, name, spec, blind=runtime is None,
                                        expect=_expected_savepoints(own, runtime))
        obs = Observed(spec=spec, generation=meta.get("generation", 1), status=own, pods=pods, now=self.clock(),
                       name=name, runtime=runtime, store_checkpoints=cache.checkpoints,
                       store_savepoints=cache.savepoints, upgrade_timeout=self.upgrade_timeout)
        decision = decide(obs)
        for trigger in decision.of(TriggerCheckpoint):
            self.metrics.trigger_lag.observe(max(0.0, trigger.lag))
            await self._trigger(namespace, name, current, decision.status)
        writer.submit(own, decision.status)
        if any(not isinstance(a, _NO_WAIT) for a in decision.actions) and not await writer.flush():
            raise StatusNotWritten(f"status of {namespace}/{name} not written; actions not taken")
        self._count_restarts(namespace, name, own, decision.status)
        for action in decision.actions:
            await self._act(action, body, spec, decision.status, current)
        return decision.requeue_after

    def _writer(self, namespace: str, name: str) -> StatusWriter:
        writer = self._writers.get((namespace, name))
        if writer is None:
            def patch(doc: dict[str, Any]) -> Any:
                return self.kube.patch_status(namespace, name, doc, routine=not writer.urgent)

            def failed(exc: Exception) -> None:
                self.metrics.reconcile_errors.labels(type(exc).__name__).inc()
            writer = self._writers[(namespace, name)] = StatusWriter(patch, failed)
        return writer

    async def _invalid_spec(self, body: dict[str, Any], own: dict[str, Any], message: str) -> None:
        meta = body["metadata"]
        generation = meta.get("generation", 1)
        # failedGeneration: the next edit of the spec leaves Failed (machine._terminal).
        tracking = dict(own.get("tracking") or {}, failedGeneration=generation)
        new = dict(own, phase="Failed", observedGeneration=generation, tracking=tracking,
                   lastFailure={"reason": "InvalidSpec", "message": message, "at": iso(self.clock())})
        apply_conditions(new, meta.get("generation", 1), self.clock())
        writer = self._writer(meta["namespace"], meta["name"])
        writer.submit(own, new)
        await writer.flush()
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
        if cache.checkpoints is not None and not blind and not missing:
            # A routine refresh while the runtime answers: behind the round, which decides on the
            # facts it has (a slow store must not make this round's checkpoint trigger late).
            if cache.refresh is None or cache.refresh.done():
                cache.refresh = asyncio.create_task(self._routine_read(cache, namespace, name, spec))
            return cache
        await self._read_store(cache, namespace, name, spec)
        return cache

    async def _routine_read(self, cache: _StoreCache, namespace: str, name: str, spec: JobSpec) -> None:
        async with self._routine_reads:
            await self._read_store(cache, namespace, name, spec)

    async def _read_store(self, cache: _StoreCache, namespace: str, name: str, spec: JobSpec) -> None:
        try:
            store = await self._open_store(namespace, spec)
            if store is None:
                return
            job = StoreJob(namespace, name)
            loop = asyncio.get_running_loop()
            cache.checkpoints = await loop.run_in_executor(self._store_pool, store_view.recent_checkpoints,
                                                           store, job, self._facts)
            cache.savepoints = await loop.run_in_executor(self._store_pool, store_view.savepoints, store, job)
        except Exception as exc:  # the store may be down: decide on what the runtime says
            log.warning("store not readable", extra={"job": f"{namespace}/{name}", "error": type(exc).__name__})
            self._forget_store(namespace, spec)  # maybe rotated credentials: read the Secret again

    async def _open_store(self, namespace: str, spec: JobSpec, deletes: bool = False) -> Any:
        """The store client for the job's storage: one per store URL and credentials, shared by the
        jobs that use the same (a client holds a connection pool); the Secret is read at most
        every SECRET_TTL seconds. `deletes`: with spec.gc.secretRef's credential when set (the
        storage Secret's may lack delete rights)."""
        storage = spec.checkpoint.storage
        if storage is None:
            return None
        secret = None
        secret_ref = (spec.gc.secret_ref if deletes else None) or storage.secret_ref
        if secret_ref:
            secret_key = (namespace, secret_ref.name)
            secret = self._secrets.get(secret_key)
            if secret is None:
                secret = self._secrets.put(secret_key, await self.kube.secret_data(*secret_key))
        env = store_view.store_env(spec, secret)
        client_key = (storage.url, secret_fingerprint(env))
        return self._stores.get(client_key) or self._stores.put(client_key, store_view.open_job_store(spec, secret, STORE_THREADS))

    def _forget_store(self, namespace: str, spec: JobSpec) -> None:
        storage = spec.checkpoint.storage
        if storage is None:
            return
        for secret_ref in (storage.secret_ref, spec.gc.secret_ref):
            if secret_ref is None:
                continue
            secret = self._secrets.get((namespace, secret_ref.name))
            self._secrets.invalidate((namespace, secret_ref.name))
            if secret is not None:
                self._stores.invalidate((storage.url, secret_fingerprint(store_view.store_env(spec, secret))))

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
                # The pod last: it mounts the ConfigMap and the token Secret (created once, an existing
                # one is kept: the token never changes under a pod); the Service may come in parallel.
                await asyncio.gather(self.kube.apply_config_map(builders.build_config_map(job, run_spec, restore_from),
                                                                exists=attempt > 1),
                                     self.kube.create(builders.build_control_token_secret(job, control_token.new_token())),
                                     self.kube.create(builders.build_service(job)))
                await self.kube.create(builders.build_pod(job, run_spec, attempt, self.job_service_account))
            case DeletePod(name=pod_name, force=force):
                await self.kube.delete_pod(ns, pod_name, force)
            case TriggerCheckpoint():
                pass  # made before the status was written (reconcile)
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

    async def _trigger(self, ns: str, name: str, pod: PodObs | None, status: dict[str, Any]) -> None:
        """POST /checkpoints; the request id goes into the decided status (written with it)."""
        tracking = status.setdefault("tracking", {})
        try:
            if pod is None or not pod.ip:
                raise RuntimeApiError("no pod IP")
            doc = await self.client.trigger_checkpoint(base_url(pod.ip, builders.CONTROL_PORT, ns, name))
            tracking["pendingTrigger"] = dict(tracking.get("pendingTrigger") or {}, id=doc.get("id"))
        except RuntimeApiError as exc:
            self.metrics.triggers.labels("error").inc()
            log.warning("checkpoint trigger failed", extra={"job": f"{ns}/{name}", "error": str(exc)})
            tracking.pop("pendingTrigger", None)  # the next interval tries again

    async def _delete_savepoint(self, body: dict[str, Any], spec: JobSpec, sp_name: str) -> None:
        ns, name = body["metadata"]["namespace"], body["metadata"]["name"]
        try:
            store = await self._open_store(ns, spec, deletes=True)
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
            store = await self._open_store(ns, spec, deletes=True)
            if store is not None:
                count = await asyncio.to_thread(store_view.delete_checkpoints, store, StoreJob(ns, name))
                log.info("checkpoints deleted", extra={"job": f"{ns}/{name}", "objects": count})
        self.metrics.job_phase(ns, name, None)
        self._store.pop((ns, name), None)
