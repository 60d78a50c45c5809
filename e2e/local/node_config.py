"""Pure descriptions of the real node (the default node): where its files live, the config files of
containerd, the CNI network, the kubelet and kube-proxy, and their command lines. No process is
started here (see real_node.py).

Everything lives under `<state>/real-node/` with its own containerd root, state and socket, so
neither the system's containerd (if any) nor another cluster's files are touched. Host-wide
things that cannot be per cluster are named here: the bridge, the pod subnet, kube-proxy's
iptables chains (one real node per machine).
"""

from __future__ import annotations

import json
from dataclasses import asdict, dataclass
from pathlib import Path

from components import NODE, Layout
from pki import ClientIdentity

KUBE_PROXY = ClientIdentity("kube-proxy", "system:kube-proxy")  # bound to system:node-proxier by default RBAC
BRIDGE = "spk0"  # ours, not containerd's default cni0
POD_CIDR = "10.244.0.0/24"
CNI_BIN = Path("/usr/lib/cni")  # Debian's containernetworking-plugins
NAMESPACE = "k8s.io"  # the containerd namespace the CRI plugin uses


@dataclass
class NodePorts:
    kubelet: int
    kubelet_healthz: int
    proxy_healthz: int
    proxy_metrics: int


@dataclass
class NodePaths:
    root: Path

    @property
    def containerd_root(self) -> Path:
        return self.root / "containerd" / "root"

    @property
    def containerd_state(self) -> Path:
        return self.root / "containerd" / "state"

    @property
    def socket(self) -> Path:
        return self.root / "containerd" / "containerd.sock"

    @property
    def containerd_config(self) -> Path:
        return self.root / "containerd" / "config.toml"

    @property
    def cni_conf_dir(self) -> Path:
        return self.root / "cni" / "net.d"

    @property
    def kubelet_dir(self) -> Path:
        return self.root / "kubelet"

    @property
    def kubelet_config(self) -> Path:
        return self.root / "kubelet-config.yaml"

    @property
    def proxy_config(self) -> Path:
        return self.root / "kube-proxy-config.yaml"

    @property
    def pod_logs(self) -> Path:
        return self.root / "pod-logs"

    @property
    def imported(self) -> Path:
        return self.root / "imported"  # one file per image: the buildah image id last imported


def node_paths(layout: Layout) -> NodePaths:
    return NodePaths(layout.state / "real-node")


def ports_json(ports: NodePorts) -> str:
    return json.dumps(asdict(ports))


def containerd_config(paths: NodePaths, pause_image: str) -> str:
    """containerd 1.6 config (version 2). TOML written by hand: every value is a string or bool."""
    def q(value: object) -> str:
        return json.dumps(str(value))  # a JSON string is a valid TOML basic string
    cri = 'plugins."io.containerd.grpc.v1.cri"'
    return "\n".join([
        "version = 2",
        f"root = {q(paths.containerd_root)}",
        f"state = {q(paths.containerd_state)}",
        "[grpc]", f"  address = {q(paths.socket)}",
        "[ttrpc]", f"  address = {q(str(paths.socket) + '.ttrpc')}",
        # The opt plugin would install into /opt/containerd, shared with a system containerd.
        '[plugins."io.containerd.internal.v1.opt"]', f"  path = {q(paths.root / 'containerd' / 'opt')}",
        f"[{cri}]",
        f"  sandbox_image = {q(pause_image)}",
        "  enable_selinux = false",
        # The kubelet asks for negative OOM score adjustments (-998 for the pause container, -997 for
        # Guaranteed pods), which need CAP_SYS_RESOURCE; this machine's root lacks it, and runc then
        # fails every sandbox ("can't get final child's PID from pipe: EOF"; runc --debug: "failed to
        # update /proc/self/oom_score_adj: Permission denied"). Clamped to containerd's own score (0).
        "  restrict_oom_score_adj = true",
        f"[{cri}.containerd]",
        '  snapshotter = "overlayfs"',
        '  default_runtime_name = "runc"',
        f"[{cri}.containerd.runtimes.runc]",
        '  runtime_type = "io.containerd.runc.v2"',
        f"[{cri}.containerd.runtimes.runc.options]",
        # cgroupfs, as the kubelet's cgroupDriver; runc's state beside ours, not in /run/containerd/runc.
        "  SystemdCgroup = false",
        f"  Root = {q(paths.root / 'runc')}",
        f"[{cri}.cni]",
        f"  bin_dir = {q(CNI_BIN)}",
        f"  conf_dir = {q(paths.cni_conf_dir)}",
        "  max_conf_num = 1",
        "",
    ])


