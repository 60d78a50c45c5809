"""Restarts: a deleted pod becomes a new attempt restoring the latest checkpoint (and Spark's History
Server lists both attempts from their event logs); a killed container recovers in place and is
counted; a crash loop ends in Failed after maxRestarts."""

from __future__ import annotations

import os
import signal
import time
from pathlib import Path

import pytest
from history_check import attempts_with_logs, history_applications
from kube_helpers import wait_for
from operator_jobs import BUCKET, Jobs, condition

from sparkpoint.runtime.store import JobRef


def _number(cid: str) -> int:
    return int(cid.rsplit("-", 1)[1])


def runtime_pid(namespace: str, job: str, pod_uid: str | None = None) -> int | None:
    """The runtime process of a job's pod (of the pod `pod_uid` when given: a thawed zombie of an
    earlier attempt of the job may still run beside it). The local cluster's pods are host processes;
    on kind this returns None (no access to the node's processes)."""
    from local.freezer import pod_cgroup_of_pid

    for proc in Path("/proc").iterdir():
        if not proc.name.isdigit():
            continue
        try:
            argv = (proc / "cmdline").read_bytes().split(b"\0")
        except OSError:
            continue
        words = [a.decode(errors="replace") for a in argv]
        if "run" in words and "--namespace" in words and namespace in words and job in words \
                and any(w.endswith("sparkpoint") for w in words[:2]):
            if pod_uid is not None:
                try:
                    pod_cgroup_of_pid(int(proc.name), pod_uid)
                except (ValueError, OSError):
                    continue  # another pod's runtime of the same job
            return int(proc.name)
    return None


@pytest.mark.slow
@pytest.mark.ci_sample
def test_deleted_pod_becomes_a_new_attempt_resuming_after_the_latest_checkpoint(api_client, namespace, operator,
                                                                                store_env, tmp_path):
    jobs = Jobs(api_client, namespace, store_env)
    jobs.create("clicks")
    st = jobs.wait_status("clicks", "Running with a checkpoint",
                          lambda s: s.get("phase") == "Running" and s.get("latestCheckpoint"), operator=operator)
    before = st["latestCheckpoint"]
    jobs.core.delete_namespaced_pod("clicks-1", namespace)
    most_pods = 0

    def second_attempt_running():
        nonlocal most_pods
        live = [p for p in jobs.pods("clicks") if p.metadata.deletion_timestamp is None]
        most_pods = max(most_pods, len(live))
        s = jobs.status("clicks")
        return s if s.get("attempt") == 2 and s.get("phase") == "Running" and s.get("restore") else None

    st = wait_for("attempt 2 Running", second_attempt_running, timeout=300, interval=1.0)
    assert most_pods == 1, "two attempts ran at once"
    restore = st["restore"]
    assert restore["source"] == "remote"
    # SIGTERM drains with a final checkpoint, so the restore point is the latest one or newer.
    assert _number(restore["checkpoint"]) >= _number(before["id"])
    assert restore["batchId"] >= before["batch"]
    assert st["restarts"] == 1 and st["lastFailure"]["reason"] == "PodDeleted"
    assert [p.metadata.name for p in jobs.pods("clicks")] == ["clicks-2"]
    jobs.wait_status("clicks", "a checkpoint of attempt 2",
                     lambda s: _number(s["latestCheckpoint"]["id"]) > _number(restore["checkpoint"]), timeout=120,
                     operator=operator)
    # Issue 30: both attempts' event logs are in the store (the deleted pod drained: its log is
    # complete; the running one uploads its open log after a checkpoint), and Spark's History Server
    # over them lists both attempts.
    store_url, job = f"s3://{BUCKET}/{namespace}", JobRef(namespace, "clicks")
    logs = wait_for("event logs of two attempts", lambda: (found := attempts_with_logs(store_url, store_env, job))
                    and len(found) >= 2 and found, timeout=120, interval=2.0)
    first, current = min(logs), max(logs)
    assert (first, current) == (1, 2), logs  # keyed by the operator's attempt, as status.attempt shows it
    assert any(n.startswith("appstatus_") and not n.endswith(".inprogress") for n in logs[first]), logs
    apps = history_applications(store_url, store_env, job, tmp_path, expected=len(logs))
    assert apps[f"sparkpoint-{namespace}-clicks-attempt-{first}"] is True
    assert apps[f"sparkpoint-{namespace}-clicks-attempt-{current}"] is False  # still running


@pytest.mark.slow
@pytest.mark.ci_sample  # issue 28: the CI tier shows a container kill -> local recovery on the real node
def test_sigkilled_container_recovers_in_place_and_is_counted(api_client, namespace, operator, store_env):
    jobs = Jobs(api_client, namespace, store_env)
    jobs.create("clicks")
    jobs.wait_status("clicks", "Running with a checkpoint",
                     lambda s: s.get("phase") == "Running" and s.get("latestCheckpoint"), operator=operator)
    pid = wait_for("the runtime process", lambda: runtime_pid(namespace, "clicks"), timeout=30)
    os.kill(pid, signal.SIGKILL)
    st = jobs.wait_status("clicks", "local recovery counted and Running again",
                          lambda s: s.get("localRecoveries") == 1 and s.get("phase") == "Running"
                          and condition(s, "Ready") == "True" and (s.get("restore") or {}).get("source") == "local",
                          timeout=300, operator=operator)
    assert st["attempt"] == 1 and st["restarts"] == 1
    assert st["lastFailure"]["reason"] == "ContainerRestarted" and "137" in st["lastFailure"]["message"]
    assert [p.metadata.name for p in jobs.pods("clicks")] == ["clicks-1"]
    series = f'sparkpoint_operator_restarts_total{{job="clicks",kind="local",namespace="{namespace}"}} 1.0'
    assert series in operator.get("/metrics")


def test_crash_loop_fails_after_max_restarts(api_client, namespace, operator, store_env):
    jobs = Jobs(api_client, namespace, store_env)
    # An entrypoint that does not exist: the runtime exits 2 at once, the container restarts in place.
    jobs.create("broken", **{"job.entrypoint": "windowed_aggregation:no_such_function",
                             "restart.maxRestarts": 2})
    t0 = time.monotonic()
    st = jobs.wait_status("broken", "Failed", lambda s: s.get("phase") == "Failed", timeout=300, operator=operator)
    assert st["restarts"] == 3 and st["lastFailure"]["reason"] == "ContainerRestarted"
    assert "2 restarts" in st["lastFailure"]["message"]
    assert condition(st, "Degraded") == "True" and condition(st, "Ready") == "False"
    wait_for("the crash-looping pod removed", lambda: not jobs.pods("broken"), timeout=60)
    # Deliberate quiet window, once Failed and without pods: no new attempt follows (the pod's
    # deletion woke the job's loop; a Failed job's next round is a minute away, no event to wait on).
    time.sleep(5)
    assert not jobs.pods("broken") and jobs.status("broken")["phase"] == "Failed"
    assert jobs.status("broken").get("attempt") == st.get("attempt"), "a new attempt was started"
    print(f"Failed after {time.monotonic() - t0:.0f}s")
