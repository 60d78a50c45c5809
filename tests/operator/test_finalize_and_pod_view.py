"""Deletion always finishes, the pod index is checked before it is believed, refusals are told
apart from retryable errors, and exit 3's termination message names the blamed points (pure)."""

from __future__ import annotations

import json

from kubernetes.client.rest import ApiException

from sparkpoint.operator.decisions import finalize, pod_view
from sparkpoint.operator.decisions.model import DeletePod, PodObs, RescaleFailure
from sparkpoint.operator.decisions.observe import pod_observation
from sparkpoint.operator.decisions.status_model import parse_status
from sparkpoint.operator.decisions.step import DRAIN_GRACE, STUCK_TERMINATING
from sparkpoint.operator.kube.refusals import refusal_message, refused

T0 = 1_800_000_000.0


def pod(name="job-1", attempt=1, **kw) -> PodObs:
    return PodObs(name=name, attempt=attempt, **({"phase": "Running", "ready": True, "ip": "10.0.0.1"} | kw))


def test_the_first_finalizer_round_drains_and_later_rounds_delete():
    first = finalize.drain_pods([pod()], None, T0)
    assert first.drain_started and [type(a).__name__ for a in first.actions] == ["DrainTo"] and first.pods_left == 1
    during = finalize.drain_pods([pod()], T0, T0 + 10)
    assert during.actions == []  # still draining
    late = finalize.drain_pods([pod()], T0, T0 + DRAIN_GRACE + 1)
    assert late.actions == [DeletePod("job-1")]


def test_a_pod_stuck_terminating_is_force_deleted_by_the_finalizer():
    stuck = pod(deleting=True, deleting_since=T0)
    assert finalize.drain_pods([stuck], T0, T0 + 10).actions == []  # its grace period runs
    assert finalize.drain_pods([stuck], T0, T0 + STUCK_TERMINATING + 1).actions == [DeletePod("job-1", force=True)]
    lost = pod(deleting=True, node_lost=True, deleting_since=T0)
    assert finalize.drain_pods([lost], T0, T0 + 1).actions == [DeletePod("job-1", force=True)]


def test_deleting_data_is_given_up_after_a_bound():
    assert not finalize.give_up_on_data(None, T0)
    assert not finalize.give_up_on_data(T0, T0 + finalize.DELETE_DATA_FOR - 1)
    assert finalize.give_up_on_data(T0, T0 + finalize.DELETE_DATA_FOR + 1)


def test_the_index_is_checked_when_it_says_the_current_pod_is_gone():
    status = {"phase": "Running", "attempt": 2, "tracking": {"podSeen": True}}
    assert pod_view.needs_direct_read(parse_status(status), [], True, None, T0) == (True, None)
    assert pod_view.needs_direct_read(parse_status(status), [pod("job-2", 2)], True, None, T0) == (False, None)


def test_the_index_is_checked_while_a_job_waits_on_pods_past_a_bound():
    status = {"phase": "Recovering", "attempt": 2}
    gone_but_indexed = [pod("job-2", 2, deleting=True)]
    read, since = pod_view.needs_direct_read(parse_status(status), gone_but_indexed, False, None, T0)
    assert (read, since) == (False, T0)
    assert pod_view.needs_direct_read(parse_status(status), gone_but_indexed, False, since, T0 + 5) == (False, T0)
    assert pod_view.needs_direct_read(parse_status(status), gone_but_indexed, False, since, T0 + pod_view.CONFIRM_AFTER) == \
        (True, T0 + pod_view.CONFIRM_AFTER)
    running = {"phase": "Running", "attempt": 2}
    assert pod_view.needs_direct_read(parse_status(running), [pod("job-2", 2)], True, T0 - 100, T0) == (False, None)
    assert pod_view.needs_direct_read(parse_status(running), [pod("job-2", 2)], False, T0 - 100, T0)[0]  # runtime silent


def test_refusals_are_told_apart_from_retryable_errors():
    quota = ApiException(status=403, reason="Forbidden")
    quota.body = json.dumps({"kind": "Status", "message": 'pods "job-1" is forbidden: exceeded quota: q'})
    assert refused(quota) and refusal_message(quota) == 'pods "job-1" is forbidden: exceeded quota: q'
    assert refused(ApiException(status=422, reason="Invalid"))
    for retryable in (409, 429, 500, 503):
        assert not refused(ApiException(status=retryable, reason="x"))
    assert refusal_message(ApiException(status=404, reason="Not Found")) == "404 Not Found"


