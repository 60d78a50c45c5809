"""Lost attempts (operator/lost_attempt.py, docs/design.md §11): a runtime that stopped answering is
given up after spec.restart.lostAfter, the next attempt starts without waiting for the old pod, and
the old pod is force-deleted only once its node is confirmed gone."""

from __future__ import annotations

import errno
from typing import Any

import pytest
from test_machine import KEY, RUNTIME, T0, describe, pod, running

from sparkpoint.operator.decisions.liveness import NodeObs, answered, of_pod, unanswered
from sparkpoint.operator.decisions.machine import decide
from sparkpoint.operator.decisions.model import Emit, Observed
from sparkpoint.operator.decisions.observe import node_observation
from sparkpoint.operator.runtime_client import _unreachable
from sparkpoint.runtime.spec import SpecError, parse_spec

SPEC = parse_spec({"job": {"entrypoint": "m:f"}, "checkpoint": {"interval": "10s"},
                   "restart": {"maxRestarts": 3, "backoff": "10s", "maxBackoff": "40s"}})


def observe(status: dict[str, Any], pods: list, silent: float | None, unreachable: bool = True,
            node: NodeObs | None = None, runtime: dict | None = None) -> Observed:
    """`unreachable`: the silence is all timeouts (else all refusals)."""
    return Observed(spec=SPEC, generation=1, status=status, pods=pods, now=T0, name="job", runtime=runtime,
                    runtime_silent_since=silent, runtime_unreachable_since=silent if unreachable else None,
                    node=node)


def summary(obs: Observed) -> tuple[str | None, list[str], list[str]]:
    d = decide(obs)
    return (d.status.get("phase"), [s for s in map(describe, d.actions) if s],
            [a.reason for a in d.actions if isinstance(a, Emit)])


def test_the_default_bound_is_15s_and_at_least_5s() -> None:
    assert SPEC.restart.lost_after == "15s"
    with pytest.raises(SpecError, match=r"spec\.restart\.lostAfter"):
        parse_spec({"job": {"entrypoint": "m:f"}, "restart": {"lostAfter": "2s"}})


NODE = "node-a"
ON_NODE = {"node": NODE}


@pytest.mark.parametrize("silent, unreachable, node, phase, actions", [
    # answers (or nothing known): running on
    (None, False, None, "Running", ["trigger"]),
    # silent, timing out, within the bound: keep asking, no action against it
    (T0 - 10, True, None, "Running", ["trigger"]),
    # refused for longer than the bound: (re)starting, the kubelet's business, not lost
    (T0 - 60, False, NodeObs(NODE, ready=True), "Running", ["trigger"]),
    (T0 - 60, False, None, "Running", ["trigger"]),
    # timing out past the bound: lost, the pod deleted gracefully (its kubelet may still finish it)
    (T0 - 15, True, NodeObs(NODE, ready=True), "Recovering", ["delete:job-1"]),
    (T0 - 15, True, None, "Recovering", ["delete:job-1"]),
    # refused, but the node is NotReady: lost; NotReady for less than the bound: no force
    (T0 - 20, False, NodeObs(NODE, ready=None, ready_since=T0 - 10), "Recovering", ["delete:job-1"]),
    # the node NotReady past the bound, or deleted: confirmed gone, grace 0
    (T0 - 20, True, NodeObs(NODE, ready=False, ready_since=T0 - 30), "Recovering", ["delete!:job-1"]),
    (T0 - 20, True, NodeObs(NODE, exists=False), "Recovering", ["delete!:job-1"]),
])
def test_a_silent_runtime_is_lost_only_past_the_bound_with_evidence(silent, unreachable, node, phase,
                                                                     actions) -> None:
    ph, acts, events = summary(observe(running(), [pod(**ON_NODE)], silent, unreachable, node,
                                       runtime=RUNTIME if silent is None else None))
    assert (ph, [a for a in acts if a != "trigger"]) == (phase, [a for a in actions if a != "trigger"])
    if phase == "Recovering":
        assert events == ["AttemptLost"]


