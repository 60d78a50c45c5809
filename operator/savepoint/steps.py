"""StreamingJobSavepoint: observe, ask savepoints.decide, act, record status and Events.

Built on the job path's parts: its Kube (API calls), StoreFacts (the store clients and Secrets, one
way to open a job's store), RuntimeClient (the control API with the job's token) and Event
posting. One lock per resource keeps the create/resume/timer handlers from acting at the same time,
so a savepoint is never triggered twice by racing handlers. Deletion holds a finalizer until the
savepoint's data is deleted (unless spec.retain, adopted, or still named by its job) or kept on
purpose.
"""

from __future__ import annotations

import asyncio
import time
from datetime import UTC, datetime
from typing import Any

import kopf

from sparkpoint.runtime.checkpoint import SavepointError
from sparkpoint.runtime.spec import SpecError, parse_duration
from sparkpoint.runtime.spec import parse_spec as parse_job_spec
from sparkpoint.runtime.store import JobRef, StoreError

from ..kube.client import Kube
from ..kube.events import post_event
from ..runtime_client import RuntimeApiError, RuntimeClient, base_url
from ..store import view as store_view
from ..store.facts import StoreFacts
from . import decide as sp
from . import store as sps
from .model import (
    COMPLETED,
    FAILED,
    TERMINAL,
    Condition,
    SavepointResourceError,
    SavepointStatus,
    StorageRef,
    parse_spec,
    parse_status,
    savepoint_name,
)

JOBS = "streamingjobs"
DEFAULT_CHECKPOINT_TIMEOUT = 600.0
# After this long, a deletion that cannot reach the store gives up, leaves the data and says so.
DELETE_GIVE_UP = 600.0


def now() -> datetime:
    return datetime.now(UTC)


class JobSeen:
    """The named StreamingJob: the decision's view of it, its store, and the savepoints it may still
    restore from."""

    def __init__(self, view: sp.JobView | None, storage: StorageRef | None, timeout: float,
                 named: set[str] | None = None):
        self.view, self.storage, self.timeout = view, storage, timeout
        self.named = named or set()


