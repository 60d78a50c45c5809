"""The liveness poll (operator/liveness_poll.py, decisions/liveness.py; issue 43): between a job's rounds
the operator asks the runtime's /healthz whenever no request reached it for lostAfter/3, so a runtime
that hangs is seen silent within that period of its last answer, not at the next checkpoint trigger,
and is given up about lostAfter later. Against a real HTTP server process, frozen with SIGSTOP (what the
cgroup freezer does to a pod: the kernel still accepts the connection, nobody reads it).

Before this poll the operator asked only with its rounds (GET /status and the checkpoint triggers, one
interval apart), so test_a_frozen_runtime_is_seen_within_a_period_not_at_the_next_trigger fails there:
nothing asks during the 60 s until the next trigger."""

from __future__ import annotations

import asyncio
import os
import signal
import socket
import subprocess
import sys
import time

import pytest
from test_machine import T0, pod, running

from sparkpoint.operator.decisions.liveness import (
    answered,
    of_pod,
    poll_in,
    poll_period,
    round_asks,
    unanswered,
)
from sparkpoint.operator.decisions.machine import decide
from sparkpoint.operator.decisions.model import Emit, Observed
from sparkpoint.operator.decisions.status_model import parse_status
from sparkpoint.operator.liveness_poll import Target
from sparkpoint.operator.reconcile import Reconciler
from sparkpoint.operator.runtime_client import RuntimeClient
from sparkpoint.runtime.spec import parse_spec

LOST_AFTER = 6.0
SPEC = parse_spec({"job": {"entrypoint": "m:f"}, "checkpoint": {"interval": "60s"},
                   "restart": {"lostAfter": "6s"}})
KEY = ("ns", "job")
SERVER = """
import http.server, sys
class H(http.server.BaseHTTPRequestHandler):
    def do_GET(self):
        body = b'{"status": "ok", "phase": "running"}'
        self.send_response(200); self.send_header("Content-Length", str(len(body))); self.end_headers()
        self.wfile.write(body)
    def log_message(self, *a): pass
s = http.server.ThreadingHTTPServer(("127.0.0.1", int(sys.argv[1])), H)
print("up", flush=True)
s.serve_forever()
"""


def test_the_poll_period_is_a_third_of_lost_after_and_at_least_a_second() -> None:
    assert poll_period(15.0) == 5.0 and poll_period(6.0) == 2.0 and poll_period(2.0) == 1.0


def test_a_poll_is_due_a_period_after_the_newest_request_of_any_kind() -> None:
    assert poll_in(None, "job-1", 5.0, T0) == 0.0  # nothing known: now
    assert poll_in(answered("job-1"), "job-1", 5.0, T0) == 0.0  # an answer of unknown time
    assert poll_in(answered("job-1", T0 - 2), "job-1", 5.0, T0) == 3.0  # a trigger answered 2 s ago
    assert poll_in(answered("job-1", T0 - 2), "job-2", 5.0, T0) == 0.0  # another pod: now
    timed_out = unanswered(None, "job-1", T0 - 1, unreachable=True)
    assert poll_in(timed_out, "job-1", 5.0, T0) == 4.0 and timed_out.silent_since == T0 - 1  # since it was sent


def test_a_round_does_not_wait_out_another_timeout_while_the_poll_asks() -> None:
    timed_out = unanswered(answered("job-1", T0 - 10), "job-1", T0 - 3, unreachable=True)
    assert not round_asks(timed_out, "job-1", 5.0, T0)
    assert round_asks(timed_out, "job-1", 5.0, T0 + 2)  # no request for a period: the round asks itself
    refused = unanswered(None, "job-1", T0 - 1, unreachable=False)
    assert round_asks(refused, "job-1", 5.0, T0)  # refused at once: asking costs nothing
    assert round_asks(answered("job-1", T0), "job-1", 5.0, T0) and round_asks(None, "job-1", 5.0, T0)


class Client:
    def __init__(self) -> None:
        self.asked = 0

    async def status(self, base: str) -> dict:
        self.asked += 1
        return {"phase": "running"}


def test_the_round_skips_get_status_only_while_the_poll_keeps_asking() -> None:
    now = [T0]
    client = Client()
    rec = Reconciler(kube=None, client=client, metrics=None, post_event=None, clock=lambda: now[0])  # type: ignore[arg-type]
    status = running()
    rec._liveness[KEY] = unanswered(None, "job-1", T0 - 1, unreachable=True)

    async def scenario() -> None:
        assert await rec._runtime_status(pod(), *KEY, parse_status(status), woken=True, period=2.0) is None
        assert client.asked == 0 and rec.poll.targets[KEY].pod == "job-1"
        now[0] += 2
        assert await rec._runtime_status(pod(), *KEY, parse_status(status), woken=True, period=2.0) is not None
        assert client.asked == 1 and of_pod(rec._liveness[KEY], "job-1").silent_since is None
        await rec._runtime_status(pod(deleting=True), *KEY, parse_status(status), woken=True, period=2.0)
        assert KEY not in rec.poll.targets  # nothing to poll
    asyncio.run(scenario())


