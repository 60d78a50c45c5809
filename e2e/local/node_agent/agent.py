"""The node agent's main loop: register the Node, keep its Lease and Ready condition fresh,
give each pod bound to the node a worker thread and a 127.x.y.z address."""

from __future__ import annotations

import contextlib
import ipaddress
import logging
import os
import threading
import time
from datetime import UTC, datetime
from pathlib import Path

from kube import ApiError
from logs_server import LogsServer
from worker import AgentContext, PodWorker, now_iso

log = logging.getLogger("node-agent")
HEARTBEAT_SECONDS = 5
LEASE_SECONDS = 40
POLL_SECONDS = 0.5
# All of 127/8 is loopback on Linux. Two local clusters on one machine need different networks
# (their pods would collide on the same addresses and ports): SPARKPOINT_E2E_POD_NETWORK.
POD_NETWORK = ipaddress.ip_network(os.environ.get("SPARKPOINT_E2E_POD_NETWORK", "127.1.0.0/16"))


class AddressPool:
    """Pod IPs: one per pod uid, never shared by two live pods."""

    def __init__(self, network=POD_NETWORK):
        self.free = (str(ip) for ip in network.hosts())
        self.by_uid: dict[str, str] = {}

    def claim(self, uid: str, preferred: str | None = None) -> str:
        if uid in self.by_uid:
            return self.by_uid[uid]
        taken = set(self.by_uid.values())
        if preferred and ipaddress.ip_address(preferred) in POD_NETWORK and preferred not in taken:
            self.by_uid[uid] = preferred
            return preferred
        for candidate in self.free:
            if candidate not in taken:
                self.by_uid[uid] = candidate
                return candidate
        raise RuntimeError(f"no free pod address left in {POD_NETWORK}")

    def release(self, uid: str) -> None:
        self.by_uid.pop(uid, None)


def node_conditions(now: str, ready: bool) -> list[dict]:
    def condition(kind: str, status: bool, reason: str) -> dict:
        return {"type": kind, "status": "True" if status else "False", "reason": reason,
                "lastHeartbeatTime": now, "lastTransitionTime": now, "message": reason}
    return [
        condition("MemoryPressure", False, "KubeletHasSufficientMemory"),
        condition("DiskPressure", False, "KubeletHasNoDiskPressure"),
        condition("PIDPressure", False, "KubeletHasSufficientPID"),
        condition("Ready", ready, "KubeletReady" if ready else "KubeletNotReady"),
    ]


