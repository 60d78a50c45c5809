"""spark.master k8s on the local cluster (issue 26): the job's pod is Spark's driver, Spark's
Kubernetes backend starts two executor pods from the job's image (`sparkpoint executor`), the
stateful query's checkpoint lives on a hostPath hot volume both mount, and checkpoints reach MinIO.
Then an executor pod is killed (Spark replaces it, the query goes on) and the driver pod (the
operator's next attempt restores the latest checkpoint; the old attempt's executors go with their
owner, and its runtime removes the old attempt's work dir from the shared volume).

The job's image is sparkpoint/runtime:dev when `make image` built it (image mode: uid 185, read-only
root, the image's entry point), else the virtualenv's `sparkpoint` (process mode). Every pod of the
node agent is a host process with its own 127.1.x.y address, so the driver and its executors reach
each other by pod IP as on a pod network.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import tempfile
import time
from contextlib import suppress
from datetime import datetime
from pathlib import Path

import pytest
from kube_helpers import wait_for
from kubernetes import client
from operator_jobs import Jobs

RUNTIME_IMAGE = "sparkpoint/runtime:dev"
DRIVER_ACCOUNT = "sparkpoint-driver"


def _image() -> str:
    """SPARKPOINT_E2E_EXECUTORS_IMAGE, else the runtime image when buildah has one (it may have been
    built from another tree: set the variable to be sure), else the process-mode image name."""
    if os.environ.get("SPARKPOINT_E2E_EXECUTORS_IMAGE"):
        return os.environ["SPARKPOINT_E2E_EXECUTORS_IMAGE"]
    present = shutil.which("buildah") and subprocess.run(
        ["buildah", "inspect", "--type", "image", RUNTIME_IMAGE], capture_output=True).returncode == 0
    return RUNTIME_IMAGE if present else "sparkpoint:e2e"


def _driver_account_for_a_process_operator(api_client, namespace: str, operator) -> None:
    """The Helm-installed operator has the chart's driver account and Role (tests/chart checks its
    rules); a host-process operator gets the same here and the flag that names it."""
    if not hasattr(operator, "extra_args"):
        return
    core, rbac = client.CoreV1Api(api_client), client.RbacAuthorizationV1Api(api_client)
    core.create_namespaced_service_account(namespace, client.V1ServiceAccount(
        metadata=client.V1ObjectMeta(name=DRIVER_ACCOUNT)))
    rules = [client.V1PolicyRule(api_groups=[""], resources=["pods"], verbs=[
        "get", "list", "watch", "create", "delete", "deletecollection", "patch"]),
             client.V1PolicyRule(api_groups=[""], resources=["configmaps", "services", "persistentvolumeclaims"],
                                 verbs=["get", "list", "create", "delete", "deletecollection"])]
    rbac.create_namespaced_role(namespace, client.V1Role(metadata=client.V1ObjectMeta(name=DRIVER_ACCOUNT),
                                                         rules=rules))
    rbac.create_namespaced_role_binding(namespace, client.V1RoleBinding(
        metadata=client.V1ObjectMeta(name=DRIVER_ACCOUNT),
        role_ref=client.V1RoleRef(api_group="rbac.authorization.k8s.io", kind="Role", name=DRIVER_ACCOUNT),
        subjects=[client.RbacV1Subject(kind="ServiceAccount", name=DRIVER_ACCOUNT, namespace=namespace)]))
    operator.stop()
    operator.extra_args.append(f"--driver-service-account={DRIVER_ACCOUNT}")
    operator.start()


def _executors(core, namespace: str, attempt: int | None = None) -> list[client.V1Pod]:
    selector = "sparkpoint.dev/job=scaled,spark-role=executor"
    if attempt is not None:
        selector += f",sparkpoint.dev/attempt={attempt}"
    return core.list_namespaced_pod(namespace, label_selector=selector).items  # terminating ones included


def _running(pods: list[client.V1Pod]) -> list[client.V1Pod]:
    return [p for p in pods if p.status.phase == "Running" and p.metadata.deletion_timestamp is None]


def shared_hot_dir(namespace: str) -> Path:
    """The hostPath standing in for a ReadWriteMany volume. Not under /tmp: in process mode the pod's
    own /tmp (an emptyDir) would hide a hostPath there."""
    hot = Path(tempfile.mkdtemp(prefix=f"sparkpoint-hot-{namespace}-", dir="/var/tmp"))
    hot.chmod(0o777)  # the pods' uid 185 works in it (a PVC gets this from fsGroup)
    return hot


def remove_hot_dir(jobs: Jobs, hot: Path) -> None:
    """A test's end: its jobs first, since their finalizer's cleanup pod mounts the directory
    (operator/kube/hot_cleanup.py) and a hostPath removed under it never starts (the finalizer would then
    wait CLEANUP_FOR, longer than the operator fixture's teardown waits)."""
    with suppress(AssertionError):  # jobs that do not go: the operator fixture's teardown reports them
        jobs.delete_all()
    shutil.rmtree(hot, ignore_errors=True)


def _started(pod: client.V1Pod) -> datetime | None:
    status = (pod.status.container_statuses or [None])[0]
    return status.state.running.started_at if status and status.state.running else None


@pytest.mark.slow
@pytest.mark.timeout(1200)
def test_two_executors_checkpoint_and_survive_an_executor_and_a_driver_kill(api_client, core, namespace, operator,
                                                                          store_env):
    _driver_account_for_a_process_operator(api_client, namespace, operator)
    hot = shared_hot_dir(namespace)
    image = _image()
    jobs = Jobs(api_client, namespace, store_env)
    try:
        t0 = time.monotonic()
        jobs.create("scaled", image=image, **{
            "spark.master": "k8s",
            "spark.executors": {"instances": 2, "cores": 1, "memory": "512Mi"},
            # the node has two cores for everything: executors request a tenth of one each
            "spark.conf": {"spark.kubernetes.executor.request.cores": "100m"},
            "checkpoint.hotVolume": {"hostPath": {"path": str(hot)}}})
        st = jobs.wait_status("scaled", "Running with a checkpoint", lambda s: s.get("phase") == "Running"
                              and s.get("latestCheckpoint"), timeout=480, operator=operator)
        first_checkpoint_s = time.monotonic() - t0
        driver = core.read_namespaced_pod(st["pod"], namespace)
        assert driver.spec.service_account_name == DRIVER_ACCOUNT
        execs = _running(_executors(core, namespace, attempt=1))
        assert len(execs) == 2, [p.metadata.name for p in _executors(core, namespace)]
        for pod in execs:
            # named per start of the runtime (issue 42): <driver pod>-s<start>-exec-<n>
            start = pod.metadata.labels["sparkpoint.dev/start"]
            assert pod.metadata.name.startswith(f"{st['pod']}-s{start}-exec-")
            assert pod.spec.node_name == driver.spec.node_name  # a hostPath: pinned to the driver's node
            assert pod.metadata.labels["app.kubernetes.io/component"] == "executor"
            owner = pod.metadata.owner_references[0]
            assert (owner.kind, owner.name, owner.uid) == ("Pod", driver.metadata.name, driver.metadata.uid)
            assert pod.spec.containers[0].image == image and pod.spec.containers[0].args == ["executor"]
            assert pod.spec.containers[0].security_context.read_only_root_filesystem is True
            assert pod.spec.automount_service_account_token is False
        executor_start_s = max((_started(p) - p.metadata.creation_timestamp).total_seconds() for p in execs)
        # the operator counts only the driver: the job has one pod
        assert [p.metadata.name for p in jobs.pods("scaled") if
                p.metadata.labels.get("app.kubernetes.io/component") == "runtime"] == [st["pod"]]
        # executors wrote state files into the shared hot dir of attempt 1
        attempt_dirs = list(hot.glob(f"{namespace}/scaled/*/attempt-1/hot/state"))
        assert attempt_dirs, sorted(str(p) for p in hot.rglob("*"))[:20]

        # An executor dies: Spark asks for a replacement, the query goes on and checkpoints newer batches.
        victim = execs[0].metadata.name
        before = st["latestCheckpoint"]["batch"]
        core.delete_namespaced_pod(victim, namespace, grace_period_seconds=0)
        t1 = time.monotonic()
        wait_for("a replacement executor running", lambda: len([
            p for p in _running(_executors(core, namespace, attempt=1)) if p.metadata.name != victim]) == 2,
            timeout=240, interval=1.0)
        replaced_s = time.monotonic() - t1
        st = jobs.wait_status("scaled", "a checkpoint after the executor kill", lambda s: s.get("phase") == "Running"
                              and s["latestCheckpoint"]["batch"] > before + 2, timeout=240, operator=operator)
        assert st["attempt"] == 1

        # The driver dies: a new attempt restores the latest checkpoint; attempt 1's executors are
        # deleted with their owner, before attempt 2 asks for its own.
        before, old_pod = st["latestCheckpoint"]["batch"], st["pod"]
        core.delete_namespaced_pod(old_pod, namespace, grace_period_seconds=0)
        t2 = time.monotonic()
        wait_for("attempt 1's executors gone", lambda: not _executors(core, namespace, attempt=1), timeout=180,
                 interval=0.5)
        old_gone = datetime.now().astimezone()
        old_gone_s = time.monotonic() - t2
        st = jobs.wait_status("scaled", "attempt 2 running with a newer checkpoint", lambda s: s.get("attempt") == 2
                              and s.get("phase") == "Running" and (s.get("latestCheckpoint") or {}).get("batch", -1)
                              > before, timeout=480, operator=operator)
        recovered_s = time.monotonic() - t2
        assert st["restore"]["source"] == "remote" and st["restore"]["batchId"] >= before - 1, st["restore"]
        new = _running(_executors(core, namespace, attempt=2))
        assert len(new) == 2
        # attempt 2's runtime removed attempt 1's work dir on the shared volume once it held the fence
        work = sorted(p.name for p in hot.glob(f"{namespace}/scaled/*/attempt-*"))
        assert work == ["attempt-2"], work
        assert all(p.metadata.creation_timestamp >= old_gone.replace(microsecond=0) for p in new)
        print(f"\nexecutors: first checkpoint {first_checkpoint_s:.0f}s after create, executor pod created->running "
              f"{executor_start_s:.1f}s, killed executor replaced in {replaced_s:.0f}s, driver kill: old executors "
              f"gone in {old_gone_s:.1f}s, attempt 2 checkpointing after {recovered_s:.0f}s ({image})")
    finally:
        remove_hot_dir(jobs, hot)
