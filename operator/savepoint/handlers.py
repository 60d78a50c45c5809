"""kopf handlers of StreamingJobSavepoint: decorators only, each delegating to steps.py.

create/resume take a step at once; a short timer takes the following ones until the state is
terminal (Completed or Failed). The steps share the job path's Kube, StoreFacts and RuntimeClient
(memo, set up by handlers.startup); run alone (`kopf run -m sparkpoint.operator.savepoint.handlers`)
they make their own on first use.
"""

from __future__ import annotations

import time
from typing import Any

import kopf

from ..kube.client import Kube, load_config
from ..kube.control_token import ControlTokens, missing_is_none
from ..runtime_client import RuntimeClient
from ..store.facts import StoreFacts
from .model import API_GROUP, API_VERSION, PLURAL, TERMINAL
from .steps import SavepointSteps

STEP_INTERVAL = 2.0


def steps(memo: kopf.Memo) -> SavepointSteps:
    """The operator's shared parts when the job handlers are loaded, else this module's own."""
    if "savepoints" not in memo:
        kube = memo.get("kube") or Kube(load_config())
        client = memo.get("client")
        if client is None:
            client = memo.savepoint_client = RuntimeClient(timeout=5.0,
                                                           tokens=ControlTokens(missing_is_none(kube.secret_data)))
        store = memo.reconciler.store if "reconciler" in memo else StoreFacts(
            kube, time.time, own_identity=memo.get("store_own_identity", False))
        memo.savepoints = SavepointSteps(kube, store, client)
    return memo.savepoints


@kopf.on.create(API_GROUP, API_VERSION, PLURAL)
async def savepoint_created(body: kopf.Body, patch: kopf.Patch, logger: Any, memo: kopf.Memo, **_: Any) -> None:
    await steps(memo).step(body, patch, logger, forced=True)


@kopf.on.resume(API_GROUP, API_VERSION, PLURAL)
async def savepoint_resumed(body: kopf.Body, patch: kopf.Patch, logger: Any, memo: kopf.Memo, **_: Any) -> None:
    await steps(memo).step(body, patch, logger, forced=True)


@kopf.timer(API_GROUP, API_VERSION, PLURAL, interval=STEP_INTERVAL,
            when=lambda status, **_: (status or {}).get("state") not in TERMINAL)
async def savepoint_tick(body: kopf.Body, patch: kopf.Patch, logger: Any, memo: kopf.Memo, **_: Any) -> None:
    await steps(memo).step(body, patch, logger, forced=False)


@kopf.on.delete(API_GROUP, API_VERSION, PLURAL)
async def savepoint_deleted(body: kopf.Body, logger: Any, memo: kopf.Memo, **_: Any) -> None:
    await steps(memo).delete(body, logger)


@kopf.on.cleanup()
async def savepoint_cleanup(memo: kopf.Memo, **_: Any) -> None:
    if "savepoint_client" in memo:  # made here (run alone); the operator's own is closed by handlers
        await memo.savepoint_client.close()
