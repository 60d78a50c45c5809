"""Idempotent Kubernetes calls for one job: children with owner references, pods, status, Secret.

Blocking `kubernetes` client calls run in threads of the operator's own executor (KUBE_THREADS,
with as many pooled connections) so kopf's event loop never waits on them and they do not queue
behind asyncio's small default executor (min(32, cpus + 4) threads, shared with the store reads).
Answers are decoded from the raw JSON (no client model objects: cheaper at 1,000 jobs).
Creating what exists (409) and deleting what is gone (404) are successes: every action may be
repeated after an operator restart.
"""

from __future__ import annotations

import asyncio
import base64
import json
from concurrent.futures import ThreadPoolExecutor
from typing import Any

from kubernetes import client, config
from kubernetes.client.rest import ApiException

from sparkpoint.runtime.spec import API_GROUP, API_VERSION

PLURAL = "streamingjobs"
KUBE_THREADS = 24
# Threads routine status writes (a round that only triggered a checkpoint) may hold at once: the
# rest stay free for what a restart waits on (its status intent, the creates), which otherwise
# queued behind hundreds of routine PATCHes on a slow API server (a deleted pod waited minutes).
ROUTINE_THREADS = 16


def load_config() -> client.ApiClient:
    """The in-cluster service account when running in a pod, else $KUBECONFIG (or ~/.kube/config).
    In-cluster first, as kopf logs in: a kubeconfig that happens to be in the image or $HOME must
    not replace the identity whose RBAC the chart grants."""
    try:
        config.load_incluster_config()
    except config.ConfigException:
        config.load_kube_config()
    conf = client.Configuration.get_default_copy()
    conf.connection_pool_maxsize = KUBE_THREADS  # one pooled connection per executor thread
    return client.ApiClient(conf)


def merge_patch(old: dict[str, Any], new: dict[str, Any]) -> dict[str, Any]:
    """A JSON merge patch (RFC 7386) turning `old` into `new`: removed keys become null."""
    patch: dict[str, Any] = {}
    for key, value in new.items():
        before = old.get(key)
        if isinstance(value, dict) and isinstance(before, dict):
            sub = merge_patch(before, value)
            if sub:
                patch[key] = sub
        elif value != before or key not in old:
            patch[key] = value
    for key in old:
        if key not in new:
            patch[key] = None
    return patch


def _json(resp: Any) -> dict[str, Any]:
    return json.loads(resp.data) if resp.data else {}


