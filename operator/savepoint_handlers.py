"""kopf handlers of StreamingJobSavepoint: observe, ask savepoints.decide, act, record status and Events.

create/resume take a step at once; a short timer takes the following ones until the state is
terminal (Completed or Failed). One lock per resource keeps the three from acting at the same time,
so a savepoint is never triggered twice by racing handlers. Deletion holds a finalizer until the
savepoint's data is deleted (unless spec.retain) or kept on purpose.
"""

from __future__ import annotations

import asyncio
import base64
import time
from datetime import UTC, datetime
from typing import Any

import kopf
from kubernetes import client, config
from kubernetes.client.rest import ApiException

from sparkpoint.operator import savepoint_store as sps
from sparkpoint.operator import savepoints as sp
from sparkpoint.operator.control_token import ControlTokens, missing_is_none
from sparkpoint.operator.runtime_client import RuntimeApiError, RuntimeClient, base_url
from sparkpoint.operator.savepoint_model import (
    API_GROUP,
    API_VERSION,
    COMPLETED,
    FAILED,
    PLURAL,
    TERMINAL,
    Condition,
    SavepointResourceError,
    SavepointStatus,
    parse_spec,
    parse_status,
    savepoint_name,
)
from sparkpoint.runtime.checkpoint.savepoint import SavepointError
from sparkpoint.runtime.config import SpecError, parse_duration
from sparkpoint.runtime.config import parse_spec as parse_job_spec
from sparkpoint.runtime.store import JobRef
from sparkpoint.runtime.store.base import StoreError

JOBS = "streamingjobs"
STEP_INTERVAL = 2.0
DEFAULT_CHECKPOINT_TIMEOUT = 600.0
# After this long, a deletion that cannot reach the store gives up, leaves the data and says so.
DELETE_GIVE_UP = 600.0


def post_event(body: Any, type_: str, reason: str, message: str) -> None:
    """An Event on the resource. kopf.info/kopf.warn obey settings.posting.level, which the operator
    raises to WARNING to keep kopf's own handler logs out of Events; kopf.event does not."""
    kopf.event(body, type=type_, reason=reason, message=message[:1000])

_locks: dict[tuple[str, str, str], asyncio.Lock] = {}
_not_before: dict[tuple[str, str, str], float] = {}
# The status each resource was last given here. kopf applies a patch after the handler returns, so
# the next step may still see the old body; acting on it could trigger the same savepoint twice.
_written: dict[tuple[str, str, str], SavepointStatus] = {}
_apis: tuple[client.CoreV1Api, client.CustomObjectsApi] | None = None
_runtime: RuntimeClient | None = None


def _kube() -> tuple[client.CoreV1Api, client.CustomObjectsApi]:
    global _apis
    if _apis is None:
        try:
            config.load_incluster_config()
        except config.ConfigException:
            config.load_kube_config()
        _apis = client.CoreV1Api(), client.CustomObjectsApi()
    return _apis


async def _secret_data(namespace: str, name: str) -> dict[str, str]:
    found = await asyncio.to_thread(_kube()[0].read_namespaced_secret, name, namespace)
    return {k: base64.b64decode(v).decode() for k, v in (found.data or {}).items()}


def _client() -> RuntimeClient:
    global _runtime
    if _runtime is None:
        _runtime = RuntimeClient(timeout=5.0, tokens=ControlTokens(missing_is_none(_secret_data)))
    return _runtime


async def _read(call, *args) -> Any | None:
    """A Kubernetes read, or None when the object does not exist."""
    try:
        return await asyncio.to_thread(call, *args)
    except ApiException as err:
        if err.status == 404:
            return None
        raise


class _Job:
    """The named StreamingJob: the decision's view of it, and its store (when it has one)."""

    def __init__(self, view: sp.JobView | None, storage: sps.StorageRef | None, timeout: float,
                 named: set[str] | None = None):
        self.view, self.storage, self.timeout = view, storage, timeout
        self.named = named or set()  # savepoints the job may still restore from


