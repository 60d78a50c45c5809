"""spec.standby's decisions (operator/decisions/standby.py): creating the standby, promoting it in place
of a new pod, falling back to a cold pod (gone, failing, stale, another spec or restore point), replacing
one that died with its own backoff, and the promotion followed until the runtime took it."""

from __future__ import annotations

from typing import Any

from sparkpoint.operator.decisions.machine import decide, spec_key
from sparkpoint.operator.decisions.model import (
    CreateAttempt,
    CreateStandby,
    DeletePod,
    Emit,
    Observed,
    PinCheckpoints,
    PodObs,
    PromoteStandby,
)
from sparkpoint.operator.decisions.pod_view import owned_pods, split_standbys
from sparkpoint.operator.decisions.standby import PROMOTION_FAILED
from sparkpoint.operator.decisions.status_model import parse_status
from sparkpoint.operator.decisions.step import DISRUPTIONS
from sparkpoint.runtime.spec import parse_spec

T0 = 1_800_000_000.0


def make_spec(**over: Any):
    doc = {"job": {"entrypoint": "m:f"}, "checkpoint": {"interval": "10s"}, "standby": {"enabled": True},
           "restart": {"maxRestarts": 3, "backoff": "10s", "maxBackoff": "40s"}} | over
    return parse_spec(doc)


SPEC = make_spec()
KEY = spec_key(SPEC)
RUNTIME = {"phase": "running", "recentCheckpoints": [], "latestCheckpoint": None}


def running(attempt: int = 1, **tracking: Any) -> dict[str, Any]:
    tr = {"runningSince": T0 - 5, "podSeen": True, "podReady": True, "stableSpec": KEY, "attemptSpec": KEY,
          "lastTriggerAt": T0 - 5} | tracking
    return {"phase": "Running", "attempt": attempt, "pod": f"job-{attempt}", "tracking": tr}


def pod(attempt: int = 1, **kw: Any) -> PodObs:
    base = {"phase": "Running", "ready": True, "ip": f"10.0.0.{attempt}", "owner_uid": "u"}
    return PodObs(name=f"job-{attempt}", attempt=attempt, **(base | kw))


def standby(attempt: int = 2, key: str = KEY, point: str | None = None, **kw: Any) -> PodObs:
    base = {"name": f"job-{attempt}-standby", "phase": "Running", "ready": False, "ip": "10.0.1.9", "owner_uid": "u"}
    return PodObs(attempt=attempt, standby_spec=key, standby_point=point, **(base | kw))


def following(lag: float = 1.0, error: str | None = None, promoted: bool = False) -> dict[str, Any]:
    return {"phase": "standby", "attempt": None, "standby": {
        "promoted": promoted, "checkpoint": "chk-000004", "behindCheckpoints": 0,
        "lastRoundSecondsAgo": lag, "lastError": error}}


def observe(status: dict[str, Any], pods: list[PodObs], standbys: list[PodObs] = (), answers=None, **kw) -> Observed:
    runtime = {s.name: following() for s in standbys} if answers is None else answers
    return Observed(**({"spec": SPEC, "generation": 1, "status": status, "pods": pods, "now": T0, "name": "job",
                        "runtime": RUNTIME, "standbys": list(standbys), "standby_runtime": runtime} | kw))


def events(d) -> dict[str, str]:
    return {a.reason: a.message for a in d.of(Emit)}


# --- keeping one --------------------------------------------------------------------------------------
def test_no_event_about_a_standby_when_there_never_was_one():
    """A job's first attempt (or one after an upgrade deleted the standby) had no standby to promote."""
    d = decide(observe({}, [], []))
    assert [a.attempt for a in d.of(CreateAttempt)] == [1] and "StandbyNotPromoted" not in events(d)


def test_a_running_attempt_gets_a_standby_for_the_next_attempt():
    d = decide(observe(running(), [pod()]))
    [create] = d.of(CreateStandby)
    assert (create.attempt, create.spec_key, create.point) == (2, KEY, None)
    assert d.status["tracking"]["standby"]["pod"] == "job-2-standby"
    assert d.status["standby"]["ready"] is False and "StandbyCreated" in events(d)


