"""A round that only triggers the next checkpoint reuses the runtime's last GET /status answer
(operator/decisions/runtime_view.py), and its status bookkeeping waits to be written with the trigger's
completion (checkpoints.only_trigger_bookkeeping + StatusWriter's lazy changes): one GET and one
PATCH per checkpoint instead of two each. Run as reconcile runs the machine, with a fake clock."""

from __future__ import annotations

import asyncio
import dataclasses

import pytest

from sparkpoint.operator.decisions.checkpoints import iso, only_trigger_bookkeeping
from sparkpoint.operator.decisions.machine import decide, spec_key
from sparkpoint.operator.decisions.model import Observed, PodObs, TriggerCheckpoint
from sparkpoint.operator.decisions.runtime_view import REUSE_MAX_AGE, Answer, may_reuse
from sparkpoint.operator.decisions.status_model import parse_status
from sparkpoint.operator.kube.client import merge_patch
from sparkpoint.operator.reconcile import Reconciler
from sparkpoint.operator.runtime_client import RuntimeApiError
from sparkpoint.runtime.spec import parse_spec

T0 = 1_800_000_000.0
SPEC = parse_spec({"job": {"entrypoint": "m:f"}, "checkpoint": {"interval": "10s", "timeout": "30s"}})
POD = PodObs(name="job-1", attempt=1, phase="Running", ready=True, ip="10.0.0.1")
RUNNING = {"phase": "Running", "attempt": 1, "pod": "job-1",
           "tracking": {"runningSince": T0, "podSeen": True, "podReady": True, "stableSpec": spec_key(SPEC)}}
ANSWER = Answer(pod="job-1", restarts=0, at=T0, doc={"phase": "running"})


@pytest.mark.parametrize("change, reuse", [
    ({}, True),
    ({"woken": True}, False),  # a pod event or spec change: always ask
    ({"last": None}, False),
    ({"pod": dataclasses.replace(POD, name="job-2")}, False),  # another attempt's pod
    ({"pod": dataclasses.replace(POD, restart_count=1)}, False),  # the container restarted in place
    ({"pod": dataclasses.replace(POD, ready=False)}, False),
    ({"now": T0 + REUSE_MAX_AGE + 1}, False),
    ({"now": T0 - 5}, False),  # a clock that went back
    ({"status": {**RUNNING, "phase": "Upgrading"}}, False),
    ({"status": {**RUNNING, "tracking": {**RUNNING["tracking"], "pendingTrigger": {"at": T0}}}}, False),
    ({"status": {**RUNNING, "tracking": {**RUNNING["tracking"], "pendingSavepoint": {"name": "s", "at": T0, "tries": 1}}}}, False),
    ({"status": {**RUNNING, "tracking": {**RUNNING["tracking"], "drain": {"at": T0}}}}, False),
])
def test_when_the_last_answer_may_be_reused(change, reuse):
    args = {"last": ANSWER, "pod": POD, "status": RUNNING, "woken": False, "now": T0 + 8, **change}
    assert may_reuse(**args | {"status": parse_status(args["status"])}) is reuse


def test_only_trigger_bookkeeping_may_wait():
    assert only_trigger_bookkeeping({"tracking": {"lastTriggerAt": 1.0, "pendingTrigger": {"at": 1.0}}})
    assert not only_trigger_bookkeeping({"tracking": {"lastTriggerAt": 1.0, "podReady": False}})
    assert not only_trigger_bookkeeping({"tracking": {"lastTriggerAt": 1.0}, "phase": "Running"})
    assert not only_trigger_bookkeeping({"tracking": None})
    assert not only_trigger_bookkeeping({})


def test_a_checkpoint_costs_one_status_write_and_its_trigger_round_none():
    """Decide over two intervals with instant checkpoints: the trigger rounds' changes are only
    bookkeeping (deferred), the completion rounds' are not (written, with the bookkeeping)."""
    status, confirmed, latest, now = dict(RUNNING), dict(RUNNING), None, T0
    written, deferred, triggers = [], 0, 0
    while now < T0 + 25:
        runtime = {"phase": "running", "latestCheckpoint": latest, "recentCheckpoints": []}
        d = decide(Observed(spec=SPEC, generation=1, status=status, pods=[POD], now=now, name="job", runtime=runtime))
        if d.of(TriggerCheckpoint):
            triggers += 1
            d.status["tracking"]["pendingTrigger"]["id"] = f"req-{triggers}"  # as reconcile records it
            latest = {"id": f"chk-{triggers:06d}", "batchId": triggers, "completed": iso(now + 1), "bytes": 1,
                      "newBytes": 1}
        patch = merge_patch(confirmed, d.status)
        if patch and only_trigger_bookkeeping(patch):
            deferred += 1
        elif patch:
            written.append(patch)
            confirmed = d.status
        status, now = d.status, now + min(d.requeue_after, 10.0)
    assert triggers == 2 and deferred == 2
    completions = [p for p in written if "latestCheckpoint" in p]
    assert len(completions) == 2
    assert all("lastTriggerAt" in p["tracking"] for p in completions)  # the bookkeeping went along
    assert all("pendingTrigger" not in p["tracking"] for p in completions)  # never written at all


class Client:
    def __init__(self, fail: bool = False):
        self.asked, self.fail = 0, fail

    async def status(self, base: str) -> dict:
        self.asked += 1
        if self.fail:
            raise RuntimeApiError("connection refused")
        return {"phase": "running", "n": self.asked}


def test_the_reconciler_asks_again_after_a_wake_or_a_failure():
    now = [T0]
    client = Client()
    rec = Reconciler(kube=None, client=client, metrics=None, post_event=None, clock=lambda: now[0])

    async def scenario():
        first = await rec._runtime_status(POD, "ns", "job", parse_status(RUNNING), woken=True)
        now[0] += 8
        again = await rec._runtime_status(POD, "ns", "job", parse_status(RUNNING), woken=False)
        assert client.asked == 1 and again is first  # the trigger round reused it
        await rec._runtime_status(POD, "ns", "job", parse_status(RUNNING), woken=True)
        assert client.asked == 2
        client.fail = True
        assert await rec._runtime_status(POD, "ns", "job", parse_status(RUNNING), woken=True) is None
        client.fail = False
        await rec._runtime_status(POD, "ns", "job", parse_status(RUNNING), woken=False)
        assert client.asked == 4  # an unreachable runtime is never "remembered" as an answer
    asyncio.run(scenario())
