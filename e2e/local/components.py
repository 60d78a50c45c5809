"""Pure descriptions of the local cluster: its layout on disk, ports, identities, kubeconfigs
and the command line of every component. No process is started here (see cluster.py)."""

from __future__ import annotations

import json
import sys
from dataclasses import asdict, dataclass, field
from pathlib import Path

from pki import ClientIdentity

NODE_NAME = "sparkpoint-node"
SERVICE_CIDR = "10.96.0.0/16"  # API objects only: nothing here ever sends traffic to it
SA_ISSUER = "https://kubernetes.default.svc.cluster.local"

ADMIN = ClientIdentity("admin", "kubernetes-admin", ("system:masters",))
CONTROLLER_MANAGER = ClientIdentity("controller-manager", "system:kube-controller-manager")
SCHEDULER = ClientIdentity("scheduler", "system:kube-scheduler")
NODE = ClientIdentity("node", f"system:node:{NODE_NAME}", ("system:nodes",))
APISERVER_KUBELET_CLIENT = ClientIdentity("apiserver-kubelet-client", "kube-apiserver-kubelet-client")
CLIENTS = [ADMIN, CONTROLLER_MANAGER, SCHEDULER, NODE, APISERVER_KUBELET_CLIENT]


@dataclass
class Ports:
    etcd_client: int
    etcd_peer: int
    apiserver: int
    controller_manager: int
    scheduler: int
    minio: int


@dataclass
class Layout:
    """Where everything of one local cluster lives. All paths absolute."""

    state: Path
    repo: Path
    k8s_bin: Path
    etcd_bin: Path
    ports: Ports
    node_name: str = NODE_NAME
    extra: dict = field(default_factory=dict)
    # "agent" (node_agent/) or "real" (kubelet + containerd: real_node.py). Pods of a real node live in
    # their own network namespaces: they reach the API server and MinIO at host_ip, not loopback.
    node: str = "agent"
    host_ip: str = "127.0.0.1"
    nodes: int = 1  # real nodes: node 1 on the host's network, the others in their own (extra_node.py)

    @property
    def pki(self) -> Path:
        return self.state / "pki"

    @property
    def logs(self) -> Path:
        return self.state / "logs"

    @property
    def pids(self) -> Path:
        return self.state / "pids"

    @property
    def admin_kubeconfig(self) -> Path:
        return self.state / "kubeconfig"

    def kubeconfig_for(self, identity: ClientIdentity) -> Path:
        if identity == ADMIN:
            return self.admin_kubeconfig
        return self.state / "kubeconfigs" / f"{identity.stem}.kubeconfig"

    @property
    def server_url(self) -> str:
        return f"https://127.0.0.1:{self.ports.apiserver}"

    def to_json(self) -> str:
        return json.dumps({"ports": asdict(self.ports), "node_name": self.node_name, "node": self.node,
                           "nodes": self.nodes}, indent=2)


def kubeconfig(layout: Layout, identity: ClientIdentity) -> dict:
    """A kubeconfig (JSON is valid YAML, and kubectl reads it) with file references."""
    pki = layout.pki
    return {
        "apiVersion": "v1",
        "kind": "Config",
        "clusters": [{"name": "sparkpoint-local", "cluster": {
            "server": layout.server_url, "certificate-authority": str(pki / "ca.crt")}}],
        "users": [{"name": identity.user, "user": {
            "client-certificate": str(pki / f"{identity.stem}.crt"),
            "client-key": str(pki / f"{identity.stem}.key")}}],
        "contexts": [{"name": "sparkpoint-local", "context": {
            "cluster": "sparkpoint-local", "user": identity.user, "namespace": "default"}}],
        "current-context": "sparkpoint-local",
    }


def etcd_command(layout: Layout) -> list[str]:
    p = layout.ports
    client, peer = f"http://127.0.0.1:{p.etcd_client}", f"http://127.0.0.1:{p.etcd_peer}"
    return [
        str(layout.etcd_bin / "etcd"), "--name=local", f"--data-dir={layout.state / 'etcd-data'}",
        f"--listen-client-urls={client}", f"--advertise-client-urls={client}",
        f"--listen-peer-urls={peer}", f"--initial-advertise-peer-urls={peer}",
        f"--initial-cluster=local={peer}",
        # Test data on a shared disk: durability across power loss is not worth the fsync stalls.
        "--unsafe-no-fsync", "--quota-backend-bytes=2147483648", "--log-level=warn",
    ]


