"""Issue 44: a runtime that exits 1 for a cause the operator knows gets a lastFailure reason and an
Event that name the cause and the fix: a spark.master k8s driver without RBAC, a hot volume the
runtime's uid may not write. Table tests of the pure classifier, the termination message both ways,
and the machine's report."""

from __future__ import annotations

import json
from typing import Any

import pytest

from sparkpoint.operator.decisions.failure_causes import (
    DRIVER_FORBIDDEN,
    HOT_VOLUME_NOT_WRITABLE,
    PERMISSION_DENIED,
    cause_of,
    known_cause,
    run_failure,
)
from sparkpoint.operator.decisions.machine import decide, spec_key
from sparkpoint.operator.decisions.model import Emit, Observed, PodObs
from sparkpoint.operator.decisions.observe import pod_observation
from sparkpoint.runtime.cli.run import run_failure as runtime_message
from sparkpoint.runtime.spec import parse_spec

SPARK_FORBIDDEN = (
    'An error occurred while calling None.org.apache.spark.api.java.JavaSparkContext.\n'
    ': io.fabric8.kubernetes.client.KubernetesClientException: Failure executing: GET at: '
    'https://10.96.0.1:443/api/v1/namespaces/team/pods/clicks-1. Message: pods "clicks-1" is forbidden: '
    'User "system:serviceaccount:team:default" cannot get resource "pods" in API group "" in the namespace '
    '"team". Received status: Status(apiVersion=v1, code=403, ...).\n'
    '\tat io.fabric8.kubernetes.client.KubernetesClientException.copyAsCause(KubernetesClientException.java:238)\n'
    '\tat org.apache.spark.scheduler.cluster.k8s.ExecutorPodsAllocator.$anonfun$driverPod$1(ExecutorPodsAllocator.scala:81)\n')


@pytest.mark.parametrize(("error", "uid", "reason", "says"), [
    (SPARK_FORBIDDEN, 185, DRIVER_FORBIDDEN,
     ["ServiceAccount team/default", "may not get pods", "in namespace team", "--driver-service-account",
      "sparkpoint-driver"]),
    ('configmaps is forbidden: User "system:serviceaccount:etl:spark" cannot create resource "configmaps" in API '
     'group "" in the namespace "etl"', 185, DRIVER_FORBIDDEN, ["ServiceAccount etl/spark", "may not create configmaps"]),
    ('services is forbidden: User "system:serviceaccount:etl:spark" cannot list resource "services"', None,
     DRIVER_FORBIDDEN, ["may not list services"]),
    ("PermissionError: [Errno 13] Permission denied: '/var/lib/sparkpoint/team/clicks/0b1c/attempt-3'", 185,
     HOT_VOLUME_NOT_WRITABLE, ["uid 185", "/var/lib/sparkpoint/team/clicks/0b1c/attempt-3", "fsGroup", "hostPath"]),
    ("PermissionError: [Errno 13] Permission denied: '/var/lib/sparkpoint'", None, HOT_VOLUME_NOT_WRITABLE,
     ["the runtime's uid"]),
    ("PermissionError: [Errno 13] Permission denied: '/tmp/spark-x'", 1000, PERMISSION_DENIED, ["uid 1000", "/tmp/spark-x"]),
    ("PermissionError: [Errno 13] Permission denied: '/var/lib/sparkpointless/x'", 185, PERMISSION_DENIED, []),
    ("ZeroDivisionError: division by zero", 185, None, []),
    ('User "system:anonymous" cannot get resource "pods"', 185, None, []),  # not a service account's refusal
])
def test_known_causes(error: str, uid: int | None, reason: str | None, says: list[str]) -> None:
    cause = known_cause(error, uid)
    assert (cause.reason if cause else None) == reason
    for phrase in says:
        assert phrase in cause.message


@pytest.mark.parametrize(("message", "expected"), [
    (json.dumps({"runFailed": {"error": "boom", "uid": 185}}), ("boom", 185)),
    (json.dumps({"runFailed": {"error": "boom", "uid": "185"}}), ("boom", None)),
    (json.dumps({"runFailed": {"uid": 185}}), None),
    (json.dumps({"restoreFailed": {"points": []}}), None),
    ("not json", None), ("", None), (None, None),
])
def test_the_termination_message(message: str | None, expected: Any) -> None:
    assert run_failure(message) == expected


def test_the_runtime_writes_what_the_operator_reads() -> None:
    """runtime/cli/run.py's message for a Py4J-like error keeps the refusal and drops the Java frames."""
    doc = runtime_message(RuntimeError(SPARK_FORBIDDEN), uid=185)
    assert "\tat " not in doc["runFailed"]["error"] and len(json.dumps(doc)) < 4096
    assert known_cause(*run_failure(json.dumps(doc))).reason == DRIVER_FORBIDDEN
    denied = runtime_message(PermissionError(13, "Permission denied", "/var/lib/sparkpoint/a/b"), uid=185)
    assert known_cause(*run_failure(json.dumps(denied))).reason == HOT_VOLUME_NOT_WRITABLE
    huge = runtime_message(RuntimeError("x" * 100_000))
    assert len(huge["runFailed"]["error"]) == 1500


