"""Issue 25 on the real API server, with real Spark and MinIO: drains do not punish a healthy job,
a refused pod is a failed start, edits reach a stuck attempt or a Failed job, and a job re-created
under the same name never mixes its output with the old one's."""

from __future__ import annotations

import time

import pytest
from kube_helpers import wait_for
from kubernetes import client
from operator_jobs import BUCKET, Jobs, condition

from sparkpoint.runtime.sink.transactional import committed_entries, read_committed
from sparkpoint.runtime.store import JobRef, open_store


def running_with_checkpoint(s):
    return s.get("phase") == "Running" and s.get("latestCheckpoint")


def events(jobs: Jobs, name: str) -> list[tuple[str, str]]:
    found = jobs.core.list_namespaced_event(jobs.namespace, field_selector=f"involvedObject.name={name}").items
    return [(e.reason, e.message or "") for e in found]


@pytest.mark.slow
@pytest.mark.ci_sample
def test_drained_pods_restart_at_once_and_spend_no_restart_budget(api_client, namespace, operator, store_env):
    """Case 13: pods deleted one after another (a node drain) each get a new attempt as soon as the
    old pod is gone, with no backoff (here 60 s) and without failing the job (maxRestarts 1)."""
    jobs = Jobs(api_client, namespace, store_env)
    jobs.create("drained", **{"restart.maxRestarts": 1, "restart.backoff": "60s", "restart.maxBackoff": "5m"})
    gaps = []
    for attempt in (1, 2, 3):
        jobs.wait_status("drained", f"attempt {attempt} Running with a checkpoint",
                         lambda s, a=attempt: s.get("attempt") == a and running_with_checkpoint(s),
                         timeout=300, operator=operator)
        if attempt == 3:
            break
        jobs.core.delete_namespaced_pod(f"drained-{attempt}", namespace)
        wait_for(f"drained-{attempt} gone", lambda a=attempt: not any(
            p.metadata.name == f"drained-{a}" for p in jobs.pods("drained")), timeout=120, interval=0.2)
        gone = time.monotonic()
        wait_for(f"attempt {attempt + 1} created", lambda a=attempt: any(
            p.metadata.name == f"drained-{a + 1}" for p in jobs.pods("drained")), timeout=120, interval=0.2)
        gaps.append(time.monotonic() - gone)
    st = jobs.status("drained")
    print(f"pod gone -> next attempt created: {[round(g, 2) for g in gaps]} s")
    assert max(gaps) < 30, f"a backoff was waited: {gaps}"  # 60 s backoff would show here
    assert st["restarts"] == 2 and st["lastFailure"]["reason"] == "PodDeleted"
    assert st["tracking"].get("restartTimes", []) == []  # no budget spent: maxRestarts 1 not exceeded


@pytest.mark.slow
def test_a_refused_pod_is_a_failed_start_and_the_job_runs_once_allowed(api_client, namespace, operator, store_env):
    """Case 9: a ResourceQuota admits no pod: status, an Event and the backoff say so, the restart
    count grows; removing the quota lets the job run."""
    jobs = Jobs(api_client, namespace, store_env)
    quota = client.V1ResourceQuota(metadata=client.V1ObjectMeta(name="no-pods"),
                                   spec=client.V1ResourceQuotaSpec(hard={"pods": "0"}))
    jobs.core.create_namespaced_resource_quota(namespace, quota)
    wait_for("the quota counted", lambda: (jobs.core.read_namespaced_resource_quota("no-pods", namespace).status
                                           .hard or {}).get("pods") == "0", timeout=60)
    jobs.create("refused", **{"restart.maxRestarts": 20, "restart.backoff": "2s", "restart.maxBackoff": "4s"})
    st = jobs.wait_status("refused", "a refused attempt recorded",
                          lambda s: (s.get("lastFailure") or {}).get("reason") == "Forbidden" and s.get("restarts", 0) >= 1,
                          timeout=120, operator=operator)
    assert "exceeded quota" in st["lastFailure"]["message"]
    assert condition(st, "Ready") == "False"
    assert any(reason == "PodCreateFailed" and "exceeded quota" in message for reason, message in events(jobs, "refused"))
    jobs.core.delete_namespaced_resource_quota("no-pods", namespace)
    jobs.wait_status("refused", "Running once pods are allowed", running_with_checkpoint, timeout=300,
                     operator=operator)


