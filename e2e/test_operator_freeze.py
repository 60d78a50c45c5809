"""Issue 43 on the local cluster's real node: a pod whose processes are frozen (the cgroup freezer, as
a node that stops answering while its kubelet goes on) is given up after spec.restart.lostAfter and the
next attempt starts without waiting for Kubernetes; thawed, the old attempt (a zombie) commits nothing
the new one has not superseded: the store's fence refuses it. The committed output equals the
failure-free result. Needs root on the node and pods that are this host's processes (the local
cluster; skipped on kind)."""

from __future__ import annotations

import json
import time

import pytest
from kube_helpers import wait_for
from local.freezer import freeze, pod_cgroup_of_pid, thaw
from operator_jobs import BUCKET, Jobs
from test_operator_recovery import runtime_pid

from harness.runtime_job import WindowedJob, canonical
from sparkpoint.runtime.sink.keys import commits_prefix
from sparkpoint.runtime.sink.transactional import read_committed
from sparkpoint.runtime.store import JobRef, ObjectStore, open_store
from sparkpoint.runtime.store.layout import attempt_claim_key, checkpoints_prefix

LOST_AFTER, INTERVAL = 10.0, 5.0
ROWS, KEYS, BATCHES, WINDOW, WATERMARK = 50, 20, 90, 5, 2


def claimed_at(store: ObjectStore, job: JobRef, attempt: int) -> float | None:
    info = store.stat(attempt_claim_key(job, attempt))
    return info.last_modified if info else None


def written_after_a_newer_claim(store: ObjectStore, job: JobRef) -> list[str]:
    """Manifests and commit entries an attempt wrote after the next attempt had claimed the fence
    (the store's own clock on both sides): what a zombie that got past the fence would leave."""
    late = []
    for prefix in (checkpoints_prefix(job), commits_prefix(job, "default")):
        for info in store.list(prefix):
            attempt = json.loads(store.get_bytes(info.key)).get("attempt")
            newer = claimed_at(store, job, attempt + 1) if isinstance(attempt, int) else None
            if newer is not None and info.last_modified > newer + 1.0:  # (stores date to the second)
                late.append(f"{info.key} (attempt {attempt})")
    return late


@pytest.mark.slow
def test_a_frozen_pod_is_given_up_within_the_bound_and_its_thawed_zombie_is_fenced_out(
        api_client, namespace, operator, store_env):
    jobs = Jobs(api_client, namespace, store_env)
    args = {"rows_per_batch": ROWS, "keys": KEYS, "total_batches": BATCHES, "window": f"{WINDOW} seconds",
            "watermark": f"{WATERMARK} seconds"}
    jobs.create("frozen", **{"job.args": args, "restart.lostAfter": f"{LOST_AFTER:g}s",
                             "checkpoint.interval": f"{INTERVAL:g}s"})
    before = jobs.wait_status("frozen", "attempt 1 Running with a checkpoint",
                              lambda s: s.get("phase") == "Running" and s.get("latestCheckpoint"),
                              timeout=300, operator=operator)
    pid = runtime_pid(namespace, "frozen")
    if pid is None:
        pytest.skip("the pods are not this host's processes (not the local cluster's node)")
    old = jobs.core.read_namespaced_pod("frozen-1", namespace)
    cg = pod_cgroup_of_pid(pid, old.metadata.uid)
    freeze(cg)
    frozen_at = time.monotonic()
    try:
        st = jobs.wait_status("frozen", "attempt 2 created", lambda s: s.get("attempt", 0) >= 2,
                              timeout=180, operator=operator)
        given_up = time.monotonic() - frozen_at
        assert st["lastFailure"]["reason"] == "AttemptLost", st["lastFailure"]
        still_there = any(p.metadata.name == "frozen-1" for p in jobs.pods("frozen"))
        # The first unanswered request comes within a checkpoint interval (the trigger), times out
        # after 5 s; then lostAfter of timeouts, asked again every lostAfter/3.
        assert given_up < INTERVAL + 5 + LOST_AFTER + LOST_AFTER / 3 + 10, f"given up after {given_up:.1f} s"
        jobs.wait_status("frozen", "attempt 2 Running with its own checkpoint",
                         lambda s: s.get("attempt") == 2 and s.get("phase") == "Running"
                         and (s.get("latestCheckpoint") or {}).get("id", "") > before["latestCheckpoint"]["id"],
                         timeout=300, operator=operator)
    finally:
        thaw(cg)
    print(f"frozen -> attempt 2 created: {given_up:.1f} s; the frozen pod still listed then: {still_there}")
    # Thawed, the zombie takes its SIGTERM and drains with a final checkpoint, which the fence refuses.
    zombie_log = ""
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline and any(p.metadata.name == "frozen-1" for p in jobs.pods("frozen")):
        try:
            zombie_log = jobs.core.read_namespaced_pod_log("frozen-1", namespace, container="runtime")
        except Exception:  # gone meanwhile
            break
        if "fenced" in zombie_log:
            break
        time.sleep(1.0)
    print("the zombie's log says it was fenced:", "fenced" in zombie_log)
    done = BATCHES + WINDOW + WATERMARK + 3
    jobs.wait_status("frozen", f"a checkpoint past batch {done}",
                     lambda s: (s.get("latestCheckpoint") or {}).get("batch", -1) >= done,
                     timeout=600, operator=operator)
    store, ref = open_store(f"s3://{BUCKET}/{namespace}", env=store_env), JobRef(namespace, "frozen")
    assert not written_after_a_newer_claim(store, ref)
    got = canonical(read_committed(store, ref))
    want = WindowedJob(rows_per_batch=ROWS, keys=KEYS, total_batches=BATCHES, window_seconds=WINDOW,
                       watermark_seconds=WATERMARK).expected_rows()
    assert got == want, f"missing {sum((want - got).values())}, extra {sum((got - want).values())}"
    wait_for("the zombie pod gone", lambda: not any(p.metadata.name == "frozen-1" for p in jobs.pods("frozen")),
             timeout=180)
