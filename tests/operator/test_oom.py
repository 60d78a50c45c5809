"""Issue 28: a runtime container OOM-killed at its memory limit is a failure of the job: lastFailure
OOMKilled naming the limit, a Warning Event, a new attempt after the backoff, counted toward
maxRestarts; not a local recovery in place (where the same limit kills it again)."""

from __future__ import annotations

from typing import Any

import pytest

from sparkpoint.operator.decisions.machine import decide, spec_key
from sparkpoint.operator.decisions.model import CreateAttempt, DeletePod, Emit, Observed, PodObs
from sparkpoint.operator.decisions.observe import pod_observation
from sparkpoint.operator.decisions.oom import oom_kill_message
from sparkpoint.runtime.spec import parse_spec

T0 = 1_800_000_000.0
SPEC = parse_spec({"job": {"entrypoint": "m:f"}, "spark": {"resources": {"memory": "1Gi"}},
                   "restart": {"maxRestarts": 2, "backoff": "10s", "maxBackoff": "40s"}})
RUNTIME = {"phase": "running", "recentCheckpoints": [], "latestCheckpoint": None}


def running(**tracking: Any) -> dict[str, Any]:
    tr = {"runningSince": T0 - 5, "podSeen": True, "podReady": True, "stableSpec": spec_key(SPEC),
          "lastTriggerAt": T0 - 5} | tracking
    return {"phase": "Running", "attempt": 1, "pod": "job-1", "tracking": tr}


def oom_pod(**kw: Any) -> PodObs:
    base = {"phase": "Running", "ready": False, "ip": "10.0.0.1", "restart_count": 1, "last_exit_code": 1,
            "termination_reason": "OOMKilled"}
    return PodObs(name="job-1", attempt=1, **(base | kw))


def observe(status: dict[str, Any], pods: list[PodObs], **kw: Any) -> Observed:
    return Observed(**({"spec": SPEC, "generation": 1, "status": status, "pods": pods, "now": T0,
                        "name": "job", "runtime": RUNTIME} | kw))


def test_the_kubelet_reports_the_reason_of_the_newest_termination() -> None:
    def pod(state: dict, last: dict, restarts: int = 1) -> dict:
        return {"metadata": {"name": "job-1", "annotations": {"sparkpoint.dev/attempt": "1"}},
                "status": {"phase": "Running", "containerStatuses": [
                    {"name": "runtime", "restartCount": restarts, "state": state, "lastState": last}]}}
    oom = {"terminated": {"reason": "OOMKilled", "exitCode": 1}}
    error = {"terminated": {"reason": "Error", "exitCode": 2}}
    restarted = pod_observation(pod({"running": {}}, oom))
    assert restarted.termination_reason == "OOMKilled" and restarted.exit_code is None
    down_now = pod_observation(pod(oom, error, restarts=2))  # down now by the OOM, the error before it
    assert down_now.termination_reason == "OOMKilled" and down_now.exit_code == 1
    assert pod_observation(pod({"running": {}}, {}, restarts=0)).termination_reason is None


def test_an_oom_kill_in_place_starts_a_new_attempt_and_spends_budget() -> None:
    d = decide(observe(running(), [oom_pod()]))
    st = d.status
    assert st["phase"] == "Recovering" and st["restarts"] == 1 and not st.get("localRecoveries")
    assert st["lastFailure"]["reason"] == "OOMKilled"
    assert "runtime container of job-1 was OOM-killed at its memory limit 1Gi" in st["lastFailure"]["message"]
    assert "spec.spark.resources.memory" in st["lastFailure"]["message"]
    assert [(a.type, a.reason) for a in d.actions if isinstance(a, Emit)] == [("Warning", "OOMKilled")]
    assert [a.name for a in d.of(DeletePod)] == ["job-1"]
    assert st["tracking"]["nextAttemptAt"] == T0 + 10  # the backoff of a failure, not a disruption
    st["tracking"]["nextAttemptAt"] = T0 - 1
    (create,) = decide(observe(st, [], now=T0 + 11)).of(CreateAttempt)
    assert create.attempt == 2