class SavepointSteps:
    def __init__(self, kube: Kube, store: StoreFacts, client: RuntimeClient):
        self.kube, self.store, self.client = kube, store, client
        self._locks: dict[tuple[str, str, str], asyncio.Lock] = {}
        self._not_before: dict[tuple[str, str, str], float] = {}
        # The status each resource was last given here. kopf applies a patch after the handler
        # returns, so the next step may still see the old body; acting on it could trigger twice.
        self._written: dict[tuple[str, str, str], SavepointStatus] = {}

    # --- observe ----------------------------------------------------------------------------------
    async def observe_job(self, namespace: str, name: str) -> JobSeen:
        body = await self.kube.get_job(namespace, name)
        if body is None:
            return JobSeen(None, None, DEFAULT_CHECKPOINT_TIMEOUT)
        try:
            spec = parse_job_spec(body.get("spec"))
            storage, timeout = store_view.storage_of(spec), parse_duration(spec.checkpoint.timeout)
        except SpecError:
            storage, timeout = None, DEFAULT_CHECKPOINT_TIMEOUT
        status = body.get("status") or {}
        pod_name, pod_ip = status.get("pod"), None
        if pod_name:
            pod = await self.kube.get_pod(namespace, pod_name)
            if pod is not None and (pod.get("status") or {}).get("phase") == "Running" \
                    and not pod["metadata"].get("deletionTimestamp"):
                pod_ip = pod["status"].get("podIP")
        return JobSeen(sp.JobView(status.get("phase"), pod_name, pod_ip, timeout), storage, timeout,
                       sp.savepoints_named(body.get("spec"), status))

    async def open(self, namespace: str, storage: StorageRef | None, deletes: bool = False) -> Any:
        if storage is None:
            raise store_view.StoreAccessError("the job has no spec.checkpoint.storage")
        return await self.store.open_storage(namespace, storage, deletes)

    async def runtime_answer(self, job: sp.JobView | None, status: SavepointStatus,
                             job_ref: JobRef) -> sp.RuntimeAnswer | None:
        if status.state != "InProgress" or not status.request_id or job is None or job.pod != status.pod \
                or not job.pod_ip:
            return None
        try:
            doc = await self.client.get_checkpoint(
                base_url(job.pod_ip, namespace=job_ref.namespace, job=job_ref.name), status.request_id)
        except RuntimeApiError as err:
            return sp.RuntimeAnswer("lost" if err.status == 404 else "unreachable")
        return sp.RuntimeAnswer(str(doc.get("status")), doc.get("error"))

    # --- one step ---------------------------------------------------------------------------------
    async def step(self, body: kopf.Body, patch: kopf.Patch, logger: Any, *, forced: bool) -> None:
        namespace, name = body.metadata.namespace, body.metadata.name
        key = (namespace, name, body.metadata.uid)  # a re-created resource of the same name starts afresh
        async with self._locks.setdefault(key, asyncio.Lock()):
            if not forced and time.monotonic() < self._not_before.get(key, 0.0):
                return
            before = self._written.get(key) or parse_status(body.get("status"))
            if before.state in TERMINAL:
                return
            try:
                spec = parse_spec(dict(body.spec))
                sp_name = savepoint_name(name, spec)
            except SavepointResourceError as err:
                record(body, patch, before, sp.Decision(sp.FAIL, FAILED, "InvalidSpec", str(err)))
                self._written[key] = before
                return
            job = await self.observe_job(namespace, spec.job_name)
            job_ref = JobRef(namespace, spec.job_name)
            storage = job.storage or before.storage
            stored, store_error, store = None, None, None
            try:
                store = await self.open(namespace, storage)
                stored = await asyncio.to_thread(sps.read_stored, store, job_ref, sp_name)
            except store_view.StoreAccessError as err:
                store_error = str(err)
            created = datetime.fromisoformat(body.metadata.creation_timestamp.replace("Z", "+00:00"))
            observed = sp.Observed(now=now(), created=created, status=before, job=job.view, stored=stored,
                                   store_error=store_error,
                                   runtime=await self.runtime_answer(job.view, before, job_ref))
            decision = sp.decide(observed)
            after = before.model_copy(deep=True)
            if storage is not None and store_error is None:
                after.storage = storage
            decision = await self.act(decision, after, job.view, store, job_ref, sp_name, stored)
            self._not_before[key] = time.monotonic() + decision.delay
            record(body, patch, after, decision, before=before, logger=logger)
            self._written[key] = after

    async def act(self, decision: sp.Decision, after: SavepointStatus, job: sp.JobView | None, store: Any,
                  job_ref: JobRef, name: str, stored: sp.Stored | None) -> sp.Decision:
        """Carry out the decision's side effect, filling `after`; returns the decision as it turned out."""
        if decision.action == sp.TRIGGER:
            try:
                doc = await self.client.trigger_savepoint(
                    base_url(job.pod_ip, namespace=job_ref.namespace, job=job_ref.name), name)
            except RuntimeApiError as err:  # refused (e.g. 409 not running yet) or unreachable: look again
                return sp.Decision(sp.WAIT, after.state, "TriggerRefused", str(err), sp.RETRY_LONG)
            after.request_id, after.pod = doc.get("requestId"), job.pod
            after.triggered_at = after.triggered_at or now().isoformat()  # the timeout counts from the first
            after.triggers += 1 if decision.extra.get("counted", True) else 0
        elif decision.action == sp.COPY_LATEST:
            try:
                stored = await asyncio.to_thread(sps.copy_latest, store, job_ref, name)
            except SavepointError as err:
                return sp.Decision(sp.FAIL, FAILED, "CopyFailed", str(err))
            except StoreError as err:
                return sp.Decision(sp.WAIT, after.state, "StoreUnavailable", str(err), sp.RETRY_LONG)
            decision = sp.Decision(sp.RECORD, COMPLETED, "SavepointCompleted", "copied the latest checkpoint")
        if decision.action == sp.RECORD and stored is not None:
            after.adopted = after.adopted or bool(decision.extra.get("adopted"))
            after.id, after.size_bytes, after.completed_at = name, stored.size_bytes, stored.completed_at
            after.checkpoint, after.error = stored.checkpoint, None
        return decision

    # --- deletion ---------------------------------------------------------------------------------
    async def delete(self, body: kopf.Body, logger: Any) -> None:
        namespace, name = body.metadata.namespace, body.metadata.name
        for memo in (self._locks, self._not_before, self._written):
            memo.pop((namespace, name, body.metadata.uid), None)
        try:
            spec = parse_spec(dict(body.spec))
            sp_name = savepoint_name(name, spec)
        except SavepointResourceError:
            return  # never valid, never triggered: no data of ours
        status = parse_status(body.get("status"))
        job = await self.observe_job(namespace, spec.job_name)
        in_use = sp_name in job.named
        verdict = sp.decide_delete(status, spec.retain, now(), job.timeout, in_use=in_use)
        if verdict == "keep":
            if status.state == COMPLETED:
                why = (f": StreamingJob {spec.job_name} may still restore from it (restoreFrom, lineage or a "
                       "pending restore)" if in_use and not spec.retain else
                       ": it existed before this resource (adopted)" if status.adopted and not spec.retain else "")
                post_event(body, "Normal" if spec.retain else "Warning", "DataRetained",
                           f"savepoint {sp_name} stays in the store{why}")
            return
        if verdict == "wait":
            raise kopf.TemporaryError("the savepoint is still being taken; deleting its data once it settles",
                                      delay=5)
        try:
            store = await self.open(namespace, status.storage, deletes=True)
            deleted = await asyncio.to_thread(sps.delete_data, store, JobRef(namespace, spec.job_name), sp_name)
        except (store_view.StoreAccessError, StoreError) as err:
            deleting_since = datetime.fromisoformat(body.metadata.deletion_timestamp.replace("Z", "+00:00"))
            if (now() - deleting_since).total_seconds() < DELETE_GIVE_UP:
                raise kopf.TemporaryError(f"cannot delete the savepoint's data yet: {err}", delay=15) from None
            post_event(body, "Warning", "DataLeft", f"gave up deleting savepoint {sp_name} from "
                                                       f"{status.storage.url}: {err}")
            return
        post_event(body, "Normal", "DataDeleted", f"deleted savepoint {sp_name} ({deleted} keys)")
        logger.info("deleted savepoint %s of %s/%s (%d keys)", sp_name, namespace, spec.job_name, deleted)


