"""StreamingJobSavepoint end to end: a real API server, the real runtime in a pod, the real MinIO.

Creating a StreamingJobSavepoint for a running job takes a savepoint (status Completed, Ready=True,
the data in the store); the runtime restores a new attempt from it; deleting the resource deletes
the data (retain: false) or keeps it (the default); a savepoint of a missing job fails, naming why.

Who runs the job: the operator (`python -m sparkpoint.operator`, which loads the savepoint handlers)
once it exists; until then, or with SPARKPOINT_E2E_SAVEPOINT_STANDIN=1, the test plays the operator
core's part for the StreamingJob (its pod from operator/kube/builders.py, status phase Running + pod)
and runs only the savepoint handlers (`kopf run -m sparkpoint.operator.savepoint.handlers`).
Uses the e2e MinIO of e2e/conftest.py `store_env` (the local cluster's, or $SPARKPOINT_E2E_MINIO on kind).
"""

from __future__ import annotations

import base64
import importlib.util
import json
import os
import subprocess
import sys
import urllib.request
import uuid
from pathlib import Path

import pytest
import yaml
from kube_helpers import (
    GROUP,
    PEERING_CRD_FILE,
    VERSION,
    apply_crds,
    exists,
    install_crd,
    pod_logs,
    wait_for,
)
from kubernetes import client
from kubernetes.client.rest import ApiException

from sparkpoint.operator.kube import builders
from sparkpoint.operator.kube.control_token import new_token
from sparkpoint.runtime.spec import job as config
from sparkpoint.runtime.store import open_store
from sparkpoint.runtime.store.layout import JobRef, savepoint_manifest_key, savepoint_root
from sparkpoint.runtime.store.manifest import Manifest

REPO = Path(__file__).resolve().parents[1]
JOBS, SAVEPOINTS = "streamingjobs", "streamingjobsavepoints"
BUCKET = "sparkpoint-e2e"
STANDIN = bool(os.environ.get("SPARKPOINT_E2E_SAVEPOINT_STANDIN")) or \
    importlib.util.find_spec("sparkpoint.operator.__main__") is None
SPARK_START = 300  # a JVM start plus the first batch on a busy 2-core machine


@pytest.fixture(scope="module")
def crds(api_client) -> None:
    extensions = client.ApiextensionsV1Api(api_client)
    for name in ("streamingjob.yaml", "streamingjobsavepoint.yaml"):
        install_crd(extensions, yaml.safe_load((REPO / "crds" / name).read_text()))
    if not STANDIN:  # sparkpoint-operator waits for its peering object, whose CRD kopf ships
        apply_crds(extensions, PEERING_CRD_FILE)


class Credentials(dict):
    """The local MinIO's endpoint and keys; its repr hides them from assertion messages and logs."""

    def __repr__(self) -> str:
        return f"Credentials(endpoint={self['SPARKPOINT_S3_ENDPOINT']!r}, keys hidden)"


@pytest.fixture
def minio(store_env) -> Credentials:
    """The e2e MinIO (e2e/conftest.py `store_env`: the local cluster's, or $SPARKPOINT_E2E_MINIO on kind)."""
    return Credentials(store_env)


class Operator:
    """The operator process for one namespace; its output goes to a log file shown on failure."""

    def __init__(self, namespace: str, log: Path):
        if STANDIN:
            argv = [sys.executable, "-m", "kopf", "run", "--standalone", "--namespace", namespace,
                    "-m", "sparkpoint.operator.savepoint.handlers"]
        else:
            argv = [sys.executable, "-m", "sparkpoint.operator", "--namespace", namespace, "--metrics-port", "0"]
        self.log = log
        self.proc = subprocess.Popen(argv, stdout=log.open("wb"), stderr=subprocess.STDOUT, cwd=REPO)

    def output(self) -> str:
        return self.log.read_text(errors="replace")[-6000:]

    def stop(self) -> None:
        self.proc.terminate()
        try:
            self.proc.wait(20)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait(10)


