"""A StreamingJob whose spec.image is the locally built sparkpoint/runtime:dev: on the local
cluster the node agent runs its containers chrooted into that image (image mode), so this is the
real image's runtime and GC sidecar reaching checkpoints in the cluster's MinIO, as uid 185.

Needs `make image` (make test builds it first); without the image the test skips, or fails when
SPARKPOINT_REQUIRE_IMAGES=1."""

from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path

import pytest
from operator_jobs import Jobs

RUNTIME_IMAGE = "sparkpoint/runtime:dev"
OPERATOR_IMAGE = "sparkpoint/operator:dev"


def require_image(image: str) -> None:
    present = shutil.which("buildah") and subprocess.run(
        ["buildah", "inspect", "--type", "image", image], capture_output=True).returncode == 0
    if not present:
        if os.environ.get("SPARKPOINT_REQUIRE_IMAGES") == "1":
            pytest.fail(f"{image} is not in buildah's store: run `make image`")
        pytest.skip(f"{image} is not in buildah's store: run `make image`")


def container_pid(pod, name: str) -> int:
    """A host pid of the container: the node agent's id names it; on a real node (containerd) it is a
    process whose cgroup path holds the container id (cgroupfs)."""
    status = next(c for c in pod.status.container_statuses if c.name == name)
    runtime, ident = (status.container_id or "").split("://", 1)
    if runtime == "sparkpoint":
        return int(ident.rsplit("/", 1)[1])
    assert runtime == "containerd", status
    pids = []
    for proc in Path("/proc").iterdir():
        try:
            if proc.name.isdigit() and ident in (proc / "cgroup").read_text():
                pids.append(int(proc.name))
        except OSError:
            continue
    assert pids, f"no process in the cgroup of {status.container_id}"
    return min(pids)


def proc_ids(pid: int) -> tuple[int, int]:
    fields = dict(line.split(":", 1) for line in Path(f"/proc/{pid}/status").read_text().splitlines())
    return int(fields["Uid"].split()[1]), int(fields["Gid"].split()[1])


# The operator test below covers this too (with the operator from its image): full tier only.
@pytest.mark.slow
@pytest.mark.timeout(600)
def test_job_from_the_runtime_image_reaches_checkpoints(api_client, core, namespace, operator, store_env):
    require_image(RUNTIME_IMAGE)
    jobs = Jobs(api_client, namespace, store_env)
    jobs.create("imaged", image=RUNTIME_IMAGE)
    st = jobs.wait_status("imaged", "a completed checkpoint in status",
                          lambda s: len(s.get("checkpoints") or []) >= 1, timeout=420, operator=operator)
    assert st["latestCheckpoint"]["bytes"] > 0
    # The runtime process sees the image's root (its JRE stamp, its Spark layout), not the host's.
    # (The GC sidecar runs from the same image; tests/image runs it there. Here its metrics port
    # 9090 is shared by every pod on the host network, so it may be restarting.)
    pid = container_pid(core.read_namespaced_pod(st["pod"], namespace), "runtime")
    assert os.readlink(f"/proc/{pid}/root") != "/"
    root = Path(f"/proc/{pid}/root")
    assert (root / "opt/sparkpoint/jre-version").is_file()
    assert (root / "opt/spark/work-dir").is_dir()
    assert proc_ids(pid) == (185, 185)


@pytest.mark.timeout(720)
def test_operator_from_its_image_runs_a_job_from_the_runtime_image(api_client, core, namespace, streamingjob_crd,
                                                                    peering_crds, store_env):
    """The operator itself as a pod of sparkpoint/operator:dev (in-cluster config from its
    service-account token, read-only root, uid 185), running a job from the runtime image."""
    from kube_helpers import GROUP, PLURAL, VERSION, free_port, wait_for
    from kubernetes import client

    require_image(RUNTIME_IMAGE)
    require_image(OPERATOR_IMAGE)
    rbac = client.RbacAuthorizationV1Api(api_client)
    core.create_namespaced_service_account(namespace, client.V1ServiceAccount(
        metadata=client.V1ObjectMeta(name="sparkpoint-operator")))
    # Test-only breadth: the chart's least-privilege RBAC is tested with the chart.
    binding = f"{namespace}-operator"
    rbac.create_cluster_role_binding(client.V1ClusterRoleBinding(
        metadata=client.V1ObjectMeta(name=binding),
        role_ref=client.V1RoleRef(api_group="rbac.authorization.k8s.io", kind="ClusterRole", name="cluster-admin"),
        subjects=[client.RbacV1Subject(kind="ServiceAccount", name="sparkpoint-operator", namespace=namespace)]))
    port = free_port()
    core.create_namespaced_pod(namespace, {
        "apiVersion": "v1", "kind": "Pod", "metadata": {"name": "operator"},
        "spec": {"serviceAccountName": "sparkpoint-operator", "restartPolicy": "Always",
                 "securityContext": {"runAsNonRoot": True},
                 "containers": [{"name": "operator", "image": OPERATOR_IMAGE,
                                 "args": ["--namespace", namespace, "--metrics-port", str(port)],
                                 "securityContext": {"readOnlyRootFilesystem": True},
                                 "volumeMounts": [{"name": "tmp", "mountPath": "/tmp"}]}],
                 "volumes": [{"name": "tmp", "emptyDir": {}}]}})
    custom = client.CustomObjectsApi(api_client)
    jobs = Jobs(api_client, namespace, store_env)
    try:
        jobs.create("from-images", image=RUNTIME_IMAGE)
        st = jobs.wait_status("from-images", "a completed checkpoint in status",
                              lambda s: len(s.get("checkpoints") or []) >= 1, timeout=480)
        operator_pid = container_pid(core.read_namespaced_pod("operator", namespace), "operator")
        assert (Path(f"/proc/{operator_pid}/root") / "opt/sparkpoint/crds").is_dir()
        assert not (Path(f"/proc/{operator_pid}/root") / "opt/sparkpoint/jre-version").exists()
        assert proc_ids(operator_pid) == (185, 185)
        runtime_pid = container_pid(core.read_namespaced_pod(st["pod"], namespace), "runtime")
        assert (Path(f"/proc/{runtime_pid}/root") / "opt/sparkpoint/jre-version").is_file()
    finally:
        # Jobs go while the operator still runs their finalizer; then the operator and its binding.
        try:
            custom.delete_collection_namespaced_custom_object(GROUP, VERSION, namespace, PLURAL)
            wait_for("the StreamingJobs deleted", lambda: not custom.list_namespaced_custom_object(
                GROUP, VERSION, namespace, PLURAL)["items"], timeout=180)
        finally:
            rbac.delete_cluster_role_binding(binding)
