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
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Liveness:
    pod: str  # the pod the requests went to (another pod starts afresh)
    silent_since: float | None = None  # the first unanswered request since the last answer
    unreachable_since: float | None = None  # the first of the timeouts in a row up to the newest request


def answered(pod: str) -> Liveness:
    return Liveness(pod)


def unanswered(last: Liveness | None, pod: str, now: float, unreachable: bool) -> Liveness:
    """A refusal ends a row of timeouts (the pod's network answered) but not the silence."""
    mine = last if last is not None and last.pod == pod else Liveness(pod)
    since = mine.silent_since if mine.silent_since is not None else now
    if not unreachable:
        return Liveness(pod, since)
    return Liveness(pod, since, mine.unreachable_since if mine.unreachable_since is not None else now)


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

