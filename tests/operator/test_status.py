"""Conditions built from the decided status: values, reasons, and stable transition times."""

from __future__ import annotations

from sparkpoint.operator.decisions.status import CONDITION_TYPES, apply_conditions
from sparkpoint.operator.decisions.status_model import parse_status

T0 = 1_800_000_000.0


def conditions(status, generation=1, now=T0):
    """Apply them to the status document `status` (in place: a test may apply them again)."""
    typed = parse_status(status)
    apply_conditions(typed, generation, now)
    status.update(typed.document())
    return {c["type"]: c for c in status["conditions"]}


def test_running_ready_and_healthy():
    c = conditions({"phase": "Running", "attempt": 2, "latestCheckpoint": {"id": "chk-000003"},
                    "tracking": {"podReady": True, "checkpointHealthy": True, "checkpointReason": "CheckpointCompleted"}})
    assert [t for t in CONDITION_TYPES] == list(c)
    assert c["Ready"]["status"] == "True" and c["Ready"]["reason"] == "Running"
    assert c["CheckpointHealthy"]["status"] == "True" and "chk-000003" in c["CheckpointHealthy"]["message"]
    assert c["Progressing"]["status"] == "False" and c["Degraded"]["status"] == "False"
    assert all(x["observedGeneration"] == 1 for x in c.values())


def test_running_but_pod_not_ready_is_not_ready():
    c = conditions({"phase": "Running", "tracking": {"podReady": False}})
    assert c["Ready"]["status"] == "False"


def test_unhealthy_checkpoints_degrade():
    c = conditions({"phase": "Running", "tracking": {"podReady": True, "checkpointHealthy": False,
                                                     "checkpointReason": "NoRecentCheckpoint"}})
    assert c["CheckpointHealthy"]["status"] == "False" and c["CheckpointHealthy"]["reason"] == "NoRecentCheckpoint"
    assert c["Degraded"]["status"] == "True" and c["Degraded"]["reason"] == "NoRecentCheckpoint"
    assert c["Ready"]["status"] == "True"  # still processing


def test_failed_names_the_reason():
    c = conditions({"phase": "Failed", "lastFailure": {"reason": "RestoreFailed", "message": "no restorable checkpoint"},
                    "tracking": {}})
    assert c["Ready"]["status"] == "False" and c["Ready"]["reason"] == "Failed"
    assert c["Degraded"]["status"] == "True" and c["Degraded"]["reason"] == "RestoreFailed"
    assert c["Degraded"]["message"] == "no restorable checkpoint"
    assert c["Progressing"]["status"] == "False"


def test_recovering_is_progressing_and_degraded():
    c = conditions({"phase": "Recovering", "lastFailure": {"reason": "PodDeleted", "message": "gone"}, "tracking": {}})
    assert c["Progressing"]["status"] == "True" and c["Progressing"]["reason"] == "Recovering"
    assert c["Degraded"]["reason"] == "PodDeleted"


def test_transition_time_changes_only_on_a_change():
    status = {"phase": "Pending", "tracking": {}}
    first = conditions(status, now=T0)
    second = conditions(status | {"phase": "Running", "tracking": {"podReady": True}}, now=T0 + 30)
    assert first["Degraded"]["lastTransitionTime"] == second["Degraded"]["lastTransitionTime"]
    assert second["Ready"]["lastTransitionTime"] != first["Ready"]["lastTransitionTime"]
    assert second["Ready"]["lastTransitionTime"].endswith("Z")