def test_a_lost_attempt_spends_no_budget_and_the_next_one_starts_beside_the_terminating_pod() -> None:
    d = decide(observe(running(), [pod(**ON_NODE)], T0 - 16))
    st = d.status
    assert st["lastFailure"]["reason"] == "AttemptLost" and "lostAfter 15s" in st["lastFailure"]["message"]
    assert st["restarts"] == 1 and not st["tracking"].get("restartTimes") and st["tracking"]["lostPods"] == ["job-1"]
    # next round: the old pod is Terminating (frozen: its kubelet waits out the grace period)
    terminating = pod(deleting=True, ready=False, deleting_since=T0, **ON_NODE)
    again = Observed(spec=SPEC, generation=1, status=st, pods=[terminating], now=T0 + 1, name="job")
    d2 = decide(again)
    assert [s for s in map(describe, d2.actions) if s] == ["create:2"]
    assert d2.status["phase"] == "Pending" and d2.status["attempt"] == 2
    # the attempt after: the lost pod stays listed until it goes, and never blocks or is recreated
    d3 = decide(Observed(spec=SPEC, generation=1, status=d2.status,
                         pods=[terminating, pod(2, ready=False, phase="Pending", ip=None)], now=T0 + 2, name="job"))
    assert not [s for s in map(describe, d3.actions) if s and s.startswith("create")]
    assert d3.status["tracking"]["lostPods"] == ["job-1"]
    gone = decide(Observed(spec=SPEC, generation=1, status=d3.status, pods=[pod(2)], now=T0 + 3, name="job"))
    assert "lostPods" not in gone.status["tracking"]


def test_a_deleted_pod_that_was_not_given_up_still_holds_up_the_next_attempt() -> None:
    st = running() | {"phase": "Recovering", "tracking": running()["tracking"] | {"nextAttemptAt": T0 - 1}}
    d = decide(Observed(spec=SPEC, generation=1, status=st, pods=[pod(deleting=True, deleting_since=T0)],
                        now=T0, name="job"))
    assert not [a for a in map(describe, d.actions) if a and a.startswith("create")]


def test_liveness_bookkeeping() -> None:
    first = unanswered(None, "job-1", T0, unreachable=True)
    assert (first.silent_since, first.unreachable_since) == (T0, T0)
    assert unanswered(first, "job-1", T0 + 3, unreachable=True).unreachable_since == T0  # a row of timeouts
    later = unanswered(first, "job-1", T0 + 5, unreachable=False)
    assert (later.silent_since, later.unreachable_since) == (T0, None)  # a refusal ends the row, not the silence
    assert unanswered(later, "job-1", T0 + 7, True).unreachable_since == T0 + 7
    assert unanswered(later, "job-2", T0 + 6, True).silent_since == T0 + 6  # another pod: afresh
    assert answered("job-1").silent_since is None
    assert of_pod(later, "job-2") is None and of_pod(later, "job-1") is later


def test_unreachable_is_a_timeout_or_no_route_not_a_refusal() -> None:
    assert _unreachable(TimeoutError())
    assert _unreachable(OSError(errno.EHOSTUNREACH, "no route"))
    assert not _unreachable(ConnectionRefusedError(errno.ECONNREFUSED, "refused"))


def test_node_observation() -> None:
    assert node_observation("n", None) == NodeObs("n", exists=False)
    ready = {"status": {"conditions": [{"type": "Ready", "status": "Unknown",
                                        "lastTransitionTime": "2027-01-15T08:00:00Z"}]}}
    obs = node_observation("n", ready)
    assert obs.ready is None and obs.not_ready() and obs.ready_since is not None
    assert obs.gone(obs.ready_since + 15, 15) and not obs.gone(obs.ready_since + 14, 15)
    assert not NodeObs("n", ready=True, ready_since=0).gone(100, 15)


def test_key_is_unchanged_by_the_field() -> None:
    """restart is no upgrade: a new lostAfter needs no new pod."""
    edited = parse_spec(SPEC.model_dump(by_alias=True, mode="json") | {"restart": {"lostAfter": "40s"}})
    from sparkpoint.operator.decisions.machine import spec_key
    assert spec_key(edited) == KEY