@pytest.mark.slow
def test_a_pending_attempt_takes_a_spec_edit(api_client, namespace, operator, store_env):
    """Case 8: an attempt that cannot be scheduled (a typo'd CPU request) is replaced when the spec is
    fixed, without counting a restart."""
    jobs = Jobs(api_client, namespace, store_env)
    jobs.create("pending", **{"spark.resources.cpu": "64"})
    wait_for("pending-1 unschedulable", lambda: any(
        c.reason == "Unschedulable" for p in jobs.pods("pending") for c in (p.status.conditions or [])),
        timeout=120, interval=1.0)
    assert jobs.status("pending").get("phase") == "Pending"
    jobs.patch_spec("pending", {"spark": {"resources": {"cpu": "100m"}}})
    st = jobs.wait_status("pending", "attempt 2 Running", lambda s: s.get("attempt") == 2 and running_with_checkpoint(s),
                          timeout=300, operator=operator)
    assert st["restarts"] == 0
    assert any(reason == "SpecChanged" for reason, _ in events(jobs, "pending"))


@pytest.mark.slow
def test_an_edit_brings_a_failed_job_back_while_its_pod_lingers(api_client, namespace, operator, store_env):
    """Case 7: restart.policy Never and an entrypoint that does not exist: Failed, while the GC
    sidecar keeps the pod Running; fixing the entrypoint brings the job back."""
    jobs = Jobs(api_client, namespace, store_env)
    jobs.create("broken", **{"restart.policy": "Never", "job.entrypoint": "sparkpoint.examples.nope:build"})
    st = jobs.wait_status("broken", "Failed", lambda s: s.get("phase") == "Failed", timeout=180, operator=operator)
    assert "exit 2" in st["lastFailure"]["message"]
    jobs.patch_spec("broken", {"job": {"entrypoint": "sparkpoint.examples.windowed_aggregation:build"}})
    st = jobs.wait_status("broken", "Running again", running_with_checkpoint, timeout=300, operator=operator)
    assert st["attempt"] >= 2


@pytest.mark.slow
@pytest.mark.ci_sample
def test_a_job_recreated_under_its_name_shows_only_its_own_output(api_client, namespace, operator, store_env):
    """Case 2: gc.onDelete delete removes the job's output with its checkpoints; the job created
    again under the same name (a new uid) numbers checkpoints from 1 again and its readers see only
    its own rows."""
    jobs = Jobs(api_client, namespace, store_env)
    store = open_store(f"s3://{BUCKET}/{namespace}", env=store_env)
    ref = JobRef(namespace, "again")
    first = jobs.create("again", **{"gc.onDelete": "delete"})
    jobs.wait_status("again", "the first job has committed rows",
                     lambda s: running_with_checkpoint(s) and read_committed(store, ref, "default"),
                     timeout=300, operator=operator)
    jobs.delete("again", timeout=240)
    assert not committed_entries(store, ref, "default")  # its output went with it
    second = jobs.create("again", **{"gc.onDelete": "delete"})
    assert second["metadata"]["uid"] != first["metadata"]["uid"]
    # (windows close after the watermark passes them: the first entries may hold no rows yet)
    jobs.wait_status("again", "the second job has committed rows",
                     lambda s: running_with_checkpoint(s) and read_committed(store, ref, "default"),
                     timeout=300, operator=operator)
    entries = committed_entries(store, ref, "default")
    assert {e.get("incarnation") for e in entries} == {second["metadata"]["uid"]}  # only this job's
