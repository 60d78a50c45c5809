"""Observe -> decide -> act for one StreamingJob.

Observe: the CR (kopf's watched body, or what our own last status PATCH returned when the watch
has not caught up), the job's pods (a kopf index fed by the pod watch), the runtime's GET /status
(when its pod is ready; a round that only triggers the next checkpoint reuses the last answer,
decisions/runtime_view.py), the store's recent manifests and savepoints (store/facts.py). Decide:
machine.decide. Act: write the decided status (only what changed), then the actions, each idempotent
(actions.py). The status goes
through the job's StatusWriter: a round that creates or deletes something waits until its status
is stored (an operator killed then finds its intent there); a round that only triggers a
checkpoint does not wait, and triggers before its status is written, so a slow API server does
not make triggers late (an operator killed between the two triggers once more: one extra
checkpoint, the runtime runs one at a time). The trigger's own bookkeeping is written with its
completion (kube/status_writer.py, lazy).
"""

from __future__ import annotations

import asyncio
import dataclasses
import logging
import time
from collections.abc import Callable, Iterable
from typing import Any

from kubernetes.client.rest import ApiException

from sparkpoint.runtime.spec import parse_duration, parse_spec

from .actions import Actions, EventFn
from .decisions.checkpoints import iso, only_trigger_bookkeeping
from .decisions.liveness import Liveness, NodeObs, answered, of_pod, poll_period, round_asks, unanswered
from .decisions.machine import DRAIN_GRACE, decide
from .decisions.model import (
    CheckpointResult,
    CreateAttempt,
    Emit,
    Observed,
    PodObs,
    PromoteStandby,
    TriggerCheckpoint,
)
from .decisions.observe import node_observation, pod_observation
from .decisions.pod_view import confirm_before_create, needs_direct_read, owned_pods, split_standbys
from .decisions.runtime_view import Answer, may_reuse
from .decisions.status import apply_conditions
from .decisions.status_model import Failure, JobStatus
from .decisions.step import running_spec
from .deletion import JobDeletion
from .kube import builders, hot_confine
from .kube.caches import SpecCache, fresher_body
from .kube.client import Kube
from .kube.resource import JobMeta, StreamingJob, parse_job
from .kube.status_writer import StatusWriter
from .liveness_poll import LivenessPoll, Target
from .metrics import OperatorMetrics
from .runtime_client import RuntimeApiError, RuntimeClient, base_url
from .store.facts import StoreFacts

log = logging.getLogger("sparkpoint.operator")
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


