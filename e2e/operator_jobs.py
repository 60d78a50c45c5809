"""Helpers of the operator e2e tests: a StreamingJob with its storage Secret, reading its status."""

from __future__ import annotations

import base64
import copy
from typing import Any

from kube_helpers import GROUP, PLURAL, VERSION, pod_logs, wait_for
from kubernetes import client
from kubernetes.client.rest import ApiException

BUCKET = "sparkpoint-e2e"
SECRET = "store-creds"


def job_spec(namespace: str, **over: Any) -> dict[str, Any]:
    """A small windowed aggregation that checkpoints every 10 s to the cluster's MinIO."""
    spec = {
        "image": "sparkpoint:e2e",
        "job": {"entrypoint": "sparkpoint.examples.windowed_aggregation:build",
                "args": {"rows_per_batch": 200, "keys": 20}, "triggerInterval": "1s"},
        "spark": {"master": "local[1]", "resources": {"cpu": "100m", "memory": "1Gi"}, "shufflePartitions": 2},
        "checkpoint": {"interval": "10s", "timeout": "2m", "retain": 3,
                       "storage": {"url": f"s3://{BUCKET}/{namespace}", "secretRef": {"name": SECRET}}},
        "restart": {"maxRestarts": 5, "backoff": "1s", "maxBackoff": "5s"},
        "gc": {"interval": "30s"},
    }
    for path, value in over.items():
        node = spec
        keys = path.split(".")
        for key in keys[:-1]:
            node = node.setdefault(key, {})
        node[keys[-1]] = copy.deepcopy(value)
    return spec


class Jobs:
    def __init__(self, api_client: client.ApiClient, namespace: str, store_env: dict[str, str]):
        self.custom = client.CustomObjectsApi(api_client)
        self.core = client.CoreV1Api(api_client)
        self.namespace, self.store_env = namespace, store_env

    def create(self, name: str, **over: Any) -> dict[str, Any]:
        data = {k: base64.b64encode(v.encode()).decode() for k, v in self.store_env.items()}
        try:
            self.core.create_namespaced_secret(self.namespace, client.V1Secret(
                metadata=client.V1ObjectMeta(name=SECRET), data=data))
        except ApiException as error:
            if error.status != 409:
                raise
        body = {"apiVersion": f"{GROUP}/{VERSION}", "kind": "StreamingJob", "metadata": {"name": name},
                "spec": job_spec(self.namespace, **over)}
        return self.custom.create_namespaced_custom_object(GROUP, VERSION, self.namespace, PLURAL, body)

    def get(self, name: str) -> dict[str, Any]:
        return self.custom.get_namespaced_custom_object(GROUP, VERSION, self.namespace, PLURAL, name)

    def status(self, name: str) -> dict[str, Any]:
        return self.get(name).get("status") or {}

    def patch_spec(self, name: str, spec: dict[str, Any]) -> None:
        self.custom.patch_namespaced_custom_object(GROUP, VERSION, self.namespace, PLURAL, name, {"spec": spec})

    def delete(self, name: str, timeout: float = 300) -> None:
        """Delete the job and wait until the API server no longer has it (the finalizer done)."""
        self.custom.delete_namespaced_custom_object(GROUP, VERSION, self.namespace, PLURAL, name)

        def gone() -> bool:
            try:
                self.get(name)
                return False
            except ApiException as error:
                return error.status == 404
        wait_for(f"{name} deleted", gone, timeout=timeout, interval=1.0)

    def delete_all(self, timeout: float = 420) -> None:
        """Delete every StreamingJob of the namespace and wait until none is left (finalizers done)."""
        self.custom.delete_collection_namespaced_custom_object(GROUP, VERSION, self.namespace, PLURAL)
        wait_for("the namespace's StreamingJobs deleted", lambda: not self.custom.list_namespaced_custom_object(
            GROUP, VERSION, self.namespace, PLURAL)["items"], timeout=timeout, interval=1.0)

    def pods(self, name: str) -> list[client.V1Pod]:
        return self.core.list_namespaced_pod(self.namespace, label_selector=f"{GROUP}/job={name}").items

    def wait_status(self, name: str, what: str, check, timeout: float = 240, operator=None) -> dict[str, Any]:
        try:
            return wait_for(f"{name}: {what}", lambda: (lambda s: s if check(s) else None)(self.status(name)),
                            timeout=timeout, interval=1.0)
        except AssertionError as error:
            raise AssertionError(f"{error}\n{self.diagnostics(name, operator)}") from None

    def diagnostics(self, name: str, operator=None) -> str:
        out = [f"status: {self.status(name)}"]
        for pod in self.pods(name):
            out.append(f"--- pod {pod.metadata.name} {pod.status.phase}\n"
                       f"{pod_logs(self.core, self.namespace, pod.metadata.name, 'runtime')[-3000:]}")
        if operator is not None:
            out.append(f"--- operator log\n{operator.log()}")
        return "\n".join(out)


def condition(status: dict[str, Any], ctype: str) -> str | None:
    return next((c["status"] for c in status.get("conditions") or [] if c["type"] == ctype), None)


def state_partitions(manifest) -> set[int]:
    """The state partitions a checkpoint holds (state/<operator>/<partition>/...)."""
    parts = set()
    for entry in manifest.files:
        bits = entry.path.split("/")
        if len(bits) > 3 and bits[0] == "state" and bits[2].isdigit():
            parts.add(int(bits[2]))
    return parts