def apiserver_command(layout: Layout) -> list[str]:
    pki = layout.pki
    if layout.node == "real":
        # Pods reach it through the `kubernetes` Service (kube-proxy) at the host's address: serve
        # there too, advertise it, and let the API server keep that Service's endpoints.
        network = ["--bind-address=0.0.0.0", f"--advertise-address={layout.host_ip}"]
    else:
        # The only endpoint would be a loopback address, which Endpoints validation refuses.
        network = ["--bind-address=127.0.0.1", "--advertise-address=127.0.0.1", "--endpoint-reconciler-type=none"]
    return [
        str(layout.k8s_bin / "kube-apiserver"),
        f"--etcd-servers=http://127.0.0.1:{layout.ports.etcd_client}",
        *network,
        f"--secure-port={layout.ports.apiserver}",
        f"--tls-cert-file={pki / 'apiserver.crt'}", f"--tls-private-key-file={pki / 'apiserver.key'}",
        f"--client-ca-file={pki / 'ca.crt'}",
        f"--kubelet-client-certificate={pki / 'apiserver-kubelet-client.crt'}",
        f"--kubelet-client-key={pki / 'apiserver-kubelet-client.key'}",
        f"--kubelet-certificate-authority={pki / 'ca.crt'}", "--kubelet-preferred-address-types=InternalIP",
        f"--service-account-key-file={pki / 'sa.pub'}",
        f"--service-account-signing-key-file={pki / 'sa.key'}",
        f"--service-account-issuer={SA_ISSUER}",
        "--authorization-mode=Node,RBAC",
        "--enable-admission-plugins=NodeRestriction",
        f"--service-cluster-ip-range={SERVICE_CIDR}",
        "--allow-privileged=true", "--profiling=false", "--v=1",
    ]


def _control_loop_flags(layout: Layout, binary: str, identity: str, port: int, cert_dir: str) -> list[str]:
    """Binary, identity and secure serving shared by the controller manager and the scheduler."""
    config = layout.kubeconfig_for(identity)
    return [
        str(layout.k8s_bin / binary),
        f"--kubeconfig={config}", f"--authentication-kubeconfig={config}",
        f"--authorization-kubeconfig={config}",
        "--bind-address=127.0.0.1", f"--secure-port={port}", f"--cert-dir={layout.state / cert_dir}",
    ]


def controller_manager_command(layout: Layout) -> list[str]:
    return [
        *_control_loop_flags(layout, "kube-controller-manager", CONTROLLER_MANAGER,
                             layout.ports.controller_manager, "controller-manager-certs"),
        f"--service-account-private-key-file={layout.pki / 'sa.key'}",
        f"--root-ca-file={layout.pki / 'ca.crt'}",
        "--use-service-account-credentials=true", "--leader-elect=false",
        f"--service-cluster-ip-range={SERVICE_CIDR}", "--profiling=false", "--v=1",
    ]


def scheduler_command(layout: Layout) -> list[str]:
    return [
        *_control_loop_flags(layout, "kube-scheduler", SCHEDULER, layout.ports.scheduler, "scheduler-certs"),
        "--leader-elect=false", "--profiling=false", "--v=1",
    ]


def minio_command(layout: Layout, minio_bin: str, console_port: int) -> list[str]:
    # Flags before the data dir: MinIO's CLI stops reading flags at the first argument.
    return [minio_bin, "server", "--quiet", "--address", f"{layout.host_ip}:{layout.ports.minio}",
            "--console-address", f"127.0.0.1:{console_port}", str(layout.state / "minio-data")]


def node_agent_command(layout: Layout) -> list[str]:
    return [
        sys.executable, "-m", "node_agent",
        f"--kubeconfig={layout.kubeconfig_for(NODE)}",
        f"--node-name={layout.node_name}",
        f"--state-dir={layout.state / 'node'}",
        f"--apiserver-port={layout.ports.apiserver}",
        f"--venv-bin={Path(sys.executable).parent}",
        f"--serving-cert={layout.pki / 'node-serving.crt'}", f"--serving-key={layout.pki / 'node-serving.key'}",
    ]