class Kube:
    def __init__(self, api: client.ApiClient, threads: int = KUBE_THREADS):
        self.core = client.CoreV1Api(api)
        self.networking = client.NetworkingV1Api(api)
        self.custom = client.CustomObjectsApi(api)
        self._executor = ThreadPoolExecutor(threads, thread_name_prefix="kube")
        self._routine = asyncio.Semaphore(min(ROUTINE_THREADS, max(1, threads - 1)))

    async def _run(self, fn: Any, *args: Any, **kwargs: Any) -> Any:
        """fn(*args, **kwargs) in the executor. With _preload_content=False the answer's body is read
        there too (reading it later, on the event loop, would block the loop on the socket)."""
        def call() -> Any:
            resp = fn(*args, **kwargs)
            return _json(resp) if kwargs.get("_preload_content") is False else resp
        return await asyncio.get_running_loop().run_in_executor(self._executor, call)

    # --- reads --------------------------------------------------------------------------------------
    async def get_job(self, namespace: str, name: str) -> dict[str, Any] | None:
        try:
            return await self._run(self.custom.get_namespaced_custom_object, API_GROUP, API_VERSION,
                                   namespace, PLURAL, name)
        except ApiException as exc:
            if exc.status == 404:
                return None
            raise

    async def get_pod(self, namespace: str, name: str) -> dict[str, Any] | None:
        try:
            return await self._run(self.core.read_namespaced_pod, name, namespace, _preload_content=False)
        except ApiException as exc:
            if exc.status == 404:
                return None
            raise

    async def get_node(self, name: str) -> dict[str, Any] | None:
        """The Node (None: deleted). Read only while a job's runtime is silent (lost_attempt.py)."""
        try:
            return await self._run(self.core.read_node, name, _preload_content=False)
        except ApiException as exc:
            if exc.status == 404:
                return None
            raise

    async def job_pods(self, namespace: str, name: str) -> list[dict[str, Any]]:
        resp = await self._run(self.core.list_namespaced_pod, namespace,
                               label_selector=f"{API_GROUP}/job={name},app.kubernetes.io/component=runtime",
                               _preload_content=False)
        return resp.get("items", [])

    async def executor_pods(self, namespace: str, name: str) -> list[dict[str, Any]]:
        """The executor pods Spark started for any attempt of the job (terminating ones included)."""
        resp = await self._run(self.core.list_namespaced_pod, namespace,
                               label_selector=f"{API_GROUP}/job={name},spark-role=executor", _preload_content=False)
        return resp.get("items", [])

    async def secret_data(self, namespace: str, name: str) -> dict[str, str]:
        """The Secret's keys decoded; the values go to open_store only (never logged)."""
        resp = await self._run(self.core.read_namespaced_secret, name, namespace, _preload_content=False)
        return {k: base64.b64decode(v).decode() for k, v in (resp.get("data") or {}).items()}

    # --- writes -------------------------------------------------------------------------------------
    async def create(self, body: dict[str, Any]) -> bool:
        """Create a Pod/Service/ConfigMap/Secret/NetworkPolicy; False if it already exists."""
        ns = body["metadata"]["namespace"]
        fn = {"Pod": self.core.create_namespaced_pod, "Service": self.core.create_namespaced_service,
              "ConfigMap": self.core.create_namespaced_config_map,
              "Secret": self.core.create_namespaced_secret,
              "NetworkPolicy": self.networking.create_namespaced_network_policy}[body["kind"]]
        try:
            await self._run(fn, ns, body, _preload_content=False)
            return True
        except ApiException as exc:
            if exc.status == 409:
                return False
            raise

    async def apply_config_map(self, body: dict[str, Any], exists: bool = False) -> None:
        """Create or replace (each attempt's ConfigMap carries its own restore point). `exists`:
        it most likely does (a later attempt), so replace first: one call less on a restart."""
        meta = body["metadata"]
        if exists:
            try:
                await self._run(self.core.replace_namespaced_config_map, meta["name"], meta["namespace"], body,
                                _preload_content=False)
                return
            except ApiException as exc:
                if exc.status != 404:
                    raise
        if not await self.create(body):
            await self._run(self.core.replace_namespaced_config_map, meta["name"], meta["namespace"], body,
                            _preload_content=False)

    async def patch_config_map(self, namespace: str, name: str, patch: dict[str, Any]) -> None:
        """A merge patch; a ConfigMap not there yet is no error (the attempt's create writes it whole)."""
        try:
            await self._run(self.core.patch_namespaced_config_map, name, namespace, patch, _preload_content=False)
        except ApiException as exc:
            if exc.status != 404:
                raise

    async def delete_pod(self, namespace: str, name: str, force: bool = False) -> None:
        kwargs: dict[str, Any] = {"grace_period_seconds": 0} if force else {}
        try:
            await self._run(self.core.delete_namespaced_pod, name, namespace, _preload_content=False, **kwargs)
        except ApiException as exc:
            if exc.status != 404:
                raise

    async def patch_status(self, namespace: str, name: str, patch: dict[str, Any],
                           routine: bool = False) -> dict[str, Any] | None:
        """The object as the API server stored it, None when there was nothing to patch.
        `routine`: nothing waits for it, so it never takes the threads kept for urgent calls."""
        if not patch:
            return None
        call = (self.custom.patch_namespaced_custom_object_status, API_GROUP, API_VERSION,
                namespace, PLURAL, name, {"status": patch})
        options = {"_content_type": "application/merge-patch+json", "_preload_content": False}
        if not routine:
            return await self._run(*call, **options)
        async with self._routine:
            return await self._run(*call, **options)

    async def ensure_peering(self, name: str, namespaces: list[str] | None) -> bool:
        """Create kopf's peering object(s) (cluster-wide when namespaces is None); False when the
        peering CRDs are not installed (then replicas cannot see each other)."""
        try:
            if namespaces is None:
                body = {"apiVersion": "kopf.dev/v1", "kind": "ClusterKopfPeering", "metadata": {"name": name}}
                await self._run(self.custom.create_cluster_custom_object, "kopf.dev", "v1", "clusterkopfpeerings", body)
            for ns in namespaces or []:
                body = {"apiVersion": "kopf.dev/v1", "kind": "KopfPeering", "metadata": {"name": name, "namespace": ns}}
                try:
                    await self._run(self.custom.create_namespaced_custom_object, "kopf.dev", "v1", ns,
                                    "kopfpeerings", body)
                except ApiException as exc:
                    if exc.status != 409:
                        raise
        except ApiException as exc:
            if exc.status == 404:
                return False
            if exc.status != 409:
                raise
        return True