def test_no_standby_without_the_field_nor_while_pending_suspended_or_upgrading():
    assert not decide(observe(running(), [pod()], spec=make_spec(standby=None))).of(CreateStandby)
    assert not decide(observe(running() | {"phase": "Pending"}, [pod(ready=False)])).of(CreateStandby)
    suspended = decide(observe(running(), [pod()], [standby()], spec=make_spec(state="suspended")))
    assert not suspended.of(CreateStandby) and DeletePod("job-2-standby") in suspended.actions
    edited = make_spec(image="sparkpoint/runtime:other")
    upgrading = decide(observe(running(), [pod()], [standby()], spec=edited, generation=2))
    assert upgrading.status["phase"] == "Upgrading" and DeletePod("job-2-standby") in upgrading.actions
    assert not upgrading.of(CreateStandby)


def test_a_following_standby_is_kept_and_reported_ready():
    d = decide(observe(running(standby={"pod": "job-2-standby", "createdAt": T0 - 30}), [pod()], [standby()]))
    assert not d.of(CreateStandby) and not d.of(DeletePod)
    assert d.status["standby"] == {"pod": "job-2-standby", "attempt": 2, "ready": True, "checkpoint": "chk-000004",
                                   "behindCheckpoints": 0}
    cond = {c["type"]: c for c in d.status["conditions"]}["StandbyReady"]
    assert cond["status"] == "True"


def test_turning_standby_off_deletes_it_and_restarts_nothing():
    d = decide(observe(running(standby={"pod": "job-2-standby"}), [pod()], [standby()],
                       spec=make_spec(standby={"enabled": False}), generation=2))
    assert d.actions.count(DeletePod("job-2-standby")) == 1 and DeletePod("job-1") not in d.actions
    assert d.status["phase"] == "Running" and "standby" not in d.status
    assert "StandbyReady" not in {c["type"] for c in d.status["conditions"]}


def test_a_standby_of_another_spec_or_attempt_is_replaced():
    old = standby(key="0123456789abcdef")
    d = decide(observe(running(), [pod()], [old]))
    assert DeletePod(old.name) in d.actions
    assert not d.of(CreateStandby)  # (its name is still taken: the next round, once it is gone)


def test_a_standby_that_dies_is_replaced_after_its_own_backoff_without_spending_the_budget():
    st = running(standby={"pod": "job-2-standby", "createdAt": T0 - 30})
    d = decide(observe(st, [pod()], [standby(phase="Failed", exit_code=1)]))
    assert DeletePod("job-2-standby") in d.actions and "StandbyFailed" in events(d)
    track = d.status["tracking"]["standby"]
    assert track["failures"] == 1 and track["nextAt"] == T0 + 10
    assert d.status["restarts"] == 0 and d.status["phase"] == "Running"
    gone = dict(d.status, tracking=dict(d.status["tracking"]))
    assert not decide(observe(gone, [pod()], [], now=T0 + 5)).of(CreateStandby)  # backing off
    later = decide(observe(gone, [pod()], [], now=T0 + 11))
    assert [c.attempt for c in later.of(CreateStandby)] == [2]


def test_a_standby_deleted_behind_the_operators_back_counts_as_died():
    d = decide(observe(running(standby={"pod": "job-2-standby", "createdAt": T0 - 60}), [pod()], []))
    assert d.status["tracking"]["standby"]["failures"] == 1 and not d.of(CreateStandby)
    # one just created and not indexed yet (or refused) is not taken for dead within SEEN_WITHIN
    d = decide(observe(running(standby={"pod": "job-2-standby", "createdAt": T0 - 5}), [pod()], []))
    assert d.status["tracking"]["standby"].get("failures", 0) == 0


# --- the promotion --------------------------------------------------------------------------------------
def lost(standbys: list[PodObs], answers=None, **kw) -> Any:
    """Attempt 1's pod is deleted (a disruption: the next attempt at once) with these standbys."""
    st = running(standby={"pod": "job-2-standby", "createdAt": T0 - 60})
    return decide(observe(st, [pod(deleting=True, ready=False)], standbys, answers, runtime=None, **kw)), st