def test_a_container_down_now_by_an_oom_kill_counts_too() -> None:
    d = decide(observe(running(), [oom_pod(restart_count=0, exit_code=137, last_exit_code=137)]))
    assert d.status["lastFailure"]["reason"] == "OOMKilled" and "exit 137" in d.status["lastFailure"]["message"]


def test_oom_kills_past_the_budget_fail_the_job() -> None:
    d = decide(observe(running(restartTimes=[T0 - 30, T0 - 20], failureStreak=2), [oom_pod()]))
    assert d.status["phase"] == "Failed"
    assert d.status["lastFailure"]["reason"] == "OOMKilled"
    assert "2 restarts within" in d.status["lastFailure"]["message"]


@pytest.mark.parametrize(("pod", "seen", "killed"), [
    (oom_pod(), 0, True),
    (oom_pod(), 1, False),  # a restart counted before (a local recovery of an older operator)
    (oom_pod(exit_code=137), 1, True),  # down now: always new
    (oom_pod(termination_reason="Error"), 0, False),
    (oom_pod(termination_reason=None, restart_count=0), 0, False),
])
def test_only_an_uncounted_oom_kill_is_reported(pod: PodObs, seen: int, killed: bool) -> None:
    assert (oom_kill_message(pod, seen, "1Gi") is not None) == killed


def test_any_other_in_place_restart_stays_a_local_recovery() -> None:
    d = decide(observe(running(), [oom_pod(termination_reason="Error", ready=True)]))
    assert d.status["phase"] == "Running" and d.status["localRecoveries"] == 1
    assert d.status["lastFailure"]["reason"] == "ContainerRestarted"


@pytest.mark.parametrize("reason, expected", [("OOMKilled", "OOMKilled"), ("Error", "DrainInterrupted")])
def test_a_runtime_that_dies_while_draining_ends_the_drain_at_once(reason: str, expected: str) -> None:
    """The kubelet restarts it in place, and the restarted runtime knows nothing of the stop request:
    waiting DRAIN_GRACE for a savepoint that never comes only delays the suspend (found by the model)."""
    suspending = running(drain={"at": T0 - 5, "restarts": 0}, restoreTarget="suspend-2") | {"phase": "Suspended"}
    spec = SPEC.model_copy(update={"state": "suspended"})
    quiet = decide(observe(suspending, [oom_pod(restart_count=0, termination_reason=None)], spec=spec, generation=2))
    assert not quiet.of(DeletePod)  # still draining: its grace has not run out
    d = decide(observe(suspending, [oom_pod(termination_reason=reason)], spec=spec, generation=2))
    assert [a.name for a in d.of(DeletePod)] == ["job-1"]
    failure = d.status["lastFailure"]
    assert failure["reason"] == expected and "while draining" in failure["message"]
    assert "the drain's savepoint suspend-2 was not taken" in failure["message"]
    assert [(a.type, a.reason) for a in d.actions if isinstance(a, Emit)] == [("Warning", expected)]
    assert d.status["restarts"] == 0  # the attempt was being retired: no budget spent
    again = decide(observe(d.status, [oom_pod(termination_reason=reason)], spec=spec, generation=2, now=T0 + 2))
    assert not [a for a in again.actions if isinstance(a, Emit)]  # said once


def test_an_oom_kill_no_round_saw_is_reported_when_a_suspend_begins() -> None:
    spec = SPEC.model_copy(update={"state": "suspended"})
    d = decide(observe(running(), [oom_pod(ready=True)], spec=spec, generation=2))
    assert d.status["phase"] == "Suspended" and d.status["lastFailure"]["reason"] == "OOMKilled"
    assert ("Warning", "OOMKilled") in [(a.type, a.reason) for a in d.actions if isinstance(a, Emit)]
    assert d.status["tracking"]["drain"]["restarts"] == 1  # the drain counts from the restarted runtime
    assert not d.status.get("localRecoveries")
