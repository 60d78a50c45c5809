"""spec.standby in the model's world (model_world.py): standby pods, their runtime's answers and the
promotion, as runtime/service/standby.py and actions.py behave.

A standby pod reads the job file of the ConfigMap as it is when the pod is created (the current attempt's
restore point), claims no fence and writes nothing until promoted; its runtime answers GET /status with
`standby` (lastRoundSecondsAgo, lastError: the rules make it lag or fail). POST /promote reaches it only
while its process runs and answers (not frozen, not deleted); a number other than its own is a 409, which
actions.py writes to status.tracking.standby.promoteRefused. Promoted, it claims the fence and restores
exactly as a new pod's start (the world's restore), and the test's check_create judges its restore point
as it judges every created attempt's.
"""

from __future__ import annotations

import copy
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from hypothesis import strategies as st
from hypothesis.stateful import initialize, rule

from sparkpoint.operator.decisions import model as m
from sparkpoint.operator.decisions.machine import spec_key
from sparkpoint.operator.decisions.step import point_tag

if TYPE_CHECKING:
    from model_world import World


@dataclass
class Standby:
    spec_key: str
    point: str | None  # the annotation: what the operator believes its job file holds
    rollback: bool = False  # created with the stable spec of a rollback (CreateStandby.spec)
    promoted: bool = False
    lag: float = 1.0  # lastRoundSecondsAgo
    error: str | None = None  # lastError

    def document(self) -> dict[str, Any]:
        return {"phase": "standby", "attempt": None, "standby": {
            "promoted": False, "checkpoint": None, "behindCheckpoints": 0, "lastRoundSecondsAgo": self.lag,
            "lastError": self.error}}


def standby_answers(w: World, standbys: list[m.PodObs]) -> dict[str, dict[str, Any]]:
    """reconcile._standby_status: GET /status of each running standby; silent ones left out."""
    out = {}
    for obs in standbys:
        pod = w.pods.get(obs.name)
        doc = w.runtime_doc(pod) if pod is not None and not obs.deleting and obs.phase == "Running" else None
        if doc is not None:
            out[obs.name] = doc
    return out


def create_standby(w: World, action: m.CreateStandby) -> None:
    from model_world import NAME, Pod  # (model_world imports this module)

    name = f"{NAME}-{action.attempt}-standby"
    if name in w.pods or w.refuse_creates:
        return  # 409 AlreadyExists; a refused create is an Event, the backoff tries again
    spec = action.spec or w.spec
    w.pods[name] = Pod(name, action.attempt, spec, w.config_point, spec.checkpoint.storage.url,
                       incarnation=w.incarnation,
                       standby=Standby(action.spec_key, action.point, rollback=action.spec is not None))


def promote(w: World, action: m.PromoteStandby) -> None:
    pod = w.pods.get(action.pod)
    if pod is None or pod.standby is None or pod.deleting or not pod.up or pod.frozen or pod.slow \
            or pod.phase != "Running":
        return  # no answer: the next round asks its runtime again
    if pod.standby.promoted:
        return  # 200: promoted already
    if pod.attempt != action.attempt:  # 409: recorded for the machine (actions.py _promote)
        refused = copy.deepcopy(w.status)
        track = refused.setdefault("tracking", {}).setdefault("standby", {})
        track["promoteRefused"] = {"attempt": action.attempt, "reason": "Conflict", "message": "another attempt"}
        w.write(refused)
        return
    if w.check_create:  # the point it restores must be the one the machine would give a new pod
        w.check_create(w, m.CreateAttempt(action.attempt, pod.restore_from, pod.spec if pod.standby.rollback else None),
                       pod.spec)
    pod.standby.promoted = True
    w.promotions += 1
    w.fence += 1
    pod.fence = w.fence
    w.spec_of_fence[w.fence] = spec_key(pod.spec)
    if w.user_point and point_tag(pod.restore_from) == w.user_point[0]:
        w.user_point = None
    w.drain_savepoint = None
    w.last_tag = point_tag(pod.restore_from)
    w.restored(pod)


class StandbyRules:
    """The MachineModel's rules about standbys (mixed into test_machine_model.MachineModel): the user
    turns spec.standby on and off, a standby's runtime lags or fails to read the store. Everything else
    that happens to pods (crash, delete, node lost, freeze and thaw) happens to standbys as well."""

    world: World

    @initialize(on=st.booleans())
    def job_with_a_standby(self, on: bool) -> None:
        """Half the runs start with spec.standby on (the edit rule turns it on and off later)."""
        if on:
            self.world.doc["standby"] = {"enabled": True}

    @rule(on=st.booleans(), max_lag=st.sampled_from(["10s", "60s"]))
    def edit_standby(self, on: bool, max_lag: str) -> None:
        self.world.edit(lambda d: d.update(standby={"enabled": on, "maxLag": max_lag}) if on
                        else d.pop("standby", None))

    @rule(i=st.integers(0, 1), lag=st.sampled_from([1.0, 45.0, 500.0]))
    def standby_lags(self, i: int, lag: float) -> None:
        """Its last look at the store ended `lag` seconds ago (a hung download, a starved process)."""
        if pod := self.standby(i):
            pod.standby.lag = lag

    @rule(i=st.integers(0, 1), fails=st.booleans())
    def standby_cannot_read_the_store(self, i: int, fails: bool) -> None:
        if pod := self.standby(i):
            pod.standby.error = "StoreError: 503 Slow Down" if fails else None

    def standby(self, i: int) -> Any:
        pods = sorted((p for p in self.world.pods.values() if p.following), key=lambda p: p.attempt)
        return pods[-1 - i % len(pods)] if pods else None