def test_exit_3_termination_message_names_the_blamed_points():
    message = json.dumps({"restoreFailed": {"points": ["savepoint:upgrade-2"], "reason": "corrupt"}})
    doc = {"metadata": {"name": "job-2", "annotations": {"sparkpoint.dev/attempt": "2"},
                        "deletionTimestamp": "2027-01-15T08:00:00Z"},
           "status": {"phase": "Failed", "containerStatuses": [
               {"name": "runtime", "state": {"terminated": {"exitCode": 3, "message": message}}}]}}
    p = pod_observation(doc)
    assert p.failed_points == ("savepoint:upgrade-2",) and p.deleting_since == T0
    doc["status"]["containerStatuses"][0]["state"]["terminated"]["message"] = "restore failed: plain text"
    assert pod_observation(doc).failed_points is None  # not ours: the machine blames the given point
    doc["status"]["containerStatuses"][0]["state"]["terminated"] = {"exitCode": 1, "message": message}
    assert pod_observation(doc).failed_points is None  # only exit 3 blames



def test_exit_4_termination_message_says_what_spark_refused_to_repartition():
    message = json.dumps({"rescaleFailed": {"from": 4, "to": 2, "reason": "invalid-checkpoint",
                                            "error": "repartitioning the state from 4 to 2 partitions failed: ..."}})
    doc = {"metadata": {"name": "job-2", "annotations": {"sparkpoint.dev/attempt": "2"}},
           "status": {"phase": "Running", "containerStatuses": [
               {"name": "runtime", "restartCount": 1, "state": {"waiting": {"reason": "CrashLoopBackOff"}},
                "lastState": {"terminated": {"exitCode": 4, "message": message}}}]}}
    p = pod_observation(doc)
    assert p.last_exit_code == 4 and p.rescale_failure == RescaleFailure(4, 2, "invalid-checkpoint")
    assert p.failed_points is None
    last = doc["status"]["containerStatuses"][0]["lastState"]["terminated"]
    last["message"] = json.dumps({"rescaleFailed": {"from": "4", "to": 2, "reason": 7}})
    assert pod_observation(doc).rescale_failure == RescaleFailure(None, 2, None)  # wrong types are dropped
    last["message"] = "plain text"
    assert pod_observation(doc).rescale_failure is None
    doc["status"]["containerStatuses"][0]["lastState"]["terminated"] = {"exitCode": 3, "message": message}
    assert pod_observation(doc).rescale_failure is None  # only exit 4 says it

class _SecretGone:
    """Kubernetes as a namespace deletion leaves it: no pods, the storage Secret already deleted."""

    def __init__(self):
        self.events = []

    async def job_pods(self, namespace, name):
        return []

    async def secret_data(self, namespace, name):
        raise ApiException(status=404, reason="Not Found")

    def job_phase(self, namespace, name, phase):
        pass

    def event(self, body, type_, reason, message):
        self.events.append((type_, reason, message))


def test_deletion_without_its_secret_finishes_and_says_what_was_left():
    import asyncio

    from sparkpoint.operator.reconcile import Reconciler

    body = {"metadata": {"namespace": "team", "name": "clicks"},
            "spec": {"job": {"entrypoint": "a:b"}, "gc": {"onDelete": "delete"},
                     "checkpoint": {"storage": {"url": "s3://bucket/jobs", "endpoint": "http://127.0.0.1:1",
                                                "secretRef": {"name": "gone"}}}}}
    kube = _SecretGone()
    asyncio.run(Reconciler(kube, None, kube, kube.event).finalize(body))  # returns: the finalizer is removed
    ((type_, reason, message),) = kube.events
    assert (type_, reason) == ("Warning", "DataNotDeleted")
    assert "Secret is gone" in message and "s3://bucket/jobs (team/clicks)" in message


def test_a_create_on_the_indexs_word_is_confirmed_but_not_a_jobs_first():
    assert pod_view.confirm_before_create(parse_status({"attempt": 3}), creates=True, read_directly=False)
    assert not pod_view.confirm_before_create(parse_status({"attempt": 3}), creates=True, read_directly=True)
    assert not pod_view.confirm_before_create(parse_status({"attempt": 3}), creates=False, read_directly=False)
    assert not pod_view.confirm_before_create(parse_status({}), creates=True, read_directly=False)  # the 1,000-job ramp
