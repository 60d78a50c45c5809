"""Pure translations at the I/O edge: pod JSON -> PodObs, status -> JSON merge patch."""

from __future__ import annotations

from sparkpoint.operator.decisions.observe import pod_observation
from sparkpoint.operator.kube.client import merge_patch


def pod_json(**status):
    return {"metadata": {"name": "job-3", "annotations": {"sparkpoint.dev/attempt": "3"}},
            "status": {"phase": "Running", "podIP": "10.0.0.9"} | status}


def test_ready_pod():
    p = pod_observation(pod_json(conditions=[{"type": "Ready", "status": "True"}],
                                 containerStatuses=[{"name": "runtime", "restartCount": 0, "state": {"running": {}}}]))
    assert (p.name, p.attempt, p.phase, p.ready, p.ip, p.deleting, p.node_lost) == \
        ("job-3", 3, "Running", True, "10.0.0.9", False, False)


def test_restarted_container_and_exit_codes():
    p = pod_observation(pod_json(containerStatuses=[
        {"name": "gc", "restartCount": 9},
        {"name": "runtime", "restartCount": 2, "state": {"terminated": {"exitCode": 3}},
         "lastState": {"terminated": {"exitCode": 137}}}]))
    assert (p.restart_count, p.exit_code, p.last_exit_code) == (2, 3, 137)


def test_deleting_pod_is_never_ready_and_lost_node_is_seen():
    p = pod_observation(pod_json(conditions=[{"type": "Ready", "status": "Unknown"}]) |
                        {"metadata": {"name": "job-1", "deletionTimestamp": "2026-01-01T00:00:00Z"}})
    assert p.deleting and not p.ready and p.node_lost and p.attempt == 0


def test_evicted_pod():
    p = pod_observation(pod_json(phase="Failed", reason="Evicted"))
    assert p.phase == "Failed" and p.reason == "Evicted" and not p.node_lost


def test_merge_patch_sets_changes_and_nulls_removed_keys():
    old = {"phase": "Running", "restarts": 1, "tracking": {"pendingTrigger": {"at": 1, "id": "req-1"}, "podSeen": True},
           "checkpoints": [{"id": "a"}]}
    new = {"phase": "Running", "restarts": 2, "tracking": {"podSeen": True, "lastTriggerAt": 5},
           "checkpoints": [{"id": "a"}, {"id": "b"}]}
    assert merge_patch(old, new) == {"restarts": 2, "tracking": {"pendingTrigger": None, "lastTriggerAt": 5},
                                     "checkpoints": [{"id": "a"}, {"id": "b"}]}
    assert merge_patch(new, new) == {}