@pytest.fixture
def operator(api_client, namespace, crds, tmp_path):
    custom = client.CustomObjectsApi(api_client)
    if not STANDIN:
        custom.create_namespaced_custom_object("kopf.dev", "v1", namespace, "kopfpeerings", {
            "apiVersion": "kopf.dev/v1", "kind": "KopfPeering", "metadata": {"name": "sparkpoint"}})
    op = Operator(namespace, tmp_path / "operator.log")
    yield op
    # Savepoints carry a finalizer: let the running operator release them, so the namespace can go.
    for item in custom.list_namespaced_custom_object(GROUP, VERSION, namespace, SAVEPOINTS)["items"]:
        custom.delete_namespaced_custom_object(GROUP, VERSION, namespace, SAVEPOINTS, item["metadata"]["name"])
    try:
        wait_for("savepoint resources to be finalized", lambda: not custom.list_namespaced_custom_object(
            GROUP, VERSION, namespace, SAVEPOINTS)["items"], timeout=60)
    finally:
        op.stop()
        for item in custom.list_namespaced_custom_object(GROUP, VERSION, namespace, SAVEPOINTS)["items"]:
            custom.patch_namespaced_custom_object(GROUP, VERSION, namespace, SAVEPOINTS, item["metadata"]["name"],
                                                  {"metadata": {"finalizers": None}})


def job_spec(namespace: str, endpoint: str) -> dict:
    return {
        "image": "sparkpoint:e2e",
        "job": {"entrypoint": "sparkpoint.examples.windowed_aggregation:build",
                "args": {"rows_per_batch": 200, "keys": 50}, "triggerInterval": "1s"},
        "spark": {"master": "local[1]", "resources": {"cpu": "500m", "memory": "1Gi"}},
        "checkpoint": {"interval": "10s", "timeout": "2m",
                       "storage": {"url": f"s3://{BUCKET}/{namespace}", "endpoint": endpoint,
                                   "secretRef": {"name": "store-creds"}}},
    }


class Cluster:
    def __init__(self, api_client, namespace: str):
        self.core, self.custom, self.ns = client.CoreV1Api(api_client), client.CustomObjectsApi(api_client), namespace

    def job(self, name: str) -> dict:
        return self.custom.get_namespaced_custom_object(GROUP, VERSION, self.ns, JOBS, name)

    def savepoint(self, name: str) -> dict:
        return self.custom.get_namespaced_custom_object(GROUP, VERSION, self.ns, SAVEPOINTS, name)

    def create_savepoint(self, name: str, spec: dict) -> dict:
        return self.custom.create_namespaced_custom_object(GROUP, VERSION, self.ns, SAVEPOINTS, {
            "apiVersion": f"{GROUP}/{VERSION}", "kind": "StreamingJobSavepoint", "metadata": {"name": name},
            "spec": spec})

    def delete_savepoint(self, name: str) -> None:
        self.custom.delete_namespaced_custom_object(GROUP, VERSION, self.ns, SAVEPOINTS, name)
        wait_for(f"savepoint resource {name} to be gone", lambda: not exists(lambda: self.savepoint(name)), 90)

    def wait_state(self, name: str, state: str, op: Operator, timeout: float) -> dict:
        try:
            return wait_for(f"savepoint {name} to be {state}", lambda: (
                lambda sp: sp if (sp.get("status") or {}).get("state") == state else None)(self.savepoint(name)),
                timeout=timeout, interval=1)
        except AssertionError as error:
            raise AssertionError(f"{error}\nresource: {self.savepoint(name)}\noperator:\n{op.output()}") from None

    def events(self, name: str) -> list[str]:
        found = self.core.list_namespaced_event(self.ns, field_selector=f"involvedObject.name={name}").items
        return [e.reason for e in found]

    def runtime_status(self, pod: str) -> dict:
        found = self.core.read_namespaced_pod(pod, self.ns)
        job = builders.JobRef(self.ns, found.metadata.labels[f"{GROUP}/job"], "")
        secret = self.core.read_namespaced_secret(builders.control_token_secret_name(job), self.ns)
        token = base64.b64decode(secret.data[builders.CONTROL_TOKEN_KEY]).decode()
        request = urllib.request.Request(f"http://{found.status.pod_ip}:{builders.CONTROL_PORT}/status",
                                         headers={"Authorization": f"Bearer {token}"})
        with urllib.request.urlopen(request, timeout=10) as answer:
            return json.loads(answer.read())

    # --- the operator core's part, played by the test (stand-in mode) ----------------------------
    def run_attempt(self, job: dict, attempt: int, restore_from: config.RestoreFrom | None = None) -> str:
        spec = config.parse_spec(job["spec"])
        ref = builders.JobRef(namespace=self.ns, name=job["metadata"]["name"], uid=job["metadata"]["uid"])
        cm = builders.build_config_map(ref, spec, restore_from)
        if exists(lambda: self.core.read_namespaced_config_map(cm["metadata"]["name"], self.ns)):
            self.core.replace_namespaced_config_map(cm["metadata"]["name"], self.ns, cm)
        else:
            self.core.create_namespaced_config_map(self.ns, cm)
        if not exists(lambda: self.core.read_namespaced_secret(builders.control_token_secret_name(ref), self.ns)):
            self.core.create_namespaced_secret(self.ns, builders.build_control_token_secret(ref, new_token()))
        pod = self.core.create_namespaced_pod(self.ns, builders.build_pod(ref, spec, attempt)).metadata.name
        self.wait_ready(pod)
        self.custom.patch_namespaced_custom_object_status(GROUP, VERSION, self.ns, JOBS, ref.name, {
            "status": {"phase": "Running", "pod": pod, "attempt": attempt}})
        return pod

    def wait_ready(self, pod: str) -> None:
        def ready():
            p = self.core.read_namespaced_pod(pod, self.ns)
            return p.status.phase == "Running" and any(
                c.name == "runtime" and c.ready for c in p.status.container_statuses or [])
        try:
            wait_for(f"pod {pod} to be Ready", ready, timeout=SPARK_START, interval=1)
        except AssertionError as error:
            raise AssertionError(f"{error}\n{pod_logs(self.core, self.ns, pod, 'runtime')[-4000:]}") from None

    def stop_attempt(self, job: str, pod: str) -> None:
        self.custom.patch_namespaced_custom_object_status(GROUP, VERSION, self.ns, JOBS, job, {
            "status": {"phase": "Recovering"}})
        self.core.delete_namespaced_pod(pod, self.ns)
        wait_for(f"pod {pod} to be gone", lambda: not exists(lambda: self.core.read_namespaced_pod(pod, self.ns)), 120)

    def wait_job_running(self, name: str, op: Operator, not_pod: str | None = None) -> str:
        def running():
            status = self.job(name).get("status") or {}
            return status.get("phase") == "Running" and status.get("pod") != not_pod and status.get("pod")
        try:
            pod = wait_for(f"job {name} to be Running", running, timeout=SPARK_START, interval=1)
        except AssertionError as error:
            raise AssertionError(f"{error}\noperator:\n{op.output()}") from None
        self.wait_ready(pod)
        return pod


