"""A running attempt given up as lost before Kubernetes evicts its pod (docs/design.md §11, "Lost
attempts"). Pure: reads the Step's observation, writes its status and actions.

Lost: for `spec.restart.lostAfter`, every request of the operator to the runtime timed out or found
no route (liveness.py: a frozen process, a node that stopped answering), or the runtime has not
answered at all while its node is not Ready. Refused connections alone are a runtime (re)starting. Then
the next attempt starts at once (a disruption: no backoff, no restart budget), without waiting for
the old pod to go: the new attempt claims the store's fence when it starts, and from then on the old
one can neither commit a checkpoint nor publish output (runtime/checkpoint/fence.py, check_fence in
writer.py's commit and in the sinks' publish), so two attempts may run but never two that commit.
The old pod is deleted; with grace 0 once its node is confirmed gone (the Node deleted, or not Ready
for lostAfter), since no kubelet would ever finish a graceful delete there.
"""

from __future__ import annotations

from sparkpoint.runtime.spec import parse_duration

from .model import DeletePod, PodObs
from .step import Step

REASON = "AttemptLost"
RECHECK = 1.0  # at least this long between requests to a silent runtime (each may take the client timeout)


def forget_gone_pods(run: Step) -> None:
    """tracking.lostPods names only pods that still exist."""
    lost = run.tr.lost_pods
    if lost:
        names = {p.name for p in run.obs.pods}
        run.tr.lost_pods = [n for n in lost if n in names] or None


def attempt_lost(run: Step, pod: PodObs) -> bool:
    obs, now = run.obs, run.now
    if obs.runtime_silent_since is None or pod.deleting:
        return False
    node = obs.node if obs.node is not None and obs.node.name == pod.node else None
    node_down = node is not None and node.not_ready()
    # Timeouts in a row, or any silence on a node that is not Ready. Refusals alone are a runtime
    # (re)starting, which the kubelet and local recovery handle.
    since = obs.runtime_silent_since if node_down else obs.runtime_unreachable_since
    if since is None:
        return False
    bound = parse_duration(run.spec.restart.lost_after)
    waited = now - since
    if waited < bound:
        run.requeue(max(RECHECK, min(bound - waited, bound / 3)))  # ask again before the bound ends
        return False
    gone = node is not None and node.gone(now, bound)
    why = "requests to it time out"
    if node is not None and node_down:
        why = f"node {node.name} is " + ("deleted" if not node.exists else "not Ready")
    run.tr.lost_pods = sorted({*(run.tr.lost_pods or []), pod.name})
    run.fail(REASON, f"the runtime of {pod.name} (attempt {run.attempt}) has not answered for {waited:.0f}s "
                     f"(restart.lostAfter {run.spec.restart.lost_after}); {why}. The next attempt starts now; "
                     "the store's fence keeps this one from committing")
    if gone:  # grace 0: no kubelet will confirm the pod's end
        run.d.actions = [DeletePod(a.name, force=True) if isinstance(a, DeletePod) and a.name == pod.name else a
                         for a in run.d.actions]
    return True