def record(body: kopf.Body, patch: kopf.Patch, after: SavepointStatus, decision: sp.Decision,
           before: SavepointStatus | None = None, logger: Any = None) -> None:
    before = before or SavepointStatus()
    after.state = decision.state
    if decision.action == sp.FAIL:
        after.error = decision.message
    if after.state in TERMINAL:
        after.observed_generation = body.metadata.get("generation")
    ready = after.state == COMPLETED
    old = next((c for c in before.conditions if c.type == "Ready"), None)
    message = decision.message or ("savepoint completed" if ready else after.state)
    flipped = old is None or (old.status == "True") != ready
    changed = flipped or old.reason != decision.reason  # worth an Event
    after.conditions = [c for c in after.conditions if c.type != "Ready"] + [Condition(
        type="Ready", status="True" if ready else "False", reason=decision.reason, message=message,
        observed_generation=body.metadata.get("generation"),
        last_transition_time=now().isoformat() if flipped else old.last_transition_time)]
    doc = after.model_dump(by_alias=True, mode="json")
    for field, value in doc.items():
        patch.status[field] = value  # None clears a field (merge patch)
    if changed and decision.reason != "Done":
        post_event(body, "Warning" if after.state == FAILED else "Normal", decision.reason, message)
        if logger is not None:
            logger.info("savepoint %s: %s (%s)", after.state, decision.reason, message)
