"""Checkpoint trigger scheduling with a fake clock: the machine is run as the operator runs it
(decide, apply the status, act), against a runtime stand-in that completes (or not) each trigger."""

from __future__ import annotations

from sparkpoint.operator.decisions.checkpoints import UNHEALTHY_INTERVALS, iso
from sparkpoint.operator.decisions.machine import decide, spec_key
from sparkpoint.operator.decisions.model import CheckpointResult, Emit, Observed, PodObs, TriggerCheckpoint
from sparkpoint.runtime.spec import parse_spec

T0 = 1_800_000_000.0
SPEC = parse_spec({"job": {"entrypoint": "m:f"}, "checkpoint": {"interval": "10s", "timeout": "30s"}})
POD = PodObs(name="job-1", attempt=1, phase="Running", ready=True, ip="10.0.0.1")


class FakeRuntime:
    """Answers GET /status; completes each triggered checkpoint `delay` seconds later unless broken."""

    def __init__(self, delay: float = 3.0):
        self.delay, self.broken = delay, False
        self.requests: list[dict] = []
        self.latest: dict | None = None

    def trigger(self, now: float) -> str:
        rid = f"req-{len(self.requests) + 1:06d}"
        self.requests.append({"requestId": rid, "id": None, "status": "uploading", "at": now})
        return rid

    def status(self, now: float) -> dict:
        for n, req in enumerate(self.requests, 1):
            if req["status"] == "uploading" and now - req["at"] >= self.delay:
                if self.broken:
                    req["status"] = "failed"
                    continue
                req.update(status="completed", id=f"chk-{n:06d}")
                self.latest = {"id": req["id"], "batchId": n, "completed": iso(now), "bytes": 1, "newBytes": 1}
        return {"phase": "running", "latestCheckpoint": self.latest,
                "recentCheckpoints": [dict(r) for r in self.requests[-10:]]}


def simulate(runtime: FakeRuntime, seconds: float, step: float = 1.0, status: dict | None = None, start=T0):
    status = status or {"phase": "Running", "attempt": 1, "pod": "job-1",
                        "tracking": {"runningSince": start, "podSeen": True, "podReady": True,
                                     "stableSpec": spec_key(SPEC)}}
    log = []
    now = start
    while now < start + seconds:
        d = decide(Observed(spec=SPEC, generation=1, status=status, pods=[POD], now=now, name="job",
                            runtime=runtime.status(now)))
        status = d.status
        for action in d.actions:
            if isinstance(action, TriggerCheckpoint):
                rid = runtime.trigger(now)
                status["tracking"]["pendingTrigger"]["id"] = rid  # what reconcile records after the POST
                log.append(("trigger", now, action.lag))
            elif isinstance(action, CheckpointResult):
                log.append((action.result, now))
            elif isinstance(action, Emit):
                log.append((action.reason, now))
        now += step
    return status, log


def test_triggers_every_interval_and_follows_each_to_completion():
    status, log = simulate(FakeRuntime(delay=3), 45)
    triggers = [t for kind, t, *_ in log if kind == "trigger"]
    assert [t - T0 for t in triggers] == [10, 20, 30, 40]
    assert [t - T0 for kind, t, *_ in log if kind == "completed"] == [13, 23, 33, 43]
    assert all(lag == 0 for kind, _, *rest in log if kind == "trigger" for lag in rest)
    assert status["latestCheckpoint"]["id"] == "chk-000004"
    assert status["tracking"]["checkpointHealthy"] is True


def test_one_trigger_at_a_time_while_a_checkpoint_is_slow():
    status, log = simulate(FakeRuntime(delay=25), 50)
    triggers = [t - T0 for kind, t, *_ in log if kind == "trigger"]
    assert triggers == [10, 35]  # the second waits for the first to finish (at 35)
    assert [t - T0 for kind, t, *_ in log if kind == "completed"] == [35]


def test_a_checkpoint_that_never_finishes_times_out():
    rt = FakeRuntime(delay=10_000)
    _, log = simulate(rt, 45)
    assert [t - T0 for kind, t, *_ in log if kind == "timed_out"] == [41]  # 30s timeout after t=10


def test_no_completed_checkpoint_for_n_intervals_turns_unhealthy_then_recovers():
    rt = FakeRuntime(delay=2)
    rt.broken = True
    status, log = simulate(rt, 60)
    unhealthy = [t - T0 for kind, t, *_ in log if kind == "CheckpointUnhealthy"]
    assert unhealthy == [UNHEALTHY_INTERVALS * 10 + 1]
    assert [c for c in status["conditions"] if c["type"] == "CheckpointHealthy"][0]["status"] == "False"
    rt.broken = False
    status, log = simulate(rt, 30, status=status, start=T0 + 60)
    assert [kind for kind, *_ in log if kind in ("CheckpointUnhealthy", "CheckpointHealthy")] == ["CheckpointHealthy"]
    assert [c for c in status["conditions"] if c["type"] == "CheckpointHealthy"][0]["status"] == "True"


def test_trigger_lag_is_reported_when_the_operator_was_away():
    rt = FakeRuntime(delay=1)
    # The operator's last trigger was 25 s ago (it was down): the next trigger is 15 s late.
    status = {"phase": "Running", "attempt": 1, "pod": "job-1",
              "tracking": {"runningSince": T0 - 100, "podSeen": True, "podReady": True,
                           "stableSpec": spec_key(SPEC), "lastTriggerAt": T0 - 25}}
    _, log = simulate(rt, 1, status=status)
    assert log[0][0] == "trigger" and log[0][2] == 15
