"""A hostPath hot volume on a cluster of several nodes (issue 42, finding 3): the node of the job's
first attempt pod is recorded, and every later attempt pod, its executors and the cleanup pod are
pinned there; a pod that cannot go there is reported. Pure, plus the machine's decision."""

from __future__ import annotations

import dataclasses
import json

import pytest

from sparkpoint.operator.decisions import hot_node
from sparkpoint.operator.decisions.machine import decide
from sparkpoint.operator.decisions.model import Emit, Observed, PodObs
from sparkpoint.operator.decisions.observe import pod_observation
from sparkpoint.operator.decisions.status_model import JobStatus, parse_status
from sparkpoint.operator.kube import builders
from sparkpoint.operator.kube.hot_cleanup import build_cleanup_pod
from sparkpoint.runtime.spark import executors
from sparkpoint.runtime.spec import job as config

JOB = builders.JobRef("team", "clicks", "6f1c2d3e-0000-4000-8000-00000000abcd")
BASE = {"image": "sparkpoint:1", "job": {"entrypoint": "m:build"},
        "spark": {"master": "k8s", "executors": {"instances": 2}}}
HOST_PATH = config.parse_spec({**BASE, "checkpoint": {"hotVolume": {"hostPath": {"path": "/srv/hot"}}}})
CLAIM = config.parse_spec({**BASE, "checkpoint": {"hotVolume": {"persistentVolumeClaim": {"claimName": "hot"}}}})
ON_B = {"key": "metadata.name", "operator": "In", "values": ["node-b"]}


def terms(pod: dict) -> list:
    return pod["spec"]["affinity"]["nodeAffinity"]["requiredDuringSchedulingIgnoredDuringExecution"]["nodeSelectorTerms"]


def running(attempt: int, node: str | None = "node-b", **kw) -> PodObs:
    return PodObs(name=f"clicks-{attempt}", attempt=attempt, phase="Running", ready=True, ip="10.0.0.9",
                  node=node, owner_uid=JOB.uid, **kw)


def observed(spec, status: JobStatus, pods: list[PodObs]) -> Observed:
    return Observed(spec=spec, generation=1, status=status, pods=pods, now=1000.0, name="clicks")


@pytest.mark.parametrize("spec, recorded, pods, current, expected", [
    (HOST_PATH, None, [running(1)], running(1), "node-b"),  # the first attempt pod's node
    (HOST_PATH, "node-a", [running(2)], running(2), None),  # once recorded it stays
    (HOST_PATH, None, [running(1, node=None)], running(1, node=None), None),  # not scheduled yet
    (CLAIM, None, [running(1)], running(1), None),  # a claim reaches every node: nothing to pin
    (HOST_PATH, None, [running(1, node="node-c")], None, "node-c"),  # any scheduled pod of the job
])
def test_which_node_is_recorded(spec, recorded, pods, current, expected) -> None:
    assert hot_node.node_to_record(spec, recorded, pods, current) == expected


def test_the_machine_records_the_first_attempts_node_in_the_status() -> None:
    """Before: nothing recorded where the job's directory is; each attempt could land on another node."""
    status = parse_status({"phase": "Running", "attempt": 1, "pod": "clicks-1",
                           "tracking": {"podSeen": True, "podReady": True}})
    decision = decide(observed(HOST_PATH, status, [running(1)]))
    assert decision.status["hotVolumeNode"] == "node-b"
    again = decide(observed(HOST_PATH, parse_status(decision.status), [running(1, node="node-c")]))
    assert again.status["hotVolumeNode"] == "node-b"
    assert "hotVolumeNode" not in decide(observed(CLAIM, status, [running(1)])).status


def test_a_pod_that_cannot_go_to_the_node_is_reported_once_per_attempt() -> None:
    status = parse_status({"phase": "Pending", "attempt": 2, "pod": "clicks-2", "hotVolumeNode": "node-b",
                           "tracking": {"podSeen": True}})
    stuck = running(2, node=None, unschedulable="0/2 nodes are available: 1 node(s) didn't match affinity")
    stuck = dataclasses.replace(stuck, phase="Pending", ready=False, ip=None)
    decision = decide(observed(HOST_PATH, status, [stuck]))
    events = [e for e in decision.of(Emit) if e.reason == "HotVolumeNodeUnavailable"]
    assert len(events) == 1 and events[0].type == "Warning"
    assert "node-b" in events[0].message and "re-create" in events[0].message
    later = decide(observed(HOST_PATH, parse_status(decision.status), [stuck]))
    assert not [e for e in later.of(Emit) if e.reason == "HotVolumeNodeUnavailable"]


def test_attempt_and_cleanup_pods_are_pinned_only_on_a_host_path() -> None:
    for build in (lambda spec: builders.build_pod(JOB, spec, 2), lambda spec: build_cleanup_pod(JOB, spec)):
        assert terms(hot_node.pinned(build(HOST_PATH), HOST_PATH, "node-b")) == [{"matchFields": [ON_B]}]
        assert "affinity" not in hot_node.pinned(build(CLAIM), CLAIM, "node-b")["spec"]
        assert "affinity" not in hot_node.pinned(build(HOST_PATH), HOST_PATH, None)["spec"]  # not known yet


def test_a_users_node_affinity_is_kept_and_narrowed_to_the_node() -> None:
    zone = {"key": "topology.kubernetes.io/zone", "operator": "In", "values": ["z1"]}
    spec = config.parse_spec({**BASE, "checkpoint": {"hotVolume": {"hostPath": {"path": "/srv/hot"}}},
                              "podTemplate": {"spec": {"affinity": {"nodeAffinity": {
                                  "requiredDuringSchedulingIgnoredDuringExecution": {
                                      "nodeSelectorTerms": [{"matchExpressions": [zone]}]}}}}}})
    pod = hot_node.pinned(builders.build_pod(JOB, spec, 2), spec, "node-b")
    assert terms(pod) == [{"matchExpressions": [zone], "matchFields": [ON_B]}]
    assert hot_node.pinned(json.loads(json.dumps(pod)), spec, "node-b") == pod  # idempotent


def test_a_host_path_driver_tells_its_executors_its_node() -> None:
    runtime = builders.build_pod(JOB, HOST_PATH, 2)["spec"]["containers"][0]
    env = {e["name"]: e for e in runtime["env"]}
    assert builders.NODE_NAME_ENV == executors.NODE_NAME_ENV
    assert env[executors.NODE_NAME_ENV]["valueFrom"] == {"fieldRef": {"fieldPath": "spec.nodeName"}}
    claim_env = {e["name"] for e in builders.build_pod(JOB, CLAIM, 2)["spec"]["containers"][0]["env"]}
    assert executors.NODE_NAME_ENV not in claim_env


def test_the_observation_reads_the_node_and_why_the_scheduler_cannot_place_the_pod() -> None:
    pod = {"metadata": {"name": "clicks-2", "annotations": {"sparkpoint.dev/attempt": "2"}},
           "spec": {"nodeName": "node-b"}, "status": {"phase": "Running"}}
    assert pod_observation(pod).node == "node-b" and pod_observation(pod).unschedulable is None
    pending = {"metadata": {"name": "clicks-2"}, "spec": {}, "status": {"phase": "Pending", "conditions": [
        {"type": "PodScheduled", "status": "False", "reason": "Unschedulable", "message": "0/2 nodes"}]}}
    assert pod_observation(pending).node is None and pod_observation(pending).unschedulable == "0/2 nodes"
