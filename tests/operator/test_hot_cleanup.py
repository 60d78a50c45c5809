"""The finalizer's removal of a deleted job's hot-volume directory (operator/hot_cleanup.py): the
cleanup pod's shape and the decision of each finalizer round."""

from __future__ import annotations

import pytest

from sparkpoint.operator import builders
from sparkpoint.operator.hot_cleanup import (
    CLEANUP_FOR,
    build_cleanup_pod,
    cleanup_pod_name,
    cleanup_step,
    created_for,
    needs_cleanup,
)
from sparkpoint.runtime.config import parse_spec

JOB = builders.JobRef("team", "scaled", "6f1c2d3e-0000-4000-8000-00000000abcd")


def spec(**checkpoint):
    return parse_spec({"image": "sparkpoint:1", "job": {"entrypoint": "m:build"},
                       "spark": {"master": "k8s", "executors": {"instances": 2}},
                       "checkpoint": {"hotVolume": {"persistentVolumeClaim": {"claimName": "hot"}}, **checkpoint}})


def test_the_cleanup_pod_removes_exactly_this_uid_from_the_jobs_own_volume():
    pod = build_cleanup_pod(JOB, spec())
    container = pod["spec"]["containers"][0]
    assert container["command"] == ["sparkpoint", "hot-volume", "remove-job", "--root", builders.HOT_DIR,
                                    "--namespace", "team", "--job", "scaled", "--uid", JOB.uid, "--json"]
    assert container["image"] == "sparkpoint:1"
    assert {"name": "hot", "persistentVolumeClaim": {"claimName": "hot"}} in pod["spec"]["volumes"]
    assert {"name": "hot", "mountPath": builders.HOT_DIR} in container["volumeMounts"]
    # the runtime's mount path and layout: what the cleanup removes is what builders.work_dir made
    assert builders.work_dir(JOB, spec(), 3).startswith(f"{builders.HOT_DIR}/team/scaled/{JOB.uid}/")


def test_the_cleanup_pod_is_restricted_runs_once_and_is_not_a_job_pod():
    pod = build_cleanup_pod(JOB, spec())
    assert pod["metadata"]["name"] == cleanup_pod_name(JOB) == "scaled-hot-cleanup"
    assert pod["metadata"]["ownerReferences"] == [JOB.owner_reference]
    labels = pod["metadata"]["labels"]
    assert labels["sparkpoint.dev/job"] == "scaled" and labels["app.kubernetes.io/component"] != "runtime"
    assert pod["spec"]["restartPolicy"] == "Never" and pod["spec"]["automountServiceAccountToken"] is False
    sc = pod["spec"]["containers"][0]["securityContext"]
    assert sc["readOnlyRootFilesystem"] and sc["runAsNonRoot"] and sc["capabilities"] == {"drop": ["ALL"]}
    assert pod["spec"]["securityContext"] == builders.pod_security_context()


def test_only_a_job_with_a_hot_volume_needs_a_cleanup():
    assert needs_cleanup(spec())
    assert not needs_cleanup(parse_spec({"image": "i", "job": {"entrypoint": "m:build"}}))
    assert not needs_cleanup(None)  # an invalid spec: no volume known


@pytest.mark.parametrize("executors, phase, since, now, expected", [
    (1, None, 100.0, 110.0, "wait-executors"),  # an executor could still write into the directory
    (0, None, 100.0, 110.0, "create"),
    (0, "Pending", 100.0, 110.0, "wait"),
    (0, "Running", 100.0, 110.0, "wait"),
    (0, "Succeeded", 100.0, 110.0, "done"),
    (0, "Succeeded", 100.0, 100.0 + CLEANUP_FOR + 1, "done"),  # done late is still done
    (0, "Failed", 100.0, 110.0, "give-up"),
    (0, "Running", 100.0, 100.0 + CLEANUP_FOR + 1, "give-up"),  # always finishes
    (2, None, 100.0, 100.0 + CLEANUP_FOR + 1, "give-up"),
    (0, None, None, 110.0, "create"),
])
def test_each_round_decides_from_executors_pod_phase_and_the_deletions_age(executors, phase, since, now, expected):
    step = cleanup_step(executors, phase, since, now)
    assert step.next == expected
    assert bool(step.why) == (expected == "give-up")


def test_a_cleanup_pod_is_known_by_the_uid_of_the_job_that_created_it():
    pod = build_cleanup_pod(JOB, spec())
    assert created_for(pod, JOB.uid)
    later = builders.JobRef("team", "scaled", "6f1c2d3e-0000-4000-8000-00000000beef")  # the same name again
    assert cleanup_pod_name(later) == cleanup_pod_name(JOB) and not created_for(pod, later.uid)
    assert not created_for({"metadata": {}}, JOB.uid)


@pytest.mark.parametrize("phase, now, expected", [
    ("Succeeded", 110.0, "wait-earlier"),  # an earlier job's success removed that job's directory, not this one's
    ("Failed", 110.0, "wait-earlier"),
    ("Running", 110.0, "wait-earlier"),
    ("Succeeded", 100.0 + CLEANUP_FOR + 1, "give-up"),  # stuck Terminating: still always finishes
])
def test_an_earlier_jobs_cleanup_pod_of_the_same_name_is_waited_out_never_trusted(phase, now, expected):
    step = cleanup_step(0, phase, 100.0, now, earlier_pod=True)
    assert step.next == expected
    assert bool(step.why) == (expected == "give-up")
