"""A fake Node for the load benchmark: registers itself, keeps its Lease and Ready condition fresh,
and for every pod the scheduler binds to it claims a 127.x address, starts a stand-in runtime
there (fake_runtime.RuntimeFleet) and reports the pod Running and Ready. A pod being deleted is
stopped and removed at once (grace 0), as a kubelet does once its containers exited.

No process is started per pod: a thousand pods cost one event loop.
"""

from __future__ import annotations

import asyncio
import contextlib
import ipaddress
import logging
import time
from datetime import UTC, datetime
from typing import Any

from .fake_runtime import RuntimeFleet
from .kubeapi import ApiError, KubeApi

log = logging.getLogger("operator-load")
HEARTBEAT_SECONDS = 10.0
LEASE_SECONDS = 40
ATTEMPT_ANNOTATION = "sparkpoint.dev/attempt"
RUNTIME_CONTAINER = "runtime"


def stamp(ts: float | None = None) -> str:
    return datetime.fromtimestamp(ts if ts is not None else time.time(), UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


class AddressPool:
    """Pod IPs from a loopback network, one per pod uid; a released address is reused last."""

    def __init__(self, network: str):
        self.network = ipaddress.ip_network(network)
        if not self.network.is_loopback:
            raise ValueError(f"pod network {network} must be loopback (127.0.0.0/8)")
        self._fresh = self.network.hosts()
        self._released: list[str] = []
        self.by_uid: dict[str, str] = {}

    def claim(self, uid: str) -> str:
        if uid in self.by_uid:
            return self.by_uid[uid]
        ip = next(self._fresh, None)
        if ip is None:
            if not self._released:
                raise RuntimeError(f"no free pod address left in {self.network}")
            address = self._released.pop(0)
        else:
            address = str(ip)
        self.by_uid[uid] = address
        return address

    def release(self, uid: str) -> str | None:
        address = self.by_uid.pop(uid, None)
        if address is not None:
            self._released.append(address)
        return address


def node_body(name: str) -> dict[str, Any]:
    return {"apiVersion": "v1", "kind": "Node", "metadata": {"name": name, "labels": {
        "kubernetes.io/hostname": name, "kubernetes.io/os": "linux", "sparkpoint.dev/load-bench": "true"}}}


def node_status(name: str, host_ip: str, pods: int, ready: bool = True) -> dict[str, Any]:
    now = stamp()
    # Room for every pod of the benchmark whatever it requests: the node's size is not under test.
    resources = {"cpu": "100000", "memory": "1000Ti", "pods": str(pods), "ephemeral-storage": "1000Ti"}

    def condition(kind: str, status: bool, reason: str) -> dict[str, str]:
        return {"type": kind, "status": "True" if status else "False", "reason": reason, "message": reason,
                "lastHeartbeatTime": now, "lastTransitionTime": now}
    return {"capacity": resources, "allocatable": resources,
            "conditions": [condition("MemoryPressure", False, "KubeletHasSufficientMemory"),
                           condition("DiskPressure", False, "KubeletHasNoDiskPressure"),
                           condition("PIDPressure", False, "KubeletHasSufficientPID"),
                           condition("Ready", ready, "KubeletReady" if ready else "KubeletNotReady")],
            "addresses": [{"type": "InternalIP", "address": host_ip}, {"type": "Hostname", "address": name}],
            "nodeInfo": {"machineID": "", "systemUUID": "", "bootID": "", "kernelVersion": "", "osImage": "fake",
                         "containerRuntimeVersion": "fake://1", "kubeletVersion": "v1.33.0", "kubeProxyVersion": "",
                         "operatingSystem": "linux", "architecture": "amd64"}}


def running_status(ip: str, host_ip: str, containers: list[str], started: float) -> dict[str, Any]:
    """Pod status as a kubelet reports a pod whose containers all run and are ready."""
    at = stamp(started)
    conditions = [{"type": t, "status": "True", "lastTransitionTime": at}
                  for t in ("PodScheduled", "Initialized", "ContainersReady", "Ready")]
    statuses = [{"name": c, "ready": True, "started": True, "restartCount": 0, "image": "fake", "imageID": "fake",
                 "containerID": f"fake://{ip}/{c}", "state": {"running": {"startedAt": at}}} for c in containers]
    return {"phase": "Running", "podIP": ip, "podIPs": [{"ip": ip}], "hostIP": host_ip, "startTime": at,
            "conditions": conditions, "containerStatuses": statuses}


def exited_status(containers: list[str], now: float) -> dict[str, Any]:
    """The runtime container exited 0 (drained on POST /stop); the pod itself is gone soon after."""
    at = stamp(now)
    statuses = [{"name": c, "ready": False, "started": False, "restartCount": 0, "image": "fake", "imageID": "fake",
                 "state": {"terminated": {"exitCode": 0, "reason": "Completed", "startedAt": at, "finishedAt": at}}}
                for c in containers]
    return {"containerStatuses": statuses}


def pod_key(pod: dict[str, Any]) -> str:
    return f"{pod['metadata']['namespace']}/{pod['metadata']['name']}"


class FakeKubelet:
    def __init__(self, api: KubeApi, node: str, network: str, port: int, max_pods: int):
        self.api, self.node, self.max_pods = api, node, max_pods
        self.pool = AddressPool(network)
        self.host_ip = str(next(self.pool.network.hosts()))
        self.pool.claim("node")  # the node's own address is no pod's
        self.fleet = RuntimeFleet(port, on_stop=self._stopped)
        self.pods: dict[str, dict[str, Any]] = {}  # uid -> pod
        self.added_at: dict[str, float] = {}  # namespace/pod -> when it was reported Running
        self._tasks: list[asyncio.Task] = []
        self._stopping = asyncio.Event()

    # --- lifecycle ----------------------------------------------------------------------------------
    async def start(self) -> None:
        await self.fleet.start()
        await self.api.create("/api/v1/nodes", node_body(self.node))
        await self._heartbeat()
        self._tasks = [asyncio.create_task(self._heartbeat_loop(), name="heartbeat"),
                       asyncio.create_task(self._watch_loop(), name="pod-watch")]

    async def stop(self, delete_node: bool = True) -> None:
        self._stopping.set()
        for task in self._tasks:
            task.cancel()
        for task in self._tasks:
            with contextlib.suppress(asyncio.CancelledError, Exception):
                await task
        await self.fleet.close()
        if delete_node:
            with contextlib.suppress(ApiError, OSError):
                await self.api.delete(f"/api/v1/nodes/{self.node}")

    # --- node -----------------------------------------------------------------------------------------
    async def _heartbeat(self) -> None:
        await self.api.merge_patch(f"/api/v1/nodes/{self.node}/status",
                                   {"status": node_status(self.node, self.host_ip, self.max_pods)})
        renew = datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%S.%fZ")
        spec = {"holderIdentity": self.node, "leaseDurationSeconds": LEASE_SECONDS, "renewTime": renew}
        path = "/apis/coordination.k8s.io/v1/namespaces/kube-node-lease/leases"
        try:
            await self.api.merge_patch(f"{path}/{self.node}", {"spec": spec})
        except ApiError as exc:
            if exc.status != 404:
                raise
            await self.api.create(path, {"apiVersion": "coordination.k8s.io/v1", "kind": "Lease",
                                         "metadata": {"name": self.node, "namespace": "kube-node-lease"},
                                         "spec": spec})

    async def _heartbeat_loop(self) -> None:
        while not self._stopping.is_set():
            with contextlib.suppress(asyncio.TimeoutError):
                await asyncio.wait_for(self._stopping.wait(), HEARTBEAT_SECONDS)
            try:
                await self._heartbeat()
            except (TimeoutError, ApiError, OSError) as exc:
                log.warning("heartbeat failed: %s", exc)

    # --- pods -----------------------------------------------------------------------------------------
    async def _watch_loop(self) -> None:
        selector = f"spec.nodeName={self.node}"
        while not self._stopping.is_set():
            try:
                listing = await self.api.get("/api/v1/pods", fieldSelector=selector)
                live = {p["metadata"]["uid"] for p in listing["items"]}
                for uid in [u for u in self.pods if u not in live]:
                    await self._forget(uid)
                for pod in listing["items"]:
                    await self._observe(pod)
                version = listing["metadata"]["resourceVersion"]
                async for event in self.api.watch("/api/v1/pods", version, fieldSelector=selector):
                    if event["type"] == "ERROR":
                        break  # e.g. 410 Gone: relist
                    if event["type"] == "DELETED":
                        await self._forget(event["object"]["metadata"]["uid"])
                    else:
                        await self._observe(event["object"])
            except asyncio.CancelledError:
                raise
            except Exception as exc:  # noqa: BLE001 - the watch must outlive API hiccups
                log.warning("pod watch failed, relisting: %s", exc)
                await asyncio.sleep(1.0)

    async def _observe(self, pod: dict[str, Any]) -> None:
        uid, meta = pod["metadata"]["uid"], pod["metadata"]
        if meta.get("deletionTimestamp"):
            await self._delete(pod)
            return
        if uid in self.pods:
            return
        ip = self.pool.claim(uid)
        self.pods[uid] = pod
        attempt = int((meta.get("annotations") or {}).get(ATTEMPT_ANNOTATION, "0") or 0)
        await self.fleet.add(ip, pod_key(pod), attempt)
        containers = [c["name"] for c in pod["spec"]["containers"]]
        status = running_status(ip, self.host_ip, containers, time.time())
        try:
            await self.api.merge_patch(f"/api/v1/namespaces/{meta['namespace']}/pods/{meta['name']}/status",
                                       {"status": status})
        except ApiError as exc:
            if exc.status != 404:
                raise
        self.added_at.setdefault(pod_key(pod), time.time())

    async def _delete(self, pod: dict[str, Any]) -> None:
        meta = pod["metadata"]
        await self._forget(meta["uid"])
        await self.api.delete(f"/api/v1/namespaces/{meta['namespace']}/pods/{meta['name']}",
                              {"gracePeriodSeconds": 0, "preconditions": {"uid": meta["uid"]}})

    async def _forget(self, uid: str) -> None:
        self.pods.pop(uid, None)
        ip = self.pool.release(uid)
        if ip is not None:
            await self.fleet.remove(ip)

    async def _stopped(self, ip: str) -> None:
        """POST /stop: report the runtime container exited 0, as the real runtime would after draining."""
        uid = next((u for u, a in self.pool.by_uid.items() if a == ip), None)
        pod = self.pods.get(uid) if uid else None
        if pod is None:
            return
        meta = pod["metadata"]
        containers = [c["name"] for c in pod["spec"]["containers"]]
        with contextlib.suppress(ApiError):
            await self.api.merge_patch(f"/api/v1/namespaces/{meta['namespace']}/pods/{meta['name']}/status",
                                       {"status": exited_status(containers, time.time())})
