"""The finalizer's removal of a deleted job's hot-volume directory (operator/kube/hot_cleanup.py): the
cleanup pod's shape and the decision of each finalizer round."""

from __future__ import annotations

import asyncio

import pytest

from sparkpoint.operator.decisions.checkpoints import parse_time
from sparkpoint.operator.deletion import Draining, JobDeletion
from sparkpoint.operator.kube import builders
from sparkpoint.operator.kube.hot_cleanup import (
    ABSENT_EXIT,
    CLEANUP_FOR,
    build_cleanup_pod,
    cleanup_exit_code,
    cleanup_pod_name,
    cleanup_step,
    created_for,
    needs_cleanup,
)
from sparkpoint.operator.kube.resource import parse_job
from sparkpoint.runtime.spec import parse_spec

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


class _Kube:
    """The two reads and the writes JobDeletion.clean_hot_volume makes (a stand-in for the API server)."""

    def __init__(self, pod):
        self.pod, self.deleted, self.created = pod, [], []

    async def get_pod(self, namespace, name):
        return self.pod

    async def executor_pods(self, namespace, name):
        return []

    async def delete_pod(self, namespace, name, force=False):
        self.deleted.append(name)

    async def create(self, body):
        self.created.append(body)
        return True


def _deleting_job(uid: str, since: str = "2026-11-26T10:00:00Z"):
    body = {"apiVersion": "sparkpoint.dev/v1alpha1", "kind": "StreamingJob",
            "metadata": {"name": "scaled", "namespace": "team", "uid": uid, "generation": 1, "deletionTimestamp": since},
            "spec": spec().model_dump(by_alias=True, mode="json", exclude_none=True)}
    return parse_job(body)


def test_the_finalizer_deletes_and_waits_out_an_earlier_jobs_cleanup_pod_instead_of_reading_it():
    earlier = build_cleanup_pod(JOB, spec()) | {"status": {"phase": "Succeeded"}}
    kube, events = _Kube(earlier), []
    deletion = JobDeletion(kube, None, None, None, lambda *a: events.append(a))  # type: ignore[arg-type]
    job = _deleting_job("6f1c2d3e-0000-4000-8000-00000000beef")  # the same name again, a new uid
    with pytest.raises(Draining, match="an earlier job's cleanup pod"):
        asyncio.run(deletion.clean_hot_volume(job, parse_time("2026-11-26T10:00:10Z")))
    assert kube.deleted == ["scaled-hot-cleanup"] and not kube.created and not events
    # Its own pod's success is its own: done, nothing posted.
    kube = _Kube(build_cleanup_pod(job.meta.ref, spec()) | {"status": {"phase": "Succeeded"}})
    deletion = JobDeletion(kube, None, None, None, lambda *a: events.append(a))  # type: ignore[arg-type]
    asyncio.run(deletion.clean_hot_volume(job, parse_time("2026-11-26T10:00:10Z")))
    assert kube.deleted == ["scaled-hot-cleanup"] and not events


@pytest.mark.parametrize("phase, exit_code, host_path, expected", [
    ("Failed", ABSENT_EXIT, True, "absent"),  # another node's hostPath may hold it: say so
    ("Failed", ABSENT_EXIT, False, "done"),  # one claim: nothing there is nothing to remove
    ("Failed", 1, True, "give-up"),  # something stayed
    ("Failed", None, True, "give-up"),  # no exit code read (the pod failed before its container ran)
    ("Succeeded", 0, True, "done"),
])
def test_a_directory_not_there_is_reported_on_a_host_path_and_done_on_a_claim(phase, exit_code, host_path, expected):
    step = cleanup_step(0, phase, 100.0, 110.0, exit_code=exit_code, host_path=host_path)
    assert step.next == expected
    assert bool(step.why) == (expected in ("give-up", "absent"))