def test_a_lost_attempt_promotes_the_standby_instead_of_creating_a_pod():
    d, _ = lost([standby()])
    assert d.status["phase"] == "Recovering"  # the old pod must go first (never two attempts at once)
    st = d.status
    d = decide(observe(st, [], [standby()], runtime=None))
    assert d.of(PromoteStandby) == [PromoteStandby("job-2-standby", 2, "10.0.1.9")] and not d.of(CreateAttempt)
    assert d.status["attempt"] == 2 and d.status["pod"] == "job-2-standby" and d.status["phase"] == "Pending"
    assert d.status["restarts"] == 1 and d.status["lastFailure"]["reason"] == "PodDeleted"
    assert "StandbyPromoted" in events(d) and "AttemptCreated" in events(d)
    assert not d.of(CreateStandby) and "job-2-standby" not in {a.name for a in d.of(DeletePod)}


def test_the_promoted_standby_is_the_attempts_pod_from_then_on():
    st = parse_status({"attempt": 2, "pod": "job-2-standby", "phase": "Pending"})
    promoted, old = standby(), standby(attempt=3, name="job-3-standby")
    pods, standbys = split_standbys([promoted, old, pod(1, deleting=True)], st)
    assert [p.name for p in pods] == ["job-2-standby", "job-1"] and standbys == [old]
    cold = parse_status({"attempt": 2, "pod": "job-2", "phase": "Pending"})
    pods, standbys = split_standbys([promoted, pod(2)], cold)  # a cold pod of that attempt: the standby is stale
    assert [p.name for p in pods] == ["job-2"] and standbys == [promoted]
    assert [p.name for p in owned_pods([promoted, pod(2), standby(name="job-2-standbyx")], "job", "u")] == \
        ["job-2-standby", "job-2"]


def recovering_with(standbys: list[PodObs], answers=None, **kw):
    st = running(standby={"pod": "job-2-standby", "createdAt": T0 - 60}) | {"phase": "Recovering"}
    st["tracking"] |= {"nextAttemptAt": T0, "podSeen": None}
    return decide(observe(st, [], standbys, answers, runtime=None, **kw))


def test_without_a_healthy_standby_the_next_attempt_is_a_cold_pod_and_the_event_says_why():
    cases = {
        "no standby pod": ([], None),
        "is stale: its last look at the store ended 90s ago (standby.maxLag 60s)": (
            [standby()], {"job-2-standby": following(lag=90)}),
        "last look at the store failed: store unreachable": (
            [standby()], {"job-2-standby": following(error="store unreachable")}),
        "does not answer": ([standby()], {}),
        "runs the spec (and restartNonce) it was started with": ([standby(key="0123456789abcdef")], None),
        "has not looked at the store yet": ([standby()], {"job-2-standby": following(lag=None)}),
        "is not running (pod Pending)": ([standby(phase="Pending", ip=None)], None),
    }
    for why, (standbys, answers) in cases.items():
        d = recovering_with(standbys, answers)
        assert [a.attempt for a in d.of(CreateAttempt)] == [2] and not d.of(PromoteStandby), why
        assert d.status["pod"] == "job-2" and why in events(d)["StandbyNotPromoted"], (why, events(d))
        if standbys:
            assert DeletePod("job-2-standby") in d.actions, why


def test_a_standby_started_for_another_restore_point_is_not_promoted():
    """The next attempt would be given a point the standby's job file does not hold (a restore failure
    blamed its point): a cold pod, so every restore rule holds as for any new pod."""
    d = recovering_with([standby(point="savepoint:suspend-3")])
    assert d.of(CreateAttempt) and "restore from savepoint:suspend-3" in events(d)["StandbyNotPromoted"]


def test_the_gc_pins_follow_a_promotion():
    st = running(standby={"pod": "job-2-standby"}) | {"phase": "Recovering"}
    st["tracking"] |= {"nextAttemptAt": T0, "lineage": {"point": {"checkpoint": "chk-000004"}}}
    d = decide(observe(st, [], [standby(point="checkpoint:chk-000004")], runtime=None))
    assert d.of(PromoteStandby) and d.of(PinCheckpoints) == [PinCheckpoints(("chk-000004",))]