def manifest_in_store(env: dict, job: JobRef, name: str) -> Manifest | None:
    store = open_store(f"s3://{BUCKET}/{job.namespace}", env=env)
    key = savepoint_manifest_key(job, name)
    return Manifest.from_json(store.get_bytes(key), where=key) if store.stat(key) else None


def keys_under_savepoint(env: dict, job: JobRef, name: str) -> list[str]:
    store = open_store(f"s3://{BUCKET}/{job.namespace}", env=env)
    return [i.key for i in store.list(savepoint_root(job, name) + "/")]


@pytest.mark.slow
@pytest.mark.timeout(1200)
def test_savepoint_resource_takes_restores_and_deletes(api_client, namespace, minio, operator) -> None:
    k = Cluster(api_client, namespace)
    k.core.create_namespaced_secret(namespace, client.V1Secret(
        metadata=client.V1ObjectMeta(name="store-creds"),
        string_data={key: minio[key] for key in ("AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY")}))
    # A savepoint of a job that does not exist fails (after a short grace), naming why.
    k.create_savepoint("orphan", {"jobName": "no-such-job"})
    job = k.custom.create_namespaced_custom_object(GROUP, VERSION, namespace, JOBS, {
        "apiVersion": f"{GROUP}/{VERSION}", "kind": "StreamingJob", "metadata": {"name": "clicks"},
        "spec": job_spec(namespace, minio["SPARKPOINT_S3_ENDPOINT"])})
    ref = JobRef(namespace, "clicks")
    pod = k.run_attempt(job, 1) if STANDIN else k.wait_job_running("clicks", operator)

    # --- take two savepoints: one to delete with its data, one kept by default
    k.create_savepoint("before-upgrade", {"jobName": "clicks", "retain": False})
    k.create_savepoint("nightly.1", {"jobName": "clicks", "savepointName": "nightly-1"})
    done = k.wait_state("before-upgrade", "Completed", operator, timeout=240)
    status = done["status"]
    stored = manifest_in_store(minio, ref, "before-upgrade")
    assert stored is not None and stored.kind == "savepoint"
    assert status["id"] == "before-upgrade" and status["sizeBytes"] == stored.totals.bytes > 0
    assert status["checkpoint"] == stored.source_checkpoint and status["completedAt"]
    assert status["observedGeneration"] == done["metadata"]["generation"]
    ready = next(c for c in status["conditions"] if c["type"] == "Ready")
    assert ready["status"] == "True"
    assert {"Triggered", "SavepointCompleted"} <= set(k.events("before-upgrade"))
    assert k.wait_state("nightly.1", "Completed", operator, timeout=240)["status"]["id"] == "nightly-1"
    assert manifest_in_store(minio, ref, "nightly-1") is not None
    # Where the data is (to delete it after the job is gone): the URL and the Secret's name, no credentials.
    assert status["storage"] == {"url": f"s3://{BUCKET}/{namespace}", "endpoint": minio["SPARKPOINT_S3_ENDPOINT"],
                                 "secretName": "store-creds"}
    text = json.dumps(k.savepoint("before-upgrade"))
    assert minio["AWS_ACCESS_KEY_ID"] not in text and minio["AWS_SECRET_ACCESS_KEY"] not in text

    # --- a snapshot is immutable
    with pytest.raises(ApiException) as refused:
        k.custom.patch_namespaced_custom_object(GROUP, VERSION, namespace, SAVEPOINTS, "before-upgrade",
                                                {"spec": {"retain": True}})
    assert refused.value.status == 422 and "spec is immutable" in refused.value.body

    # --- a new attempt restores from the savepoint
    if STANDIN:
        k.stop_attempt("clicks", pod)
        pod = k.run_attempt(k.job("clicks"), 2, config.RestoreFrom(savepoint="before-upgrade"))
    else:
        # As with Flink's initialSavepointPath: a new StreamingJob of the same name (same store root)
        # starts from the savepoint. Deleting the job keeps its savepoints.
        k.custom.delete_namespaced_custom_object(GROUP, VERSION, namespace, JOBS, "clicks")
        wait_for("the job to be deleted", lambda: not exists(lambda: k.job("clicks")), timeout=240, interval=1)
        wait_for(f"pod {pod} to be gone", lambda: not exists(lambda: k.core.read_namespaced_pod(pod, namespace)), 120)
        spec = job_spec(namespace, minio["SPARKPOINT_S3_ENDPOINT"]) | {"restoreFrom": {"savepoint": "before-upgrade"}}
        k.custom.create_namespaced_custom_object(GROUP, VERSION, namespace, JOBS, {
            "apiVersion": f"{GROUP}/{VERSION}", "kind": "StreamingJob", "metadata": {"name": "clicks"}, "spec": spec})
        pod = k.wait_job_running("clicks", operator)
    restore = k.runtime_status(pod)["restore"]
    assert restore["source"] == "remote" and "savepoint:before-upgrade" in restore["reason"], restore
    assert restore["batchId"] == stored.batch_id

    # --- delete: retain false deletes the data, the default keeps it
    k.delete_savepoint("before-upgrade")
    assert manifest_in_store(minio, ref, "before-upgrade") is None
    assert keys_under_savepoint(minio, ref, "before-upgrade") == []
    k.delete_savepoint("nightly.1")
    assert manifest_in_store(minio, ref, "nightly-1") is not None

    orphan = k.wait_state("orphan", "Failed", operator, timeout=90)["status"]
    assert "does not exist" in orphan["error"]
    assert next(c for c in orphan["conditions"] if c["type"] == "Ready")["reason"] == "JobNotFound"


def test_invalid_savepoints_are_rejected_naming_the_field(api_client, namespace, crds) -> None:
    k = Cluster(api_client, namespace)
    cases = [("a.b", {"jobName": "j"}, "set spec.savepointName"),
             ("ok", {"jobName": "Not_A_Label"}, "spec.jobName"),
             ("ok", {"jobName": "j", "savepointName": "x" * 64}, "spec.savepointName"),
             ("ok", {}, "spec.jobName")]
    for name, spec, words in cases:
        with pytest.raises(ApiException) as refused:
            k.create_savepoint(name, spec)
        assert refused.value.status == 422 and words in refused.value.body, (spec, refused.value.body)
    created = k.create_savepoint(f"sp-{uuid.uuid4().hex[:6]}", {"jobName": "j"})
    assert created["spec"]["retain"] is True  # the default keeps the data
