"""Deleting a StreamingJob (kopf's finalizer): drain the job (its final checkpoint), then apply
gc.onDelete, then remove its directory from a shared hot volume. The decisions are finalize.py's
and hot_cleanup.py's (pure); this does their I/O. It always finishes: those modules say how.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Callable
from typing import Any

from kubernetes.client.rest import ApiException

from sparkpoint.runtime.spec import JobSpec
from sparkpoint.runtime.store import JobRef as StoreJob

from .decisions import finalize, hot_node
from .decisions.checkpoints import parse_time
from .decisions.observe import pod_observation
from .decisions.pod_view import owned_pods
from .decisions.status_model import Tracking
from .kube import builders, hot_cleanup
from .kube.client import Kube
from .kube.hot_confine import host_path_refusal
from .kube.refusals import refusal_message, refused
from .kube.resource import StreamingJob, parse_job
from .metrics import OperatorMetrics
from .runtime_client import RuntimeApiError, RuntimeClient, base_url
from .store import view as store_view
from .store.facts import StoreFacts

log = logging.getLogger("sparkpoint.operator")


class Draining(Exception):
    """Deletion must wait (pods still draining, data being deleted); kopf retries after `delay` seconds."""

    def __init__(self, message: str, delay: float = 3.0):
        super().__init__(message)
        self.delay = delay


class JobDeletion:
    def __init__(self, kube: Kube, store: StoreFacts, client: RuntimeClient, metrics: OperatorMetrics,
                 post_event: Callable[[dict[str, Any], str, str, str], None], clock: Callable[[], float] = time.time):
        self.kube, self.store, self.client, self.metrics = kube, store, client, metrics
        self.post_event, self.clock = post_event, clock
        self.host_path_prefix: str | None = None  # the Reconciler's (hot_confine.py)

    async def finalize(self, body: dict[str, Any]) -> None:
        """Drain the job (final checkpoint), then keep or delete its data per gc.onDelete (the
        decisions are finalize.py's). Raises Draining while pods remain or the data deletion is
        being retried; always finishes (finalize.py says how)."""
        job = parse_job(body)
        ns, name, tracking = job.meta.namespace, job.meta.name, job.status.tracking
        pods = owned_pods([pod_observation(p) for p in await self.kube.job_pods(ns, name)], name, job.meta.uid)
        now = self.clock()
        step = finalize.drain_pods(pods, tracking.delete_drain_at, now)
        for action in step.actions:
            if isinstance(action, finalize.DrainTo):
                pod = next(p for p in pods if p.name == action.pod)
                try:
                    await self.client.stop(base_url(pod.ip, builders.CONTROL_PORT, ns, name), None, True)
                except RuntimeApiError as exc:
                    self.post_event(body, "Warning", "StopFailed", str(exc))
            else:
                await self.kube.delete_pod(ns, name=action.name, force=action.force)
        if step.drain_started:
            await self.kube.patch_status(ns, name, {"tracking": Tracking(delete_drain_at=now).document()})
        if step.pods_left:
            raise Draining(f"waiting for {step.pods_left} pod(s) of {ns}/{name} to stop")
        if job.spec is not None and job.spec.gc.on_delete == "delete":
            await self.delete_job_data(job, job.spec, tracking.delete_data_since, now)
        # A hostPath the operator refuses never ran a pod, and its root must never be mounted by one.
        if hot_cleanup.needs_cleanup(job.spec) and not host_path_refusal(job.spec, self.host_path_prefix):
            await self.clean_hot_volume(job, now)
        self.metrics.job_phase(ns, name, None)
        self.store.forget_job((ns, name))

    async def delete_job_data(self, job: StreamingJob, spec: JobSpec, since: float | None, now: float) -> None:
        """gc.onDelete delete. Without its Secret (deleted first, as a namespace deletion does) the
        data cannot be deleted: say so and finish. A store that refuses is retried for
        finalize.DELETE_DATA_FOR, then the same."""
        ns, name = job.meta.namespace, job.meta.name
        where = f"{spec.checkpoint.storage.url if spec.checkpoint.storage else 'the pod-local store'} ({ns}/{name})"
        try:
            store = await self.store.open_store(ns, spec, deletes=True)
            if store is not None:
                count = await asyncio.to_thread(store_view.delete_checkpoints, store, StoreJob(ns, name))
                log.info("job data deleted (gc.onDelete delete)", extra={"job": f"{ns}/{name}", "objects": count})
            return
        except Exception as exc:  # noqa: BLE001 - the store's errors: retried, then given up on
            if isinstance(exc, store_view.SecretMissing):
                why = "its storage Secret is gone"
            elif not finalize.give_up_on_data(since, now):
                if since is None:
                    await self.kube.patch_status(ns, name, {"tracking": Tracking(delete_data_since=now).document()})
                raise Draining(f"deleting the data of {ns}/{name} failed ({type(exc).__name__}); retrying",
                               delay=15.0) from None
            else:
                why = f"the store refused for {finalize.DELETE_DATA_FOR:g}s ({type(exc).__name__})"
        message = f"gc.onDelete is delete, but {why}: the job's data was left in {where}"
        self.post_event(job.body, "Warning", "DataNotDeleted", message)
        log.warning(message, extra={"job": f"{ns}/{name}"})

    async def clean_hot_volume(self, job: StreamingJob, now: float) -> None:
        """Remove <namespace>/<job>/<uid> from checkpoint.hotVolume with a pod of the job's image
        (hot_cleanup.py). Raises Draining while it must wait; a cleanup that fails or times out
        leaves the directory with a Warning Event naming it."""
        ns, name, spec = job.meta.namespace, job.meta.name, job.spec
        assert spec is not None and spec.checkpoint.hot_volume is not None
        pod_name = hot_cleanup.cleanup_pod_name(job.meta.ref)
        pod = await self.kube.get_pod(ns, pod_name)
        phase = ((pod.get("status") or {}).get("phase") or "Pending") if pod is not None else None
        earlier = pod is not None and not hot_cleanup.created_for(pod, job.meta.uid)
        executors = len(await self.kube.executor_pods(ns, name)) if pod is None else 0
        since = parse_time((job.body.get("metadata") or {}).get("deletionTimestamp"))
        host_path = spec.checkpoint.hot_volume.host_path is not None
        step = hot_cleanup.cleanup_step(executors, phase, since, now, earlier,
                                        hot_cleanup.cleanup_exit_code(pod), host_path)
        if step.next == "create":
            try:
                await self.kube.create(hot_node.pinned(hot_cleanup.build_cleanup_pod(job.meta.ref, spec), spec,
                                                       job.status.hot_volume_node))
            except ApiException as exc:  # e.g. Pod Security refuses a hostPath: retrying will not change it
                if not refused(exc):
                    raise
                step = hot_cleanup.CleanupStep("give-up", f"the cleanup pod was refused ({refusal_message(exc)})")
        if step.next == "wait-earlier" and not (pod or {}).get("metadata", {}).get("deletionTimestamp"):
            await self.kube.delete_pod(ns, pod_name)  # its job is gone: the garbage collector's work, sooner
        if step.next in ("create", "wait", "wait-executors", "wait-earlier"):
            what = {"wait-executors": f"{executors} executor pod(s) to go",
                    "wait-earlier": "an earlier job's cleanup pod to go"}.get(step.next, "the cleanup pod")
            raise Draining(f"removing {ns}/{name}'s directory from its hot volume: waiting for {what}", delay=3.0)
        where = f"{ns}/{name}/{job.meta.uid} on {spec.checkpoint.hot_volume.describe()}"
        if step.next == "give-up":
            message = f"{step.why}: the job's work directory {where} was left"
            self.post_event(job.body, "Warning", "HotVolumeNotCleaned", message)
            log.warning(message, extra={"job": f"{ns}/{name}"})
        elif step.next == "absent":
            message = f"{step.why}: the job's work directory {where} was not removed"
            self.post_event(job.body, "Warning", "HotVolumeDirAbsent", message)
            log.warning(message, extra={"job": f"{ns}/{name}"})
        else:
            log.info("work directory removed from the hot volume", extra={"job": f"{ns}/{name}", "dir": where})
        if pod is not None:
            await self.kube.delete_pod(ns, pod_name)
