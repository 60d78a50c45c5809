"""Whether the current attempt's runtime is seen alive, as the operator's own requests to it say
(docs/design.md §11, "Lost attempts"). Pure: reconcile.py feeds it every GET /status and trigger
outcome and keeps the result in memory; the machine reads `silent_since` and `unreachable_since`.

Seen alive: any HTTP answer (an error status too: the process answered). Unreachable: a request
that timed out or found no route to the pod, which is what a frozen process (the kernel completes
the TCP handshake, nobody reads the request) and a node that stopped answering look like. A refused
connection is not: the pod's network answers and its runtime is (re)starting, which the kubelet and
local recovery handle. A runtime is silent from its first unanswered request after its last answer
(an answer ends that), unreachable from the first timeout of an unbroken row of them. After an
operator restart nothing is known until the first request: a lost attempt is then noticed one bound
later, never earlier.

The requests are the rounds' (GET /status, checkpoint triggers) and, between rounds, a liveness poll
(GET /healthz) whenever none reached the runtime for `poll_period(lostAfter)`: so a hang is first
seen unanswered at most a period after it began, whatever the checkpoint interval, and the silence
dates from when that request was sent, not from when its timeout ran out.
"""

from __future__ import annotations

from dataclasses import dataclass

POLL_SHARE = 3  # a liveness poll every lostAfter/3: a hang is seen within lostAfter * 4/3 (+ a round)
MIN_POLL = 1.0


@dataclass(frozen=True)
class Liveness:
    pod: str  # the pod the requests went to (another pod starts afresh)
    silent_since: float | None = None  # the first unanswered request since the last answer
    unreachable_since: float | None = None  # the first of the timeouts in a row up to the newest request
    asked_at: float | None = None  # when the newest request with a known outcome was sent (None: unknown)


def answered(pod: str, at: float | None = None) -> Liveness:
    return Liveness(pod, asked_at=at)


def unanswered(last: Liveness | None, pod: str, now: float, unreachable: bool) -> Liveness:
    """`now`: when the unanswered request was sent. A refusal ends a row of timeouts (the pod's network
    answered) but not the silence."""
    mine = last if last is not None and last.pod == pod else Liveness(pod)
    since = mine.silent_since if mine.silent_since is not None else now
    if not unreachable:
        return Liveness(pod, since, asked_at=now)
    return Liveness(pod, since, mine.unreachable_since if mine.unreachable_since is not None else now, asked_at=now)


def poll_period(lost_after: float) -> float:
    """How long the runtime may go without a request before the liveness poll asks it. Tied to
    lostAfter, not to the checkpoint interval: a third of the bound (at least 1 s), so that a runtime
    that hangs is given up at most lostAfter + a period after its last answer (plus the round that
    decides). Its cost is at most one GET /healthz per job per period, less while triggers and
    GET /status reach the runtime anyway."""
    return max(MIN_POLL, lost_after / POLL_SHARE)


def poll_in(last: Liveness | None, pod: str, period: float, now: float) -> float:
    """Seconds until `pod` is due a liveness poll: `period` after the newest request to it of any kind
    (0: now, nothing known of it)."""
    mine = of_pod(last, pod)
    if mine is None or mine.asked_at is None:
        return 0.0
    return max(0.0, mine.asked_at + period - now)


def round_asks(last: Liveness | None, pod: str, period: float, now: float) -> bool:
    """Whether a round asks the runtime (GET /status). Not while its requests time out and one was sent
    within `period`: the poll keeps asking, and a round waiting out one more timeout would only decide
    later (the answer that ends the silence wakes a round, which asks)."""
    mine = of_pod(last, pod)
    return mine is None or mine.unreachable_since is None or mine.asked_at is None or now - mine.asked_at >= period


def silent(last: Liveness | None, pod: str) -> bool:
    mine = of_pod(last, pod)
    return mine is not None and mine.silent_since is not None


def of_pod(last: Liveness | None, pod: str | None) -> Liveness | None:
    """What is known of `pod` (None: nothing yet, or the requests went to another pod)."""
    return last if last is not None and pod is not None and last.pod == pod else None


@dataclass(frozen=True)
class NodeObs:
    """The Node a silent attempt's pod runs on, as the API server has it (read only while silent)."""

    name: str
    exists: bool = True  # False: the Node object is deleted (the node is gone for good)
    ready: bool | None = None  # its Ready condition (None: Unknown, the node controller's "no heartbeat")
    ready_since: float | None = None  # lastTransitionTime of that condition (epoch seconds)

    def gone(self, now: float, bound: float) -> bool:
        """Confirmed gone: deleted, or not Ready for at least `bound` seconds (its kubelet will not
        finish the pod's deletion; a force delete is the only way the pod object goes)."""
        if not self.exists:
            return True
        return self.ready is not True and self.ready_since is not None and now - self.ready_since >= bound

    def not_ready(self) -> bool:
        return not self.exists or self.ready is not True

