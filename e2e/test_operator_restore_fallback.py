"""Restore failure -> previous checkpoint, through the operator: the newest checkpoint's data is
corrupted in MinIO while no pod runs; the new attempt restores the previous retained checkpoint, and
the StreamingJob records it (status.restore.fallbacks, a RestoreFallback Event)."""

from __future__ import annotations

import pytest
from kube_helpers import wait_for
from operator_jobs import BUCKET, Jobs
from test_operator_recovery import _number, runtime_pid

from sparkpoint.runtime.checkpoint.catalog import list_checkpoint_ids, load_manifest
from sparkpoint.runtime.store import JobRef, open_store
from sparkpoint.runtime.store.layout import checkpoint_key, object_key


def corrupt_newest(store, job: JobRef) -> tuple[str, str]:
    """Overwrite an object only the newest checkpoint references (same size, wrong bytes); when it
    has none (no batch between the two, as under load), its manifest. Returns (newest, previous)."""
    ids = list_checkpoint_ids(store, job)
    newest, previous = load_manifest(store, job, ids[-1]), load_manifest(store, job, ids[-2])
    shared = {f.sha256 for f in previous.files}
    unique = next((f for f in newest.files if f.sha256 not in shared and f.size > 0), None)
    if unique is not None:
        store.put_bytes(object_key(job, unique.sha256), b"\0" * unique.size)
    else:
        store.put_bytes(checkpoint_key(job, newest.id), b'{"truncated')
    return newest.id, previous.id


@pytest.mark.slow
def test_corrupt_newest_checkpoint_restores_the_previous_one_and_is_recorded(api_client, namespace, operator,
                                                                             store_env):
    jobs = Jobs(api_client, namespace, store_env)
    # A backoff long enough to corrupt the store between the kill and the next attempt.
    jobs.create("clicks", **{"restart.backoff": "30s", "restart.maxBackoff": "1m"})
    jobs.wait_status("clicks", "Running with two checkpoints",
                     lambda s: s.get("phase") == "Running" and len(s.get("checkpoints") or []) >= 2,
                     timeout=600, operator=operator)  # a loaded machine took over 5 min for the first batch
    # Force-deleted: no drain, so no final checkpoint comes after the corruption.
    jobs.core.delete_namespaced_pod("clicks-1", namespace, grace_period_seconds=0)
    wait_for("the runtime process gone", lambda: runtime_pid(namespace, "clicks") is None and not jobs.pods("clicks"),
             timeout=60, interval=0.5)
    store = open_store(f"s3://{BUCKET}/{namespace}", env=store_env)
    newest, previous = corrupt_newest(store, JobRef(namespace, "clicks"))
    assert jobs.status("clicks").get("attempt") == 1, "the next attempt started before the store was corrupted"

    st = jobs.wait_status("clicks", "attempt 2 Running after a fallback",
                          lambda s: s.get("attempt") == 2 and s.get("phase") == "Running"
                          and (s.get("restore") or {}).get("fallbacks"), timeout=300, operator=operator)
    restore = st["restore"]
    assert (restore["source"], restore["checkpoint"]) == ("remote", previous)
    assert [f.get("checkpoint") for f in restore["fallbacks"]] == [newest]
    assert "corrupt" in restore["fallbacks"][0]["error"]
    # The status is written before the decision's actions (the Event) run.
    fallback = wait_for("a RestoreFallback Event", lambda: [e for e in jobs.core.list_namespaced_event(
        namespace, field_selector="involvedObject.name=clicks").items if e.reason == "RestoreFallback"], timeout=30)
    assert previous in fallback[0].message and f"{newest}: " in fallback[0].message
    jobs.wait_status("clicks", "a checkpoint of attempt 2",
                     lambda s: _number(s["latestCheckpoint"]["id"]) > _number(newest), timeout=120, operator=operator)