class Agent:
    def __init__(self, ctx: AgentContext, kubernetes_version: str):
        self.ctx, self.kubernetes_version = ctx, kubernetes_version
        self.workers: dict[str, PodWorker] = {}
        self.pool = AddressPool()
        self.stopping = threading.Event()
        self.logs_port = 0

    def serve_logs(self, cert: Path, key: Path, ca: Path) -> None:
        server = LogsServer(self.ctx.logs_dir, cert, key, ca, self.current_uid, self.is_running)
        server.start()
        self.logs_port = server.port

    def find_worker(self, namespace: str, pod: str) -> PodWorker | None:
        return next((w for w in list(self.workers.values()) if (w.ns, w.pod_name) == (namespace, pod)), None)

    def current_uid(self, namespace: str, pod: str) -> str | None:
        worker = self.find_worker(namespace, pod)
        return worker.uid if worker else None

    def is_running(self, namespace: str, pod: str, container: str) -> bool:
        worker = self.find_worker(namespace, pod)
        return bool(worker and container in worker.processes)

    # --- node -----------------------------------------------------------------------------------
    def node_status(self, ready: bool) -> dict:
        cpus = str(os.cpu_count() or 1)
        memory = f"{os.sysconf('SC_PAGE_SIZE') * os.sysconf('SC_PHYS_PAGES') // 1024}Ki"
        resources = {"cpu": cpus, "memory": memory, "pods": "110", "ephemeral-storage": "100Gi"}
        return {
            "capacity": resources, "allocatable": resources,
            "conditions": node_conditions(now_iso(), ready),
            "addresses": [{"type": "InternalIP", "address": self.ctx.host_ip},
                          {"type": "Hostname", "address": self.ctx.node_name}],
            "daemonEndpoints": {"kubeletEndpoint": {"Port": self.logs_port}},
            "nodeInfo": {"machineID": "", "systemUUID": "", "bootID": "", "kernelVersion": os.uname().release,
                         "osImage": "sparkpoint local node agent", "containerRuntimeVersion": "local-process://1",
                         "kubeletVersion": self.kubernetes_version, "kubeProxyVersion": "",
                         "operatingSystem": "linux", "architecture": "amd64"},
        }

    def register(self) -> None:
        name = self.ctx.node_name
        body = {"apiVersion": "v1", "kind": "Node", "metadata": {"name": name, "labels": {
            "kubernetes.io/hostname": name, "kubernetes.io/os": "linux", "kubernetes.io/arch": "amd64"}}}
        try:
            self.ctx.client.request("POST", "/api/v1/nodes", body)
            log.info("node registered", extra={"node": name})
        except ApiError as error:
            if error.status != 409:
                raise
        self.ctx.client.strategic_patch(f"/api/v1/nodes/{name}/status", {"status": self.node_status(True)})

    def heartbeat(self, ready: bool = True) -> None:
        name = self.ctx.node_name
        self.ctx.client.strategic_patch(f"/api/v1/nodes/{name}/status",
                                        {"status": {"conditions": node_conditions(now_iso(), ready)}})
        renew = datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%S.%fZ")
        lease = {"apiVersion": "coordination.k8s.io/v1", "kind": "Lease",
                 "metadata": {"name": name, "namespace": "kube-node-lease"},
                 "spec": {"holderIdentity": name, "leaseDurationSeconds": LEASE_SECONDS, "renewTime": renew}}
        path = "/apis/coordination.k8s.io/v1/namespaces/kube-node-lease/leases"
        try:
            self.ctx.client.merge_patch(f"{path}/{name}", {"spec": lease["spec"]})
        except ApiError as error:
            if error.status != 404:
                raise
            self.ctx.client.request("POST", path, lease)

    def heartbeat_loop(self) -> None:
        while not self.stopping.wait(HEARTBEAT_SECONDS):
            try:
                self.heartbeat()
            except (ApiError, OSError) as error:
                log.warning("heartbeat failed", extra={"error": str(error)})

    # --- pods -----------------------------------------------------------------------------------
    def sync_pods(self) -> None:
        pods = self.ctx.client.get("/api/v1/pods", fieldSelector=f"spec.nodeName={self.ctx.node_name}")
        seen = set()
        for pod in pods.get("items", []):
            uid = pod["metadata"]["uid"]
            seen.add(uid)
            worker = self.workers.get(uid)
            if worker is None:
                ip = self.pool.claim(uid, (pod.get("status") or {}).get("podIP"))
                worker = PodWorker(self.ctx, pod, ip)
                self.workers[uid] = worker
                worker.start()
            else:
                worker.update(pod)
        for uid, worker in list(self.workers.items()):
            if uid not in seen:
                worker.removed.set()
            if not worker.is_alive():
                del self.workers[uid]
                self.pool.release(uid)

    def run(self) -> None:
        self.register()
        self.heartbeat()
        threading.Thread(target=self.heartbeat_loop, name="heartbeat", daemon=True).start()
        log.info("node agent running", extra={"node": self.ctx.node_name})
        while not self.stopping.is_set():
            try:
                self.sync_pods()
            except (ApiError, OSError) as error:
                log.warning("pod sync failed", extra={"error": str(error)})
            self.stopping.wait(POLL_SECONDS)
        self.stop_all()

    def stop_all(self) -> None:
        """Agent shutdown: stop every container (the pods stay; a restarted agent reruns them)."""
        for worker in self.workers.values():
            worker.shutdown.set()
        deadline = time.monotonic() + 30
        for worker in self.workers.values():
            worker.join(max(0.0, deadline - time.monotonic()))
        with contextlib.suppress(ApiError, OSError):
            self.heartbeat(ready=False)
        log.info("node agent stopped")
