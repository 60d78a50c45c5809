"""A deleted job's directory on its shared hot volume (issue 26): the operator's finalizer, once the
job's pod is gone, runs a pod of the job's image that removes `<namespace>/<job>/<uid>` from the
volume, and nothing else of it: another job's directory on the same volume stays. A local-master
job is enough (the hot volume works the same without executors), on a hostPath standing in for a
ReadWriteMany claim."""

from __future__ import annotations

import uuid

import pytest
from kube_helpers import wait_for
from operator_jobs import Jobs
from test_operator_executors import remove_hot_dir, shared_hot_dir


@pytest.mark.slow
@pytest.mark.timeout(900)
def test_deleting_a_job_removes_its_directory_from_the_hot_volume(api_client, core, namespace, operator, store_env):
    hot = shared_hot_dir(namespace)
    jobs = Jobs(api_client, namespace, store_env)
    try:
        # a neighbour's directory on the same volume (another job of the namespace): never touched
        neighbour = hot / namespace / "neighbour" / str(uuid.uuid4()) / "attempt-1" / "hot"
        neighbour.mkdir(parents=True)
        (hot / namespace).chmod(0o777)  # as if a job's pod (uid 185) had made it: the next job adds its own
        (neighbour / "metadata").write_text('{"id": "keep"}')
        created = jobs.create("leaving", **{"checkpoint.hotVolume": {"hostPath": {"path": str(hot)}}})
        uid = created["metadata"]["uid"]
        jobs.wait_status("leaving", "Running with a checkpoint", lambda s: s.get("phase") == "Running"
                         and s.get("latestCheckpoint"), timeout=420, operator=operator)
        work = hot / namespace / "leaving" / uid / "attempt-1"
        assert (work / "hot" / "commits").is_dir(), sorted(str(p) for p in hot.rglob("*"))[:20]

        jobs.delete("leaving", timeout=420)  # the finalizer done
        assert not (hot / namespace / "leaving").exists(), sorted(str(p) for p in (hot / namespace).rglob("*"))[:20]
        assert (neighbour / "metadata").read_text() == '{"id": "keep"}'
        events = [(e.type, e.reason, e.message) for e in core.list_namespaced_event(
            namespace, field_selector="involvedObject.name=leaving").items]
        assert not [e for e in events if e[1] == "HotVolumeNotCleaned"], events
        # the cleanup pod went with the finalizer's last round
        wait_for("the cleanup pod deleted", lambda: not core.list_namespaced_pod(
            namespace, label_selector="app.kubernetes.io/component=hot-cleanup").items, timeout=120, interval=1.0)
    finally:
        remove_hot_dir(jobs, hot)
