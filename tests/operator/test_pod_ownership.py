"""The operator takes as a job's pods only those the job controls (issue 41, item 5): a pod anyone
in the namespace made with the job's labels and attempt annotation is never watched, drained,
deleted, or sent the job's control token."""

from __future__ import annotations

import asyncio
import contextlib
import copy

from sparkpoint.operator.decisions.observe import pod_observation
from sparkpoint.operator.decisions.pod_view import owned_pods
from sparkpoint.operator.decisions.status_model import parse_status
from sparkpoint.operator.deletion import JobDeletion
from sparkpoint.operator.kube import builders
from sparkpoint.operator.reconcile import Reconciler
from sparkpoint.runtime.spec import parse_spec

JOB = builders.JobRef("team", "clicks", "uid-1")
SPEC = parse_spec({"job": {"entrypoint": "m:f"}})


def real_pod(attempt: int = 1) -> dict:
    pod = builders.build_pod(JOB, SPEC, attempt)
    pod["status"] = {"phase": "Running", "podIP": "10.0.0.1"}
    return pod


def forged_pod(attempt: int = 1) -> dict:
    """What a tenant with `pods create` can make: the job's labels and annotation, no owner."""
    pod = copy.deepcopy(real_pod(attempt))
    pod["metadata"]["name"] = "clicks-evil"
    del pod["metadata"]["ownerReferences"]
    pod["status"]["podIP"] = "10.0.0.66"
    return pod


def test_only_the_pods_the_job_controls_and_names_are_its_pods():
    other_uid = copy.deepcopy(real_pod())
    other_uid["metadata"]["ownerReferences"][0]["uid"] = "uid-of-an-earlier-clicks"
    not_controller = copy.deepcopy(real_pod())
    not_controller["metadata"]["ownerReferences"][0]["controller"] = False
    wrong_name = copy.deepcopy(real_pod())
    wrong_name["metadata"]["name"] = "clicks-7"  # owned, but not the name of the attempt it claims (1)
    forged_same_name = forged_pod()
    forged_same_name["metadata"]["name"] = builders.pod_name(JOB, 1)
    pods = [pod_observation(p) for p in
            (real_pod(), forged_pod(), other_uid, not_controller, wrong_name, forged_same_name)]
    assert [p.ip for p in owned_pods(pods, JOB.name, JOB.uid)] == ["10.0.0.1"]
    assert owned_pods(pods, JOB.name, "") == []  # a job without a uid (never from the API) owns nothing


class _Kube:
    def __init__(self, pods: list[dict]):
        self.pods = pods

    async def job_pods(self, namespace, name):
        return self.pods


def test_a_round_ignores_a_forged_pod_from_the_index_and_from_the_api():
    forged = pod_observation(forged_pod())
    rec = Reconciler(kube=_Kube([forged_pod()]), client=None, metrics=None, post_event=None)
    status = parse_status({"phase": "Running", "attempt": 1, "tracking": {"podSeen": True}})

    async def rounds():
        indexed = await rec._pods("team", "clicks", JOB.uid, status, [forged])
        direct = await rec._listed_pods("team", "clicks", JOB.uid)
        return indexed, direct
    (indexed, read_directly), direct = asyncio.run(rounds())
    assert indexed == [] and direct == []
    assert read_directly  # the attempt's pod is missing from the index, so the API is asked (and lies too)


def test_deletion_never_drains_a_forged_pod():
    stopped: list[str] = []

    class Client:
        async def stop(self, base, token, final):
            stopped.append(base)

    body = {"metadata": {"namespace": "team", "name": "clicks", "uid": JOB.uid},
            "spec": {"job": {"entrypoint": "m:f"}, "gc": {"onDelete": "keep"}}}
    deletion = JobDeletion(_Kube([forged_pod()]), store=None, client=Client(), metrics=None,
                           post_event=lambda *a: None)
    with contextlib.suppress(Exception):  # whatever the data step does after draining is not this test's
        asyncio.run(deletion.finalize(body))
    assert stopped == []
