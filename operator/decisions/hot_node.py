"""A hostPath hot volume is one node's disk: what shares a job's directory on it runs on one node
(docs/design.md §9, "hostPath on several nodes"; issue 42, finding 3). Pure.

The first attempt pod of a job with `checkpoint.hotVolume.hostPath` goes wherever the scheduler
puts it; the node it ran on is recorded in `status.hotVolumeNode`, and every later attempt pod and
the finalizer's cleanup pod get a required node affinity to it (its executors follow their driver's
node through the executor pod template: runtime/spark/executors.py). Without it each attempt on
another node would start a fresh directory there and leave the old one behind for good, and the
cleanup pod would find nothing on whichever node it landed on.

The trade-off: the job cannot move. If that node is gone or cannot take the pod, the attempt pod
stays Pending; the operator says why in a Warning Event (HotVolumeNodeUnavailable), once per
attempt, and status.hotVolumeNode names the node. To move the job, delete the StreamingJob and create it again (it restores from
the store; the old node's directory stays until a job of the name runs there again).
"""

from __future__ import annotations

from typing import Any

from sparkpoint.runtime.spec import JobSpec, pinned_to_node

from .model import PodObs
from .step import Step


def on_host_path(spec: JobSpec | None) -> bool:
    hot = spec.checkpoint.hot_volume if spec is not None else None
    return hot is not None and hot.host_path is not None


def node_to_record(spec: JobSpec, recorded: str | None, pods: list[PodObs], current: PodObs | None) -> str | None:
    """The node to write into status.hotVolumeNode this round, or None to leave it as it is: once
    recorded it stays (a pod that ran elsewhere since, e.g. before an operator upgrade, does not move
    it); first the current attempt's node, else any pod's of the job that has been scheduled."""
    if recorded or not on_host_path(spec):
        return None
    placed = [p for p in ([current] if current else []) + pods if p and p.node]
    return placed[0].node if placed else None


def unavailable_message(node: str, pod: PodObs) -> str:
    return (f"pod {pod.name} cannot be scheduled ({pod.unschedulable}): it must run on node {node}, whose "
            f"hostPath holds the job's hot directory (status.hotVolumeNode). If that node is gone, delete "
            f"and re-create the StreamingJob: it restores from the store on any node")


def pin_hot_volume_node(run: Step) -> None:
    """Record the node (node_to_record); say once per attempt when its pod cannot go there."""
    node = node_to_record(run.spec, run.st.hot_volume_node, run.obs.pods, run.current)
    if node:
        run.st.hot_volume_node = node
    pod, recorded = run.current, run.st.hot_volume_node
    if not recorded or pod is None or not pod.unschedulable or not on_host_path(run.spec):
        return
    if run.tr.hot_node_reported != run.attempt:
        run.tr.hot_node_reported = run.attempt
        run.d.emit("Warning", "HotVolumeNodeUnavailable", unavailable_message(recorded, pod))


def pinned(pod: dict[str, Any], spec: JobSpec, node: str | None) -> dict[str, Any]:
    """An attempt or cleanup pod, pinned to the recorded node when the hot volume is a hostPath."""
    return pinned_to_node(pod, node) if node and on_host_path(spec) else pod