def cni_conflist(paths: NodePaths) -> dict:
    """A bridge with host-local IPAM (its allocations kept in our state dir), masquerading traffic that
    leaves the pod network; portmap for hostPort; loopback is added by containerd itself."""
    return {
        "cniVersion": "0.4.0", "name": "sparkpoint-pods",
        "plugins": [
            {"type": "bridge", "bridge": BRIDGE, "isGateway": True, "ipMasq": True, "hairpinMode": True,
             "ipam": {"type": "host-local", "ranges": [[{"subnet": POD_CIDR}]],
                      "routes": [{"dst": "0.0.0.0/0"}], "dataDir": str(paths.root / "cni" / "ipam")}},
            {"type": "portmap", "capabilities": {"portMappings": True}},
        ],
    }


def kubelet_config(layout: Layout, paths: NodePaths, ports: NodePorts) -> dict:
    pki = layout.pki
    return {
        "apiVersion": "kubelet.config.k8s.io/v1beta1", "kind": "KubeletConfiguration",
        "address": "0.0.0.0", "port": ports.kubelet, "readOnlyPort": 0,
        "healthzBindAddress": "127.0.0.1", "healthzPort": ports.kubelet_healthz,
        "tlsCertFile": str(pki / "kubelet-serving.crt"), "tlsPrivateKeyFile": str(pki / "kubelet-serving.key"),
        # The API server (logs, exec) authenticates with its kubelet-client certificate; everything
        # else asks the API server (webhook), as on a kubeadm node.
        "authentication": {"anonymous": {"enabled": False}, "webhook": {"enabled": True},
                           "x509": {"clientCAFile": str(pki / "ca.crt")}},
        "authorization": {"mode": "Webhook"},
        "containerRuntimeEndpoint": f"unix://{paths.socket}",
        "cgroupDriver": "cgroupfs",
        # This machine mounts cgroup v1 controllers (tmpfs at /sys/fs/cgroup). 1.31+ warns about v1 and
        # refuses it when failCgroupV1 is true (the default from 1.35); false keeps it working.
        "failCgroupV1": False,
        "failSwapOn": False,
        "podLogsDir": str(paths.pod_logs),
        "resolvConf": "/etc/resolv.conf",
        "podCIDR": POD_CIDR,
        "maxPods": 110,
        "serializeImagePulls": False,
        # Images here are imported, never pulled: garbage collection would lose them for good.
        "imageGCHighThresholdPercent": 100, "imageGCLowThresholdPercent": 99,
        # The disk is shared with other work: evict only when it is really full.
        "evictionHard": {"memory.available": "100Mi", "nodefs.available": "2%", "imagefs.available": "2%",
                         "nodefs.inodesFree": "2%"},
        "containerLogMaxSize": "50Mi",
        "shutdownGracePeriod": "0s",
        "registerNode": True,
    }


def kubelet_command(layout: Layout, paths: NodePaths, node_bin: Path, host_ip: str) -> list[str]:
    return [
        str(node_bin / "kubelet"),
        f"--config={paths.kubelet_config}",
        f"--kubeconfig={layout.kubeconfig_for(NODE)}",
        f"--root-dir={paths.kubelet_dir}",
        f"--hostname-override={layout.node_name}",
        # Not loopback: the kubelet refuses 127.0.0.1 as a node address; the API server reaches it here.
        f"--node-ip={host_ip}",
        "--v=1",
    ]


def proxy_config(layout: Layout, ports: NodePorts) -> dict:
    return {
        "apiVersion": "kubeproxy.config.k8s.io/v1alpha1", "kind": "KubeProxyConfiguration",
        "mode": "iptables",
        "clientConnection": {"kubeconfig": str(layout.kubeconfig_for(KUBE_PROXY))},
        "hostnameOverride": layout.node_name,
        "clusterCIDR": POD_CIDR,
        "bindAddress": "0.0.0.0",
        "nodePortAddresses": ["primary"],  # NodePorts on the node's own address, not on every local one
        "healthzBindAddress": f"127.0.0.1:{ports.proxy_healthz}",
        "metricsBindAddress": f"127.0.0.1:{ports.proxy_metrics}",
        # Leave the host's conntrack table size alone (a shared machine).
        "conntrack": {"maxPerCore": 0, "min": 0},
    }


def proxy_command(paths: NodePaths, node_bin: Path) -> list[str]:
    return [str(node_bin / "kube-proxy"), f"--config={paths.proxy_config}", "--v=1"]


def containerd_command(paths: NodePaths) -> list[str]:
    return ["containerd", f"--config={paths.containerd_config}"]


def ctr(paths: NodePaths, *args: str) -> list[str]:
    return ["ctr", f"--address={paths.socket}", f"--namespace={NAMESPACE}", *args]