async def _observe_job(namespace: str, name: str) -> _Job:
    core, custom = _kube()
    body = await _read(custom.get_namespaced_custom_object, API_GROUP, API_VERSION, namespace, JOBS, name)
    if body is None:
        return _Job(None, None, DEFAULT_CHECKPOINT_TIMEOUT)
    try:
        spec = parse_job_spec(body.get("spec"))
        storage, timeout = sps.storage_of(spec), parse_duration(spec.checkpoint.timeout)
    except SpecError:
        storage, timeout = None, DEFAULT_CHECKPOINT_TIMEOUT
    status = body.get("status") or {}
    pod_name, pod_ip = status.get("pod"), None
    if pod_name:
        pod = await _read(core.read_namespaced_pod, pod_name, namespace)
        if pod is not None and pod.status.phase == "Running" and not pod.metadata.deletion_timestamp:
            pod_ip = pod.status.pod_ip
    return _Job(sp.JobView(status.get("phase"), pod_name, pod_ip, timeout), storage, timeout,
                sp.savepoints_named(body.get("spec"), status))


async def _open_store(namespace: str, storage: sps.StorageRef | None, deletes: bool = False):
    """`deletes`: with the job's spec.gc.secretRef credential when it has one (may delete)."""
    if storage is None:
        raise sps.StoreAccessError("the job has no spec.checkpoint.storage")
    secret: dict[str, str] = {}
    secret_name, field = storage.secret_name, "spec.checkpoint.storage.secretRef"
    if deletes and storage.gc_secret_name:
        secret_name, field = storage.gc_secret_name, "spec.gc.secretRef"
    if secret_name:
        found = await _read(_kube()[0].read_namespaced_secret, secret_name, namespace)
        if found is None:
            raise sps.StoreAccessError(f"Secret {secret_name!r} ({field}) not found")
        secret = sps.decode_secret(found.data)
    return sps.open_job_store(storage, secret)


async def _runtime_answer(job: sp.JobView | None, status: SavepointStatus,
                          job_ref: JobRef) -> sp.RuntimeAnswer | None:
    if status.state != "InProgress" or not status.request_id or job is None or job.pod != status.pod \
            or not job.pod_ip:
        return None
    try:
        doc = await _client().get_checkpoint(base_url(job.pod_ip, namespace=job_ref.namespace, job=job_ref.name),
                                             status.request_id)
    except RuntimeApiError as err:
        return sp.RuntimeAnswer("lost" if err.status == 404 else "unreachable")
    return sp.RuntimeAnswer(str(doc.get("status")), doc.get("error"))


def _now() -> datetime:
    return datetime.now(UTC)


async def _step(body: kopf.Body, patch: kopf.Patch, logger, *, forced: bool) -> None:
    namespace, name = body.metadata.namespace, body.metadata.name
    key = (namespace, name, body.metadata.uid)  # a re-created resource of the same name starts afresh
    lock = _locks.setdefault(key, asyncio.Lock())
    async with lock:
        if not forced and time.monotonic() < _not_before.get(key, 0.0):
            return
        before = _written.get(key) or parse_status(body.get("status"))
        if before.state in TERMINAL:
            return
        try:
            spec = parse_spec(dict(body.spec))
            sp_name = savepoint_name(name, spec)
        except SavepointResourceError as err:
            _record(body, patch, before, sp.Decision(sp.FAIL, FAILED, "InvalidSpec", str(err)))
            _written[key] = before
            return
        job = await _observe_job(namespace, spec.job_name)
        job_ref = JobRef(namespace, spec.job_name)
        storage = job.storage or before.storage
        stored, store_error, store = None, None, None
        try:
            store = await _open_store(namespace, storage)
            stored = await asyncio.to_thread(sps.read_stored, store, job_ref, sp_name)
        except sps.StoreAccessError as err:
            store_error = str(err)
        created = datetime.fromisoformat(body.metadata.creation_timestamp.replace("Z", "+00:00"))
        observed = sp.Observed(now=_now(), created=created, status=before, job=job.view, stored=stored,
                               store_error=store_error, runtime=await _runtime_answer(job.view, before, job_ref))
        decision = sp.decide(observed)
        after = before.model_copy(deep=True)
        if storage is not None and store_error is None:
            after.storage = storage
        decision = await _act(decision, after, job.view, store, job_ref, sp_name, stored)
        _not_before[key] = time.monotonic() + decision.delay
        _record(body, patch, after, decision, before=before, logger=logger)
        _written[key] = after