def test_the_cleanup_containers_exit_code_is_read_only_once_it_terminated():
    pod = {"status": {"containerStatuses": [{"name": "cleanup", "state": {"terminated": {"exitCode": 3}}}]}}
    assert cleanup_exit_code(pod) == 3
    assert cleanup_exit_code({"status": {"containerStatuses": [{"name": "cleanup", "state": {"running": {}}}]}}) is None
    assert cleanup_exit_code(None) is None and cleanup_exit_code({}) is None


def host_path_spec():
    return parse_spec({"image": "sparkpoint:1", "job": {"entrypoint": "m:build"},
                       "spark": {"master": "k8s", "executors": {"instances": 2}},
                       "checkpoint": {"hotVolume": {"hostPath": {"path": "/srv/hot"}}}})


def test_the_finalizer_posts_a_warning_when_a_host_path_directory_is_not_there():
    absent = build_cleanup_pod(JOB, host_path_spec()) | {"status": {"phase": "Failed", "containerStatuses": [
        {"name": "cleanup", "state": {"terminated": {"exitCode": ABSENT_EXIT}}}]}}
    kube, events = _Kube(absent), []
    deletion = JobDeletion(kube, None, None, None, lambda *a: events.append(a))  # type: ignore[arg-type]
    body = {"apiVersion": "sparkpoint.dev/v1alpha1", "kind": "StreamingJob",
            "metadata": {"name": "scaled", "namespace": "team", "uid": JOB.uid, "generation": 1,
                         "deletionTimestamp": "2026-11-26T10:00:00Z"},
            "spec": host_path_spec().model_dump(by_alias=True, mode="json", exclude_none=True)}
    asyncio.run(deletion.clean_hot_volume(parse_job(body), parse_time("2026-11-26T10:00:10Z")))
    assert [(e[1], e[2]) for e in events] == [("Warning", "HotVolumeDirAbsent")]
    assert f"team/scaled/{JOB.uid}" in events[0][3] and "another node" in events[0][3]
    assert kube.deleted == ["scaled-hot-cleanup"]  # and the finalizer finishes


class _RefusingKube(_Kube):
    """An API server that refuses the cleanup pod, as Pod Security `restricted` refuses a hostPath."""

    def __init__(self, status: int):
        super().__init__(None)
        self.status = status

    async def create(self, body):
        from kubernetes.client.rest import ApiException

        error = ApiException(status=self.status, reason="Forbidden")
        error.body = '{"message": "pods \\"scaled-hot-cleanup\\" is forbidden: violates PodSecurity \\"restricted:latest\\""}'
        raise error


def test_a_refused_cleanup_pod_is_given_up_at_once_with_the_api_servers_words():
    """Retrying a refusal would only hold the deletion for CLEANUP_FOR (a restricted namespace refuses
    a hostPath pod every time): the finalizer finishes now and says why the directory stayed."""
    kube, events = _RefusingKube(403), []
    deletion = JobDeletion(kube, None, None, None, lambda *a: events.append(a))  # type: ignore[arg-type]
    body = {"apiVersion": "sparkpoint.dev/v1alpha1", "kind": "StreamingJob",
            "metadata": {"name": "scaled", "namespace": "team", "uid": JOB.uid, "generation": 1,
                         "deletionTimestamp": "2026-11-26T10:00:00Z"},
            "spec": host_path_spec().model_dump(by_alias=True, mode="json", exclude_none=True)}
    asyncio.run(deletion.clean_hot_volume(parse_job(body), parse_time("2026-11-26T10:00:10Z")))
    assert [(e[1], e[2]) for e in events] == [("Warning", "HotVolumeNotCleaned")]
    assert "refused" in events[0][3] and "PodSecurity" in events[0][3] and f"team/scaled/{JOB.uid}" in events[0][3]
    # An outage is not a refusal: it is raised for the finalizer's retry.
    from kubernetes.client.rest import ApiException

    with pytest.raises(ApiException):
        asyncio.run(JobDeletion(_RefusingKube(503), None, None, None, lambda *a: None).clean_hot_volume(  # type: ignore[arg-type]
            parse_job(body), parse_time("2026-11-26T10:00:10Z")))