def test_the_promotion_is_sent_again_until_the_runtime_took_it():
    st = {"phase": "Pending", "attempt": 2, "pod": "job-2-standby", "tracking": {"attemptSpec": KEY, "podSeen": True}}
    promoted = standby()
    d = decide(observe(st, [promoted], [], runtime=following()))
    assert d.of(PromoteStandby) == [PromoteStandby("job-2-standby", 2, "10.0.1.9")]
    taken = {"phase": "restoring", "standby": following(promoted=True)["standby"]}
    assert not decide(observe(st, [promoted], [], runtime=taken)).of(PromoteStandby)


def test_a_refused_promotion_gives_the_attempt_up_for_a_cold_pod_without_spending_the_budget():
    st = {"phase": "Pending", "attempt": 2, "pod": "job-2-standby", "restarts": 1,
          "tracking": {"attemptSpec": KEY, "podSeen": True, "standby": {
              "promoteRefused": {"attempt": 2, "reason": "Conflict", "message": "the standby is stopping"}}}}
    d = decide(observe(st, [standby()], [], runtime=None))
    assert PROMOTION_FAILED in DISRUPTIONS and d.status["lastFailure"]["reason"] == PROMOTION_FAILED and d.status["phase"] == "Recovering"
    assert "the standby is stopping" in d.status["lastFailure"]["message"]
    assert DeletePod("job-2-standby") in d.actions and d.status["tracking"].get("restartTimes") is None
    st = d.status
    d = decide(observe(st, [], [], runtime=None))
    assert [a.attempt for a in d.of(CreateAttempt)] == [3] and d.status["pod"] == "job-3"


def test_a_standby_that_stays_unpromotable_is_replaced():
    """Frozen, stale or failing for twice standby.maxLag: as good as dead (it could never be promoted)."""
    st = running(standby={"pod": "job-2-standby", "createdAt": T0 - 300})
    silent = {}
    d = decide(observe(st, [pod()], [standby()], silent))
    assert not d.of(DeletePod) and d.status["tracking"]["standby"]["unhealthySince"] == T0
    d = decide(observe(d.status, [pod()], [standby()], silent, now=T0 + 121))
    assert DeletePod("job-2-standby") in d.actions and d.status["tracking"]["standby"]["failures"] == 1
    assert "does not answer for 121s" in events(d)["StandbyFailed"]
    healthy = decide(observe(st | {"tracking": st["tracking"] | {"standby": {"pod": "job-2-standby",
                                                                             "unhealthySince": T0 - 100}}},
                             [pod()], [standby()]))
    assert not healthy.of(DeletePod) and "unhealthySince" not in healthy.status["tracking"]["standby"]


def test_a_restart_nonce_restarts_into_new_processes_not_the_standby():
    """restartNonce asks for new processes (a changed Secret is read at start): a standby started
    before it is no new process. It is replaced, and the restart is a cold pod."""
    edited = make_spec(restartNonce=1)
    d = decide(observe(running(standby={"pod": "job-2-standby"}), [pod()], [standby()], spec=edited, generation=2))
    assert d.status["phase"] == "Recovering" and DeletePod("job-2-standby") in d.actions
    later = recovering_with([standby()], spec=edited)
    assert later.of(CreateAttempt) and not later.of(PromoteStandby)
    fresh = recovering_with([standby(key=f"{KEY}.1")], spec=edited)  # one started since: promoted
    assert fresh.of(PromoteStandby)


def test_a_standbys_restarts_before_its_promotion_are_not_the_attempts():
    d = recovering_with([standby(restart_count=4, last_exit_code=1)])
    assert d.of(PromoteStandby) and d.status["tracking"]["containerRestarts"] == 4
    promoted = decide(observe(d.status, [standby(restart_count=4, last_exit_code=1)], [], runtime=None))
    assert promoted.status.get("localRecoveries", 0) == 0 and promoted.status["restarts"] == d.status["restarts"]