async def _act(decision: sp.Decision, after: SavepointStatus, job: sp.JobView | None, store, job_ref: JobRef,
               name: str, stored: sp.Stored | None) -> sp.Decision:
    """Carry out the decision's side effect, filling `after`; returns the decision as it turned out."""
    if decision.action == sp.TRIGGER:
        try:
            doc = await _client().trigger_savepoint(
                base_url(job.pod_ip, namespace=job_ref.namespace, job=job_ref.name), name)
        except RuntimeApiError as err:  # refused (e.g. 409 not running yet) or unreachable: look again
            return sp.Decision(sp.WAIT, after.state, "TriggerRefused", str(err), sp.RETRY_LONG)
        after.request_id, after.pod = doc.get("requestId"), job.pod
        after.triggered_at = after.triggered_at or _now().isoformat()  # the timeout counts from the first
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


def _record(body: kopf.Body, patch: kopf.Patch, after: SavepointStatus, decision: sp.Decision,
            before: SavepointStatus | None = None, logger=None) -> None:
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
        last_transition_time=_now().isoformat() if flipped else old.last_transition_time)]
    doc = after.model_dump(by_alias=True, mode="json")
    for field, value in doc.items():
        patch.status[field] = value  # None clears a field (merge patch)
    if changed and decision.reason != "Done":
        post_event(body, "Warning" if after.state == FAILED else "Normal", decision.reason, message)
        if logger is not None:
            logger.info("savepoint %s: %s (%s)", after.state, decision.reason, message)


@kopf.on.create(API_GROUP, API_VERSION, PLURAL)
async def savepoint_created(body, patch, logger, **_) -> None:
    await _step(body, patch, logger, forced=True)


@kopf.on.resume(API_GROUP, API_VERSION, PLURAL)
async def savepoint_resumed(body, patch, logger, **_) -> None:
    await _step(body, patch, logger, forced=True)


@kopf.timer(API_GROUP, API_VERSION, PLURAL, interval=STEP_INTERVAL,
            when=lambda status, **_: (status or {}).get("state") not in TERMINAL)
async def savepoint_tick(body, patch, logger, **_) -> None:
    await _step(body, patch, logger, forced=False)


@kopf.on.delete(API_GROUP, API_VERSION, PLURAL)
async def savepoint_deleted(body, logger, **_) -> None:
    namespace, name = body.metadata.namespace, body.metadata.name
    for memo in (_locks, _not_before, _written):
        memo.pop((namespace, name, body.metadata.uid), None)
    try:
        spec = parse_spec(dict(body.spec))
        sp_name = savepoint_name(name, spec)
    except SavepointResourceError:
        return  # never valid, never triggered: no data of ours
    status = parse_status(body.get("status"))
    job = await _observe_job(namespace, spec.job_name)
    in_use = sp_name in job.named
    verdict = sp.decide_delete(status, spec.retain, _now(), job.timeout, in_use=in_use)
    if verdict == "keep":
        if status.state == COMPLETED:
            why = (f": StreamingJob {spec.job_name} may still restore from it (restoreFrom, lineage or a pending "
                   "restore)" if in_use and not spec.retain else
                   ": it existed before this resource (adopted)" if status.adopted and not spec.retain else "")
            post_event(body, "Normal" if spec.retain else "Warning", "DataRetained",
                       f"savepoint {sp_name} stays in the store{why}")
        return
    if verdict == "wait":
        raise kopf.TemporaryError("the savepoint is still being taken; deleting its data once it settles",
                                  delay=5)
    try:
        store = await _open_store(namespace, status.storage, deletes=True)
        deleted = await asyncio.to_thread(sps.delete_data, store, JobRef(namespace, spec.job_name), sp_name)
    except (sps.StoreAccessError, StoreError) as err:
        deleting_since = datetime.fromisoformat(body.metadata.deletion_timestamp.replace("Z", "+00:00"))
        if (_now() - deleting_since).total_seconds() < DELETE_GIVE_UP:
            raise kopf.TemporaryError(f"cannot delete the savepoint's data yet: {err}", delay=15) from None
        post_event(body, "Warning", "DataLeft", f"gave up deleting savepoint {sp_name} from "
                                                   f"{status.storage.url}: {err}")
        return
    post_event(body, "Normal", "DataDeleted", f"deleted savepoint {sp_name} ({deleted} keys)")
    logger.info("deleted savepoint %s of %s/%s (%d keys)", sp_name, namespace, spec.job_name, deleted)


@kopf.on.cleanup()
async def _close_runtime_client(**_) -> None:
    if _runtime is not None:
        await _runtime.close()
