"""The typed status (status_model.JobStatus) against what the dict-based operator wrote, and the
CRD's status schema against the model."""

from __future__ import annotations

from pathlib import Path

import jsonschema
import yaml

from sparkpoint.operator.crd import streamingjob as crd
from sparkpoint.operator.decisions.status_model import JobStatus, Point, parse_status

ROOT = Path(__file__).resolve().parents[2]

# A status as the operator before the typed model wrote it (keys from every row of the machine,
# shapes as the dicts had them; an upgrade in flight after a local recovery), with kopf's keys.
WRITTEN = {
    "phase": "Running", "observedGeneration": 4, "attempt": 3, "pod": "orders-3", "restarts": 2,
    "localRecoveries": 1,
    "latestCheckpoint": {"id": "chk-000042", "batch": 41, "completedAt": "2027-01-15T08:00:10Z",
                         "bytes": 2048, "newBytes": 512},
    "checkpoints": [{"id": "chk-000041", "batch": 40, "completedAt": "2027-01-15T08:00:00Z", "bytes": 1900},
                    {"id": "chk-000042", "batch": 41, "completedAt": "2027-01-15T08:00:10Z", "bytes": 2048,
                     "newBytes": 512}],
    "savepoints": [{"name": "upgrade-3", "checkpoint": "chk-000040", "batch": 39, "bytes": 1800,
                    "completedAt": "2027-01-15T07:59:50Z"},
                   {"name": "periodic-1800000000", "batch": 12, "bytes": 10, "completedAt": "2027-01-15T07:00:00Z"}],
    "lastFailure": {"reason": "ContainerRestarted", "message": "runtime container of orders-3 restarted in place "
                    "(exit 137)", "at": "2027-01-15T07:58:00Z"},
    "nextAttemptAt": "2027-01-15T07:58:10Z",
    "restore": {"source": "savepoint", "savepoint": "upgrade-3", "checkpoint": None,
                "fallbacks": [{"checkpoint": "chk-000039", "error": "manifest unreadable"}]},
    "conditions": [
        {"type": "Ready", "status": "True", "reason": "Running", "message": "attempt 3 is running",
         "observedGeneration": 4, "lastTransitionTime": "2027-01-15T07:58:30Z"},
        {"type": "CheckpointHealthy", "status": "True", "reason": "CheckpointCompleted",
         "message": "latest checkpoint chk-000042", "observedGeneration": 4,
         "lastTransitionTime": "2027-01-15T07:58:30Z"}],
    "tracking": {
        "podSeen": True, "podReady": True, "runningSince": 1800000000.5, "containerRestarts": 1,
        "fallbackReported": 3, "storeWaitReported": 2, "attemptSpec": "0123456789abcdef",
        "attemptStorage": "s3://bucket/jobs", "historyStorage": "s3://bucket/jobs",
        "lastTriggerAt": 1800000100.25, "pendingTrigger": {"at": 1800000100.25, "id": "req-7"},
        "checkpointHealthy": True, "checkpointReason": "CheckpointCompleted", "gcPins": ["chk-000040"],
        "savepointNonce": 2, "pendingSavepoint": {"name": "nonce-2", "at": 1800000090, "tries": 2},
        "periodicSavepointAt": 1800000000, "prunedSavepoints": {"periodic-1799990000": 1800000050.0},
        "restoreFrom": {"savepoint": "upgrade-3"}, "attemptPoint": {"savepoint": "upgrade-3"},
        "lineage": {"point": {"savepoint": "upgrade-3"}, "over": {"checkpoint": "chk-000001"},
                    "storage": "s3://bucket/jobs"},
        "restoreTarget": "upgrade-3", "chosenOver": {"checkpoint": "chk-000001"},
        "badRestorePoints": ["chk-000039", "checkpoint:chk-000038"], "blamedAtCheckpoint": "chk-000040",
        "restartTimes": [1799999000.0, 1800000000], "failureStreak": 1, "nextAttemptAt": 1800000010,
        "drain": {"at": 1799999990}, "stableSpec": "fedcba9876543210",
        "stableSpecDoc": {"image": "sparkpoint:v1", "job": {"entrypoint": "m:f"}},
        "upgradeDeadline": 1800000300, "rollbackPoint": {"newestIn": "s3://old/jobs"},
        "upgrade": {"rollbackPoint": {"savepoint": "upgrade-3"}},
        "createFailed": {"attempt": 3, "reason": "Forbidden", "message": "exceeded quota"},
    },
}


def test_a_written_status_parses_and_round_trips():
    status = parse_status(WRITTEN | {"kopf": {"progress": {}}})
    assert status.tracking.pending_trigger.id == "req-7"
    assert status.tracking.rollback_point == Point(newest_in="s3://old/jobs")
    assert status.latest_checkpoint.new_bytes == 512
    assert status.document() == WRITTEN


def test_the_written_status_is_valid_for_the_generated_schema():
    jsonschema.validate(WRITTEN, crd.status_schema())


def test_unknown_keys_are_ignored_and_odd_values_dropped_not_the_status():
    status = parse_status({"phase": "Running", "attempt": 2, "somethingNew": 1,
                           "tracking": {"podSeen": True, "futureKey": {"a": 1}, "runningSince": "soon"},
                           "checkpoints": [{"id": "chk-000001"}, {"batch": 3}]})
    assert status.document() == {"phase": "Running", "attempt": 2, "tracking": {"podSeen": True},
                                 "checkpoints": [{"id": "chk-000001"}]}


def test_only_present_or_assigned_fields_are_written():
    status = parse_status({"attempt": 1, "tracking": {"podSeen": True}})
    assert status.tracking.checkpoint_healthy is True and status.restarts == 0  # defaults read...
    assert status.document() == {"attempt": 1, "tracking": {"podSeen": True}}  # ...are not written
    status.tracking.clear("pod_seen")
    status.tracking.failure_streak = 0
    assert status.document() == {"attempt": 1, "tracking": {"failureStreak": 0}}


def test_the_crd_status_schema_is_the_models():
    committed = yaml.safe_load((ROOT / "crds" / "streamingjob.yaml").read_text())
    schema = committed["spec"]["versions"][0]["schema"]["openAPIV3Schema"]["properties"]["status"]
    assert schema == crd.status_schema()
    assert set(schema["properties"]) == {f.alias for f in JobStatus.model_fields.values()}
    # Open only where the data is: kopf's keys beside ours, the runtime's restore report, bookkeeping.
    open_ = {name for name, prop in schema["properties"].items() if prop.get("x-kubernetes-preserve-unknown-fields")}
    assert open_ == {"restore", "tracking"} and schema["x-kubernetes-preserve-unknown-fields"]
    assert schema["properties"]["conditions"]["x-kubernetes-list-map-keys"] == ["type"]
    assert "default" not in yaml.safe_dump(schema)