class Reconciler:
    def __init__(self, kube: Kube, client: RuntimeClient, metrics: OperatorMetrics, post_event: EventFn,
                 clock: Callable[[], float] = time.time, upgrade_timeout: float = 300.0,
                 job_service_account: str | None = None, driver_service_account: str | None = None,
                 ui_path_prefix: str | None = None, host_path_prefix: str | None = None,
                 store_own_identity: bool = False):
        self.kube, self.client, self.metrics, self.post_event, self.clock = kube, client, metrics, post_event, clock
        self.upgrade_timeout = upgrade_timeout
        self.host_path_prefix = host_path_prefix  # hostPath hot volumes only under it (hot_confine.py)
        self.store = StoreFacts(kube, clock, own_identity=store_own_identity)
        self._wake: dict[tuple[str, str], asyncio.Event] = {}
        self._writers: dict[tuple[str, str], StatusWriter] = {}
        self._answers: dict[tuple[str, str], Answer] = {}  # each job's last GET /status
        self._liveness: dict[tuple[str, str], Liveness] = {}  # whether the runtime answers (liveness.py)
        self._pod_doubt: dict[tuple[str, str], float | None] = {}  # pod_view: since when the index is doubted
        self._specs = SpecCache(parse_spec)
        self.actions = Actions(kube, client, metrics, post_event, self.store, self._writer,
                               job_service_account=job_service_account,
                               driver_service_account=driver_service_account, ui_path_prefix=ui_path_prefix)
        self.actions.note_liveness = self._note_liveness
        self.poll = LivenessPoll(client, clock, self._liveness, self._note_liveness)
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
                woken = await self.poll.wait(key, wake, stop, delay)  # polling the runtime meanwhile
        finally:
            if stop is not None:
                stop.cancel()
            for cache in (self._wake, self._writers, self._answers, self._pod_doubt, self._liveness,
                          self.poll.targets):
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
        pods, standbys = split_standbys(pods, own)
        current = next((p for p in pods if own.attempt and p.attempt == own.attempt), None)
        period = poll_period(parse_duration(spec.restart.lost_after))
        runtime, standby_runtime = await asyncio.gather(self._runtime_status(current, namespace, name, own, woken,
                                                                             period),
                                                        self._standby_status(standbys, spec, namespace, name))
        alive = of_pod(self._liveness.get((namespace, name)), current.name if current else None)
        node = await self._silent_node(current, alive)
        # The store of the spec the job runs: after a rollback the CR still holds the rejected spec, and
        # while a state change is refused the edited one, whose storage URL may differ (its listing would
        # mix another store into this one's history, and never show a drain's savepoint).
        cache = await self.store.facts(namespace, name, running_spec(spec, own.tracking), blind=runtime is None,
                                       expect=_expected_savepoints(own, runtime))
        obs = Observed(spec=spec, generation=job.meta.generation, status=own, pods=pods, now=self.clock(),
                       name=name, runtime=runtime, store_checkpoints=cache.checkpoints,
                       store_savepoints=cache.savepoints, upgrade_timeout=self.upgrade_timeout,
                       runtime_silent_since=alive.silent_since if alive else None,
                       runtime_unreachable_since=alive.unreachable_since if alive else None, node=node,
                       standbys=standbys, standby_runtime=standby_runtime)
        decision = decide(obs)
        if confirm_before_create(own, bool(decision.of(CreateAttempt) or decision.of(PromoteStandby)), direct):
            listed, listed_standbys = split_standbys(await self._listed_pods(namespace, name, job.meta.uid), own)
            if {p.name for p in listed + listed_standbys} != {p.name for p in pods + standbys}:
                decision = decide(dataclasses.replace(obs, pods=listed, standbys=listed_standbys))
        for trigger in decision.of(TriggerCheckpoint):
            self.metrics.trigger_lag.observe(max(0.0, trigger.lag))
            if not await self.actions.trigger(namespace, name, current, decision):
                self._answers.pop((namespace, name), None)  # the next round asks the runtime again
        writer.submit(job.stored_status, decision.status)
        if any(not isinstance(a, _NO_WAIT) for a in decision.actions) and not await writer.flush():
            raise StatusNotWritten(f"status of {namespace}/{name} not written; actions not taken")
        self._count_restarts(job.meta, own, decision.state)
        for action in decision.actions:
            await self.actions.act(action, job, decision, current)
        return decision.requeue_after

    async def _pods(self, namespace: str, name: str, uid: str, own: JobStatus,
                    indexed: list[PodObs] | None) -> tuple[list[PodObs], bool]:
        """(the index's view of the job's pods, or the API server's where pod_view says to check;
        whether it is the API server's). Either way only the pods this job owns (pod_view.owned_pods)."""
        key = (namespace, name)
        if indexed is not None:
            indexed = owned_pods(list(indexed), name, uid)
            read, self._pod_doubt[key] = needs_direct_read(own, split_standbys(indexed, own)[0], key in self._answers,
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
                              woken: bool, period: float = 5.0) -> dict[str, Any] | None:
        """The runtime's GET /status (None: not asked, or no answer); also aims the liveness poll at it."""
        key, now = (namespace, name), self.clock()
        if pod is None or not pod.ip or pod.deleting or pod.phase != "Running":
            self.poll.aim(key, None)
            return None
        url = base_url(pod.ip, builders.CONTROL_PORT, namespace, name)
        self.poll.aim(key, Target(pod.name, url, period))
        last = self._answers.get(key)
        if may_reuse(last, pod, status, woken, now):
            return last.doc
        if not round_asks(self._liveness.get(key), pod.name, period, now):
            return None  # timing out, and the poll asked within its period
        try:
            doc = await self.client.status(url)
        except RuntimeApiError as exc:
            self._answers.pop(key, None)
            self._note_liveness(key, pod.name, exc, now)
            return None
        self._answers[key] = Answer(pod.name, pod.restart_count, now, doc)
        self._note_liveness(key, pod.name, None, now)
        return doc

    async def _standby_status(self, standbys: list[PodObs], spec: Any, namespace: str,
                              name: str) -> dict[str, dict[str, Any]]:
        """GET /status of each running standby (spec.standby; decisions/standby.py judges the answers);
        one that does not answer is left out (not promoted)."""
        if spec.standby is None or not spec.standby.enabled:
            return {}
        live = [p for p in standbys if p.ip and not p.deleting and p.phase == "Running"]

        async def ask(pod: PodObs) -> tuple[str, dict[str, Any] | None]:
            try:
                return pod.name, await self.client.status(base_url(pod.ip, builders.CONTROL_PORT, namespace, name))
            except RuntimeApiError:
                return pod.name, None
        answers = await asyncio.gather(*(ask(p) for p in live))
        return {pod: doc for pod, doc in answers if doc is not None}

    def _note_liveness(self, key: tuple[str, str], pod: str, error: RuntimeApiError | None,
                       sent: float | None = None) -> None:
        """Any HTTP answer is the runtime seen alive; no answer starts (or continues) its silence, from
        `sent`, when the request went out (default: now)."""
        at = self.clock() if sent is None else sent
        if error is None or error.status is not None:
            self._liveness[key] = answered(pod, at)
        else:
            self._liveness[key] = unanswered(self._liveness.get(key), pod, at, error.unreachable)

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

    # --- deletion (the finalizer) ----------------------------------------------------------------------
    async def finalize(self, body: dict[str, Any]) -> None:
        """Drain the job, then gc.onDelete (deletion.py). Raises Draining while that must wait."""
        await self.deletion.finalize(body)
