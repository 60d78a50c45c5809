"""`kubectl-sparkpoint` against a real API server, the operator and a real job: list, status,
checkpoints, savepoint (a StreamingJobSavepoint the operator completes), suspend, resume, logs,
restore's patch, with -n and -o as kubectl has them."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
import yaml
from kube_helpers import GROUP, PLURAL, REPO, VERSION, install_crd, python_container, wait_for
from kubernetes import client
from operator_jobs import Jobs

PLUGIN = shutil.which("kubectl-sparkpoint", path=str(Path(sys.executable).parent)) or "kubectl-sparkpoint"


def plugin(*args: str, check: bool = True, timeout: float = 300) -> subprocess.CompletedProcess:
    print(f"kubectl-sparkpoint {' '.join(args)}", flush=True)
    out = subprocess.run([PLUGIN, *args], capture_output=True, text=True, timeout=timeout, env=os.environ)
    if check:
        assert out.returncode == 0, f"kubectl-sparkpoint {' '.join(args)}: {out.returncode}\n{out.stdout}\n{out.stderr}"
    return out


def assert_plugin_reads(namespace: str, job: str) -> None:
    """What the plugin shows of a Running job with a checkpoint (list, status, checkpoints, logs) and
    how it refuses bad input; `make test` runs this against the Helm-installed operator
    (test_operator_run.py), the slow test below adds the commands that change a job."""
    ns = ["-n", namespace]
    table = plugin("list", *ns).stdout.splitlines()
    assert table[0].split()[:3] == ["NAME", "PHASE", "CHECKPOINT"]
    assert table[1].split()[:2] == [job, "Running"] and table[1].split()[2].startswith("chk-")
    assert f"{job}-1" in plugin("list", *ns, "-o", "wide").stdout
    assert [j["metadata"]["name"] for j in json.loads(plugin("list", *ns, "-o", "json").stdout)["items"]] == [job]
    assert namespace in plugin("list", "-A").stdout

    status = plugin("status", job, *ns).stdout
    assert f"{namespace}/{job}" in status and "Running" in status and "CheckpointHealthy" in status
    assert yaml.safe_load(plugin("status", job, *ns, "-o", "yaml").stdout)["status"]["phase"] == "Running"
    listed = json.loads(plugin("checkpoints", job, *ns, "-o", "json").stdout)["checkpoints"]
    assert listed and all(c["id"].startswith("chk-") for c in listed)
    assert listed[-1]["id"] in plugin("checkpoints", job, *ns).stdout
    assert plugin("logs", job, *ns, "--tail", "50").stdout.strip()

    bad = plugin("restore", job, *ns, "--from", "Not_A_Name", check=False)
    assert bad.returncode == 2 and "--from" in bad.stderr
    missing = plugin("status", "nope", *ns, check=False)
    assert missing.returncode == 1 and "not found" in missing.stderr


@pytest.fixture
def savepoint_crd(api_client) -> None:
    install_crd(client.ApiextensionsV1Api(api_client),
                yaml.safe_load((REPO / "crds" / "streamingjobsavepoint.yaml").read_text()))


@pytest.mark.slow
@pytest.mark.timeout(1500)
def test_plugin_on_a_running_job(api_client, namespace, savepoint_crd, operator, store_env):
    jobs = Jobs(api_client, namespace, store_env)
    jobs.create("clicks", **{"job.sink": {"kind": "console"}, "checkpoint.interval": "5s"})
    jobs.wait_status("clicks", "Running with a checkpoint",
                     lambda s: s.get("phase") == "Running" and s.get("latestCheckpoint"), timeout=300, operator=operator)
    ns = ["-n", namespace]
    assert_plugin_reads(namespace, "clicks")

    saved = plugin("savepoint", "clicks", *ns, "--name", "by-plugin", "--timeout", "240")
    assert "savepoint by-plugin completed" in saved.stdout, saved.stderr
    assert "Completed" in saved.stderr  # the progress bar's last state
    assert "by-plugin" in plugin("checkpoints", "clicks", *ns).stdout or \
        jobs.wait_status("clicks", "savepoint listed", lambda s: any(
            p["name"] == "by-plugin" for p in s.get("savepoints") or []), timeout=60)

    plugin("suspend", "clicks", *ns)
    assert jobs.get("clicks")["spec"]["state"] == "suspended"
    jobs.wait_status("clicks", "Suspended", lambda s: s.get("phase") == "Suspended", timeout=180, operator=operator)
    assert plugin("list", *ns).stdout.splitlines()[1].split()[1] == "Suspended"
    plugin("resume", "clicks", *ns)
    jobs.wait_status("clicks", "Running again", lambda s: s.get("phase") == "Running", timeout=300, operator=operator)

    # restore writes spec.restoreFrom (the operator applies it on the job's next attempt)
    plugin("restore", "clicks", *ns, "--from", "by-plugin")
    assert jobs.get("clicks")["spec"]["restoreFrom"] == {"savepoint": "by-plugin"}


def _executor_pod(core, namespace: str, job: str, attempt: int, n: int) -> None:
    """A pod labelled as Spark's backend and the runtime label a job's executor (a sleeping
    process, not a Spark executor: what the plugin shows is the pod, found by its labels)."""
    labels = {"sparkpoint.dev/job": job, "sparkpoint.dev/attempt": str(attempt), "spark-role": "executor"}
    core.create_namespaced_pod(namespace, client.V1Pod(
        metadata=client.V1ObjectMeta(name=f"{job}-{attempt}-exec-{n}", labels=labels),
        spec=client.V1PodSpec(containers=[python_container("import time; time.sleep(600)", name="executor")],
                              termination_grace_period_seconds=0)))


def test_plugin_lists_a_jobs_executor_pods(api_client, core, namespace, streamingjob_crd):
    """`executors JOB` and `status JOB` against a real API server: the job's executor pods (by the
    labels sparkpoint.dev/job, sparkpoint.dev/attempt, spark-role=executor) with phase, node and
    restarts; another job's executors and the job's own non-executor pods are not listed."""
    custom = client.CustomObjectsApi(api_client)
    spec = {"job": {"entrypoint": "m:f"}, "spark": {"master": "k8s", "executors": {"instances": 2}},
            "checkpoint": {"hotVolume": {"hostPath": {"path": "/tmp/unused"}}}}
    custom.create_namespaced_custom_object(GROUP, VERSION, namespace, PLURAL, {
        "apiVersion": f"{GROUP}/{VERSION}", "kind": "StreamingJob", "metadata": {"name": "clicks"}, "spec": spec})
    custom.patch_namespaced_custom_object_status(GROUP, VERSION, namespace, PLURAL, "clicks", {
        "status": {"phase": "Running", "attempt": 2, "pod": "clicks-2"}})
    for attempt, n in ((2, 1), (2, 2), (1, 1)):
        _executor_pod(core, namespace, "clicks", attempt, n)
    _executor_pod(core, namespace, "other", 2, 1)
    core.create_namespaced_pod(namespace, client.V1Pod(  # the job's driver: labelled, but no spark-role
        metadata=client.V1ObjectMeta(name="clicks-2", labels={"sparkpoint.dev/job": "clicks"}),
        spec=client.V1PodSpec(containers=[python_container("import time; time.sleep(600)")],
                              termination_grace_period_seconds=0)))
    names = ["clicks-1-exec-1", "clicks-2-exec-1", "clicks-2-exec-2"]
    for name in names:
        wait_for(f"{name} Running", lambda n=name: core.read_namespaced_pod(n, namespace).status.phase == "Running",
                 timeout=120)
    node = core.read_namespaced_pod("clicks-2-exec-1", namespace).spec.node_name
    ns = ["-n", namespace]

    lines = plugin("executors", "clicks", *ns).stdout.splitlines()
    assert lines[0].split() == ["NAME", "ATTEMPT", "PHASE", "READY", "NODE", "RESTARTS", "AGE"]
    assert [line.split()[:6] for line in lines[1:]] == [
        ["clicks-1-exec-1", "1", "Running", "1/1", node, "0"], ["clicks-2-exec-1", "2", "Running", "1/1", node, "0"],
        ["clicks-2-exec-2", "2", "Running", "1/1", node, "0"]]
    listed = json.loads(plugin("executors", "clicks", *ns, "-o", "json").stdout)["items"]
    assert sorted(p["metadata"]["name"] for p in listed) == names

    status = plugin("status", "clicks", *ns).stdout
    assert "Executors:" in status and "clicks-2-exec-2" in status and "clicks-1-exec-1" not in status
    assert "1 executor pod(s) of other attempts still present (attempt 1)" in status

    empty = plugin("executors", "other-job", *ns, check=False)
    assert empty.returncode == 1 and "not found" in empty.stderr
