"""The plugin's calls to the API server (kubernetes client, $KUBECONFIG and --context like kubectl)."""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any

from kubernetes import client, config

from sparkpoint.runtime.spec import API_GROUP, API_VERSION

JOBS, SAVEPOINTS = "streamingjobs", "streamingjobsavepoints"
SAVEPOINT_TERMINAL = ("Completed", "Failed")


class Kube:
    def __init__(self, context: str | None, namespace: str | None, kubeconfig: str | None = None):
        api = config.new_client_from_config(config_file=kubeconfig, context=context)
        if namespace is None:
            contexts, active = config.list_kube_config_contexts(config_file=kubeconfig)
            chosen = next((c for c in contexts if c["name"] == context), active) if context else active
            namespace = (chosen or {}).get("context", {}).get("namespace") or "default"
        self.namespace = namespace
        self.api = api
        self.custom, self.core = client.CustomObjectsApi(api), client.CoreV1Api(api)

    def list_jobs(self, all_namespaces: bool) -> list[dict]:
        if all_namespaces:
            return _document(self.custom.list_cluster_custom_object(API_GROUP, API_VERSION, JOBS))["items"]
        return _document(self.custom.list_namespaced_custom_object(API_GROUP, API_VERSION, self.namespace, JOBS))["items"]

    def job(self, name: str) -> dict:
        return _document(self.custom.get_namespaced_custom_object(API_GROUP, API_VERSION, self.namespace, JOBS, name))

    def patch_job(self, name: str, patch: dict) -> dict:
        return _document(self.custom.patch_namespaced_custom_object(API_GROUP, API_VERSION, self.namespace, JOBS, name, patch))

    def create_savepoint(self, body: dict) -> dict:
        return _document(self.custom.create_namespaced_custom_object(API_GROUP, API_VERSION, self.namespace, SAVEPOINTS, body))

    def wait_savepoint(self, name: str, timeout: float, on_state: Callable[[dict], None]) -> dict:
        """Poll the StreamingJobSavepoint until Completed/Failed (or `timeout`), reporting each state."""
        deadline = time.monotonic() + timeout
        while True:
            obj = _document(self.custom.get_namespaced_custom_object(API_GROUP, API_VERSION, self.namespace, SAVEPOINTS, name))
            status = obj.get("status") or {}
            on_state(status)
            if status.get("state") in SAVEPOINT_TERMINAL or time.monotonic() > deadline:
                return obj
            time.sleep(1.0)

    def events(self, all_namespaces: bool) -> list[dict[str, Any]]:
        """The Events of the namespace (or of all), as JSON documents; plugin/events.py picks a job's."""
        answer = self.core.list_event_for_all_namespaces() if all_namespaces else \
            self.core.list_namespaced_event(self.namespace)
        return list(_document(self.api.sanitize_for_serialization(answer)).get("items") or [])

    def pods(self, label_selector: str) -> list[dict[str, Any]]:
        """Pods of the namespace matching the selector, as JSON documents (camelCase, as kubectl shows them)."""
        answer = self.api.sanitize_for_serialization(self.core.list_namespaced_pod(self.namespace,
                                                                                  label_selector=label_selector))
        return list(_document(answer).get("items") or [])

    def services(self, namespace: str, selector: str) -> list[dict]:
        answer = self.core.list_namespaced_service(namespace, label_selector=selector)
        return [self.core.api_client.sanitize_for_serialization(s) for s in answer.items]

    def service_get(self, namespace: str, service: dict, port: int, path: str) -> bytes:
        """GET `path` on `port` of a ready pod of the Service through the API server's pod proxy (not
        the service proxy: it needs the Service's endpoints, which not every cluster fills)."""
        selector = ",".join(f"{k}={v}" for k, v in ((service.get("spec") or {}).get("selector") or {}).items())
        pods = self.core.list_namespaced_pod(namespace, label_selector=selector).items if selector else []
        ready = [p.metadata.name for p in pods if p.metadata and p.status and any(
            c.type == "Ready" and c.status == "True" for c in p.status.conditions or [])]
        if not ready:
            raise ValueError(f"no ready pod behind service {service['metadata']['name']} in namespace {namespace}")
        answer = self.core.connect_get_namespaced_pod_proxy_with_path(
            f"{ready[0]}:{port}", namespace, path, _preload_content=False)  # raw: else repr() of JSON
        return bytes(answer.data)  # type: ignore[attr-defined]  # typed str, a urllib3 response without preloading

    def logs(self, pod: str, *, tail: int | None, follow: bool, since: float | None = None) -> Any:
        kwargs: dict[str, Any] = {"container": "runtime", "follow": follow, "_preload_content": not follow}
        if tail is not None:
            kwargs["tail_lines"] = tail
        if since is not None:
            kwargs["since_seconds"] = max(1, int(since))
        return self.core.read_namespaced_pod_log(pod, self.namespace, **kwargs)


def _document(answer: object) -> dict[str, Any]:
    """The client types its custom-object calls' answers as `object`; they are the JSON document."""
    if not isinstance(answer, dict):
        raise TypeError(f"expected a JSON object from the API, got {type(answer).__name__}")
    return answer
