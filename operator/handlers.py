"""kopf handlers: decorators only, each delegating to reconcile.py.

One daemon per StreamingJob runs its observe-decide-act loop on kopf's live body of the CR and an
index of the job's pods (both fed by kopf's watches, so a round reads neither from the API server);
pod events and spec changes wake it early. Deletion runs through kopf's finalizer: drain, then
gc.onDelete.
"""

from __future__ import annotations

import asyncio
import logging
from typing import Any

import kopf

from sparkpoint.runtime.spec import API_GROUP, API_VERSION, SpecError, parse_spec

from .decisions.observe import pod_observation
from .deletion import Draining
from .kube import api_session, cluster_checks
from .kube.client import PLURAL, Kube, load_config
from .kube.control_token import ControlTokens, missing_is_none
from .kube.events import post_event
from .malloc import trim_every
from .metrics import OperatorMetrics, serve
from .reconcile import Reconciler
from .runtime_client import RuntimeClient

log = logging.getLogger("sparkpoint.operator")
FINALIZER = f"{API_GROUP}/finalizer"
MANAGED = {"app.kubernetes.io/managed-by": "sparkpoint-operator"}
RUNTIME_PODS = {**MANAGED, "app.kubernetes.io/component": "runtime"}


@kopf.on.login()
async def login(memo: kopf.Memo, **kwargs: Any) -> kopf.AiohttpSession | None:
    return await api_session.login(memo.get("namespaces"), **kwargs)


@kopf.on.startup()
async def startup(settings: kopf.OperatorSettings, memo: kopf.Memo, **_: Any) -> None:
    settings.persistence.finalizer = FINALIZER
    # kopf's own log lines ("Handler ... succeeded", one per pod change) are not posted as Events;
    # the operator posts its Events explicitly (kopf.event ignores this level).
    settings.posting.level = logging.WARNING
    memo.metrics = OperatorMetrics()
    api = load_config()
    kube = memo.kube = Kube(api)
    memo.client = RuntimeClient(timeout=5.0, tokens=ControlTokens(missing_is_none(kube.secret_data)))
    memo.reconciler = Reconciler(kube, memo.client, memo.metrics, post_event,
                                 upgrade_timeout=memo.get("upgrade_timeout", 300.0),
                                 job_service_account=memo.get("job_service_account"),
                                 driver_service_account=memo.get("driver_service_account"),
                                 ui_path_prefix=memo.get("ui_path_prefix"),
                                 host_path_prefix=memo.get("host_path_prefix"),
                                 store_own_identity=memo.get("store_own_identity", False))
    if not settings.peering.standalone and not await kube.ensure_peering(settings.peering.name,
                                                                          memo.get("namespaces")):
        log.warning("kopf peering CRDs are missing (kubectl apply -f crds/): a second replica would not "
                    "stand by but act at the same time")
    try:
        for warning in cluster_checks.warnings(await cluster_checks.discover(api)):
            log.warning(warning)
    except Exception as exc:  # noqa: BLE001 - a check that cannot run is itself worth a warning, not a crash
        log.warning("could not check the cluster's admission policy support", extra={"error": str(exc)})
    memo.http = await serve(memo.metrics, memo.get("metrics_port", 9100))
    memo.trimmer = asyncio.create_task(trim_every(), name="malloc-trim")
    log.info("operator started", extra={"metricsPort": memo.get("metrics_port", 9100)})


@kopf.on.cleanup()
async def cleanup(memo: kopf.Memo, **_: Any) -> None:
    memo.trimmer.cancel()
    await memo.client.close()
    await memo.http.cleanup()


@kopf.on.create(API_GROUP, API_VERSION, PLURAL)
@kopf.on.update(API_GROUP, API_VERSION, PLURAL, field="spec")
@kopf.on.resume(API_GROUP, API_VERSION, PLURAL)
def validate(spec: Any, namespace: str, name: str, memo: kopf.Memo, **_: Any) -> None:
    """Parse the spec once per change; an invalid one is a permanent error (the daemon records
    the failure, naming the field, in status)."""
    memo.reconciler.wake(namespace, name)
    try:
        parse_spec(dict(spec))
    except SpecError as exc:
        raise kopf.PermanentError(str(exc)) from None


@kopf.index("v1", "pods", labels=RUNTIME_PODS)
def job_pods(labels: Any, namespace: str, body: Any, **_: Any) -> dict[tuple[str, str], Any]:
    """(namespace, job) -> the job's pods, reduced to what decisions need (kopf fills every index
    before any handler or daemon runs, so a job never sees "no pods" just after a restart)."""
    job = labels.get(f"{API_GROUP}/job")
    return {(namespace, job): pod_observation(dict(body))} if job else {}


@kopf.daemon(API_GROUP, API_VERSION, PLURAL, cancellation_timeout=10.0)
async def job_loop(namespace: str, name: str, stopped: Any, body: Any, job_pods: kopf.Index,
                   memo: kopf.Memo, **_: Any) -> None:
    await memo.reconciler.run(namespace, name, stopped, body=body,
                              pods=lambda ns, job: job_pods.get((ns, job), ()))


@kopf.on.event("v1", "pods", labels=MANAGED)
def pod_changed(labels: Any, namespace: str, memo: kopf.Memo, **_: Any) -> None:
    job = labels.get(f"{API_GROUP}/job")
    if job and "reconciler" in memo:
        memo.reconciler.wake(namespace, job)


@kopf.on.delete(API_GROUP, API_VERSION, PLURAL)
async def job_deleted(body: Any, memo: kopf.Memo, **_: Any) -> None:
    try:
        await memo.reconciler.finalize(dict(body))
    except Draining as exc:
        raise kopf.TemporaryError(str(exc), delay=exc.delay) from None
