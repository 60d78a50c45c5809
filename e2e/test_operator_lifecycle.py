"""Savepoint by triggerNonce, suspend/resume, deletion with gc.onDelete retain and delete."""

from __future__ import annotations

import pytest
from kube_helpers import GROUP, PLURAL, VERSION, exists, wait_for
from operator_jobs import BUCKET, Jobs

from sparkpoint.runtime.checkpoint.catalog import list_checkpoint_ids
from sparkpoint.runtime.checkpoint.savepoint import list_savepoints
from sparkpoint.runtime.store import JobRef, open_store


def running(jobs: Jobs, name: str, operator) -> dict:
    return jobs.wait_status(name, "Running with a checkpoint",
                            lambda s: s.get("phase") == "Running" and s.get("latestCheckpoint"), operator=operator)


def names(status: dict) -> list[str]:
    return [s["name"] for s in status.get("savepoints") or []]


@pytest.mark.slow
def test_savepoint_by_trigger_nonce(api_client, namespace, operator, store_env):
    jobs = Jobs(api_client, namespace, store_env)
    jobs.create("clicks")
    running(jobs, "clicks", operator)
    jobs.patch_spec("clicks", {"savepoint": {"triggerNonce": 7}})
    st = jobs.wait_status("clicks", "savepoint nonce-7 in status", lambda s: "nonce-7" in names(s), timeout=120,
                          operator=operator)
    (sp,) = [s for s in st["savepoints"] if s["name"] == "nonce-7"]
    assert sp["bytes"] > 0 and sp["checkpoint"].startswith("chk-")
    assert st["phase"] == "Running" and st["restarts"] == 0


@pytest.mark.slow
def test_suspend_drains_with_a_savepoint_and_resume_restores_it(api_client, namespace, operator, store_env):
    jobs = Jobs(api_client, namespace, store_env)
    jobs.create("clicks")
    running(jobs, "clicks", operator)
    jobs.patch_spec("clicks", {"state": "suspended"})
    generation = jobs.get("clicks")["metadata"]["generation"]
    st = jobs.wait_status("clicks", "Suspended without pods",
                          lambda s: s.get("phase") == "Suspended" and not jobs.pods("clicks"), timeout=180,
                          operator=operator)
    savepoint = f"suspend-{generation}"
    store = open_store(f"s3://{BUCKET}/{namespace}", env=store_env)
    assert savepoint in [m.id for m in list_savepoints(store, JobRef(namespace, "clicks"))]
    jobs.patch_spec("clicks", {"state": "running"})
    st = jobs.wait_status("clicks", "attempt 2 Running", lambda s: s.get("phase") == "Running"
                          and s.get("attempt") == 2 and s.get("restore"), timeout=300, operator=operator)
    assert st["restore"]["source"] == "remote" and st["restore"]["checkpoint"] == savepoint
    assert st["restarts"] == 0  # suspending is not a failure


@pytest.mark.slow
@pytest.mark.parametrize("on_delete", ["retain", "delete"])
def test_delete_drains_then_keeps_or_deletes_checkpoints(api_client, namespace, operator, store_env, on_delete):
    jobs = Jobs(api_client, namespace, store_env)
    jobs.create("clicks", **{"gc.onDelete": on_delete, "savepoint.triggerNonce": 1})
    st = jobs.wait_status("clicks", "a savepoint and two checkpoints",
                          lambda s: "nonce-1" in names(s) and len(s.get("checkpoints") or []) >= 2, timeout=300,
                          operator=operator)
    jobs.custom.delete_namespaced_custom_object(GROUP, VERSION, namespace, PLURAL, "clicks")
    wait_for("the StreamingJob gone (finalizer done)", lambda: not exists(lambda: jobs.get("clicks")), timeout=180)
    assert not jobs.pods("clicks")
    store = open_store(f"s3://{BUCKET}/{namespace}", env=store_env)
    job = JobRef(namespace, "clicks")
    remaining = list_checkpoint_ids(store, job)
    if on_delete == "retain":
        assert remaining and max(remaining) >= st["latestCheckpoint"]["id"]
    else:
        assert remaining == []
        assert not list(store.list(f"{namespace}/clicks/objects/"))
    assert [m.id for m in list_savepoints(store, job)] == ["nonce-1"]  # savepoints are always kept
    if on_delete == "retain":
        # A new job of the same name resumes the retained checkpoints, and says so.
        jobs.create("clicks")
        st = jobs.wait_status("clicks", "Running again from the retained checkpoint",
                              lambda s: s.get("phase") == "Running" and (s.get("restore") or {}).get("checkpoint"),
                              timeout=300, operator=operator)
        assert st["restore"]["checkpoint"] == max(remaining) and st["attempt"] == 1
        said = [e.message for e in jobs.core.list_namespaced_event(
            namespace, field_selector="involvedObject.name=clicks").items if e.reason == "ResumingExistingCheckpoints"]
        assert said and max(remaining) in said[0]