def _terminated(error: str, code: int = 1) -> dict[str, Any]:
    return {"terminated": {"exitCode": code, "reason": "Error",
                           "message": json.dumps({"runFailed": {"error": error, "uid": 185}})}}


def test_the_newest_termination_with_a_cause_wins() -> None:
    assert cause_of(None, _terminated(SPARK_FORBIDDEN)["terminated"]).reason == DRIVER_FORBIDDEN
    assert cause_of({"exitCode": 0, "message": "{}"}, None) is None
    assert cause_of(_terminated("boom")["terminated"], _terminated(SPARK_FORBIDDEN)["terminated"]) is None


def test_pod_observation_reads_it_from_the_last_state() -> None:
    pod = {"metadata": {"name": "job-1", "annotations": {"sparkpoint.dev/attempt": "1"}},
           "status": {"phase": "Running", "containerStatuses": [
               {"name": "runtime", "restartCount": 1, "state": {"running": {}}, "lastState": _terminated(SPARK_FORBIDDEN)}]}}
    assert pod_observation(pod).known_cause.reason == DRIVER_FORBIDDEN


T0 = 1_800_000_000.0
SPEC = parse_spec({"job": {"entrypoint": "m:f"}, "spark": {"master": "k8s", "executors": {"instances": 1, "cores": 1, "memory": "1Gi"}},
                   "checkpoint": {"hotVolume": {"hostPath": {"path": "/data/hot"}}}})
RUNTIME = {"phase": "running", "recentCheckpoints": [], "latestCheckpoint": None}


def _observe(spec, pod: PodObs) -> Observed:
    tr = {"runningSince": T0 - 5, "podSeen": True, "podReady": True, "stableSpec": spec_key(spec), "lastTriggerAt": T0 - 5}
    return Observed(spec=spec, generation=1, status={"phase": "Running", "attempt": 1, "pod": "job-1", "tracking": tr},
                    pods=[pod], now=T0, name="job", runtime=RUNTIME)


def test_a_restart_in_place_names_the_cause_and_the_fix() -> None:
    cause = known_cause(SPARK_FORBIDDEN, 185)
    pod = PodObs(name="job-1", attempt=1, phase="Running", ip="10.0.0.1", restart_count=1, last_exit_code=1,
                 termination_reason="Error", known_cause=cause)
    d = decide(_observe(SPEC, pod))
    failure = d.status["lastFailure"]
    assert failure["reason"] == DRIVER_FORBIDDEN
    assert failure["message"].startswith("runtime container of job-1 restarted in place (exit 1): ")
    assert "--driver-service-account" in failure["message"]
    assert [(a.type, a.reason) for a in d.actions if isinstance(a, Emit)] == [("Warning", DRIVER_FORBIDDEN)]
    # without a known cause it stays the generic report
    plain = decide(_observe(SPEC, PodObs(name="job-1", attempt=1, phase="Running", ip="10.0.0.1", restart_count=1,
                                         last_exit_code=1, termination_reason="Error")))
    assert plain.status["lastFailure"]["reason"] == "ContainerRestarted"


def test_a_failed_pod_under_restart_never_names_the_cause() -> None:
    spec = SPEC.model_copy(update={"restart": SPEC.restart.model_copy(update={"policy": "Never"})})
    cause = known_cause("PermissionError: [Errno 13] Permission denied: '/var/lib/sparkpoint/team/job'", 185)
    pod = PodObs(name="job-1", attempt=1, phase="Running", ip="10.0.0.1", exit_code=1, last_exit_code=1,
                 termination_reason="Error", known_cause=cause)
    d = decide(_observe(spec, pod))
    failure = d.status["lastFailure"]
    assert failure["reason"] == HOT_VOLUME_NOT_WRITABLE
    assert "pod job-1 failed (exit 1): the runtime (uid 185) may not create /var/lib/sparkpoint/team/job" in failure["message"]
    assert d.status["phase"] == "Failed"
    assert [(a.type, a.reason) for a in d.actions if isinstance(a, Emit)] == [
        ("Warning", "RestartLimitExceeded"), ("Warning", HOT_VOLUME_NOT_WRITABLE)]


def test_a_failed_pod_that_gets_a_new_attempt_names_the_cause_once() -> None:
    cause = known_cause(SPARK_FORBIDDEN, 185)
    pod = PodObs(name="job-1", attempt=1, phase="Failed", ip="10.0.0.1", exit_code=1, termination_reason="Error",
                 known_cause=cause)
    d = decide(_observe(SPEC, pod))
    assert d.status["phase"] == "Recovering" and d.status["lastFailure"]["reason"] == DRIVER_FORBIDDEN
    events = [a for a in d.actions if isinstance(a, Emit)]
    assert [(a.type, a.reason) for a in events] == [("Warning", DRIVER_FORBIDDEN)]
    assert "--driver-service-account" in events[0].message