@pytest.fixture
def server():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    proc = subprocess.Popen([sys.executable, "-c", SERVER, str(port)], stdout=subprocess.PIPE)
    assert proc.stdout is not None and proc.stdout.readline().strip() == b"up"
    yield proc, f"http://127.0.0.1:{port}"
    os.kill(proc.pid, signal.SIGCONT)
    proc.kill()
    proc.wait()


def test_a_frozen_runtime_is_seen_within_a_period_not_at_the_next_trigger(server) -> None:
    proc, url = server
    period = poll_period(LOST_AFTER)
    rec = Reconciler(kube=None, client=RuntimeClient(timeout=5.0), metrics=None, post_event=None)  # type: ignore[arg-type]

    async def scenario() -> tuple[float, float, float]:
        try:
            rec.poll.aim(KEY, Target("job-1", url, period))
            rec._note_liveness(KEY, "job-1", None)  # the last round's answer
            assert not await rec.poll.wait(KEY, asyncio.Event(), None, period + 0.5)  # answered: no early round
            assert rec.poll.polls == 1 and of_pod(rec._liveness[KEY], "job-1").silent_since is None
            os.kill(proc.pid, signal.SIGSTOP)
            frozen = time.time()
            woken = await rec.poll.wait(KEY, asyncio.Event(), None, 60.0)  # the next trigger is 60 s away
            seen = time.time()
            assert woken  # the silence began: a round now, not in 60 s
            since = of_pod(rec._liveness[KEY], "job-1").unreachable_since
            assert since is not None
            os.kill(proc.pid, signal.SIGCONT)
            assert await rec.poll.wait(KEY, asyncio.Event(), None, 60.0)  # the silence ended: a round now
            assert of_pod(rec._liveness[KEY], "job-1").silent_since is None
            return frozen, since, seen
        finally:
            await rec.client.close()
    frozen, since, seen = asyncio.run(scenario())
    assert since - frozen <= period + 0.5  # the first unanswered poll went out within a period of the hang
    assert seen - frozen <= 2 * period + 1.0  # and timed out after at most another period
    # The round at since + lostAfter gives the attempt up: lostAfter + a period after the hang at most.
    d = decide(Observed(spec=SPEC, generation=1, status=running(), pods=[pod()], now=since + LOST_AFTER,
                        name="job", runtime_silent_since=since, runtime_unreachable_since=since))
    assert [a.reason for a in d.actions if isinstance(a, Emit)] == ["AttemptLost"]


def test_a_wake_up_ends_a_poll_in_flight_and_drops_its_outcome(server) -> None:
    proc, url = server
    rec = Reconciler(kube=None, client=RuntimeClient(timeout=5.0), metrics=None, post_event=None)  # type: ignore[arg-type]

    async def scenario() -> float:
        event = asyncio.Event()
        try:
            rec.poll.aim(KEY, Target("job-1", url, 3.0))
            os.kill(proc.pid, signal.SIGSTOP)
            wake = asyncio.get_running_loop().call_later(0.3, event.set)
            t0 = time.monotonic()
            assert await rec.poll.wait(KEY, event, None, 60.0)
            wake.cancel()
            assert KEY not in rec._liveness  # no outcome: the round asks itself
            return time.monotonic() - t0
        finally:
            await rec.client.close()
    assert asyncio.run(scenario()) < 2.0


def test_rounds_more_frequent_than_a_poll_can_time_out_do_not_drop_its_outcome(server) -> None:
    """Rounds every 0.5 s (as every 2 s while a trigger is followed) against a poll that times out after
    its 2 s period: the round waits for the poll, so the hang is still seen (a wake-up alone drops it)."""
    proc, url = server
    rec = Reconciler(kube=None, client=RuntimeClient(timeout=5.0), metrics=None, post_event=None)  # type: ignore[arg-type]

    async def scenario() -> float:
        try:
            rec.poll.aim(KEY, Target("job-1", url, 2.0))
            rec._note_liveness(KEY, "job-1", None)
            os.kill(proc.pid, signal.SIGSTOP)
            t0 = time.monotonic()
            while of_pod(rec._liveness.get(KEY), "job-1").silent_since is None:
                assert time.monotonic() - t0 < 10, "the hang was never seen"
                await rec.poll.wait(KEY, asyncio.Event(), None, 0.5)
            return time.monotonic() - t0
        finally:
            await rec.client.close()
    assert asyncio.run(scenario()) <= 2 * 2.0 + 1.0
