"""Pure descriptions of the local cluster's extra real nodes (`cluster.py up --nodes 2`): node 2's name,
addresses, network namespace, cgroup root, identities and the configs and command lines of its
containerd, kubelet, kube-proxy and kube-router. No process is started here (see extra_node.py).

Why a network namespace: kube-proxy, kube-router and the CNI bridge own iptables chains, ipsets and
the `spk0` bridge of the network they run in, so two nodes cannot share the host's. Node n (n >= 2)
gets its own namespace joined to the host by a veth pair on a /24 of its own (LINK_NET: the host end
.1, the node .2), and the host routes the node's pod subnet to it. Node 1 (the host's network) keeps
10.244.0.0/24; node n has 10.244.(n-1).0/24. Node n's daemons stay in the host's mount namespace, so
its kubelet's volume mounts are seen by its containerd, and a hostPath is the same host directory on
every node (the local stand-in for an NFS export, e2e/README.md).

Its cgroups live under a root of their own (`cgroupRoot`), so that neither kubelet treats the other's
pods as orphans to clean up, and so that one freezer write stops the whole node (freezer.py).
"""

from __future__ import annotations

import ipaddress
from dataclasses import dataclass
from pathlib import Path

import node_config as nc
from components import NODE_NAME, Layout
from pki import ClientIdentity

MAX_NODES = 2  # what has been tested; the addressing below would carry up to 254
POD_NETWORK = ipaddress.ip_network("10.244.0.0/16")  # every node's pod subnet is a /24 of it
LINK_NETWORK = ipaddress.ip_network("10.243.0.0/16")  # node n's veth link is 10.243.n.0/24
NETNS_PREFIX = "sparkpoint-node-"
# Marks of packets that must still be masqueraded, so the cross-node rule leaves them alone: kube-proxy's
# (masqueradeBit 14: a pod reaching itself through its Service) and the portmap plugin's (a pod reaching
# a hostPort of its own node).
MASQ_MARKS = ("0x4000/0x4000", "0x2000/0x2000")


@dataclass(frozen=True)
class ExtraNode:
    """Node `index` (2 for the second node) of the local cluster, with everything derived from it."""

    index: int

    def __post_init__(self) -> None:
        if not 2 <= self.index <= 254:
            raise ValueError(f"extra nodes are numbered 2..254, not {self.index}")

    @property
    def name(self) -> str:
        return f"{NODE_NAME}-{self.index}"

    @property
    def netns(self) -> str:
        return f"{NETNS_PREFIX}{self.index}"

    @property
    def host_link(self) -> str:
        return f"spkn{self.index}h"  # interface names have at most 15 characters

    @property
    def node_link(self) -> str:
        return f"spkn{self.index}"

    @property
    def link_network(self) -> ipaddress.IPv4Network:
        return ipaddress.ip_network(f"{LINK_NETWORK.network_address + (self.index << 8)}/24")

    @property
    def host_side_ip(self) -> str:
        return str(self.link_network.network_address + 1)

    @property
    def node_ip(self) -> str:
        """The node's InternalIP: the API server reaches its kubelet here, and it is its pods' HostIP."""
        return str(self.link_network.network_address + 2)

    @property
    def pod_cidr(self) -> str:
        return str(pod_cidr_of(self.index))

    @property
    def cgroup_root(self) -> str:
        return f"/{self.netns}"

    @property
    def daemons_cgroup(self) -> str:
        """Where its containerd (and so the shims), kubelet, kube-proxy and kube-router run; the kubelet
        puts the pods beside it, in `<cgroup_root>/kubepods`."""
        return f"{self.cgroup_root}/daemons"

    @property
    def identity(self) -> ClientIdentity:
        """Its kubelet's client identity: the Node authorizer and NodeRestriction apply as to node 1."""
        return ClientIdentity(f"node-{self.index}", f"system:node:{self.name}", ("system:nodes",))

    @property
    def serving_stem(self) -> str:
        return f"kubelet-serving-{self.index}"

    def component(self, name: str) -> str:
        """The name of its copy of a node component: its pid file and log under the state dir."""
        return f"node-{self.index}-{name}"


def pod_cidr_of(index: int) -> ipaddress.IPv4Network:
    """Node 1's /24 is node_config.POD_CIDR; node n's the (n-1)th /24 of POD_NETWORK."""
    return ipaddress.ip_network(f"{POD_NETWORK.network_address + ((index - 1) << 8)}/24")


def extra_nodes(count: int) -> list[ExtraNode]:
    """The extra nodes of a cluster of `count` nodes (node 1 is the host's)."""
    if not 1 <= count <= MAX_NODES:
        raise ValueError(f"--nodes {count}: 1..{MAX_NODES}")
    return [ExtraNode(index) for index in range(2, count + 1)]


def node_paths(layout: Layout, node: ExtraNode) -> nc.NodePaths:
    return nc.NodePaths(layout.state / f"real-node-{node.index}")


def api_server_url(layout: Layout) -> str:
    """Node n's daemons cannot reach the host's loopback: they use the host's address, which the API
    server serves on and its certificate names (real_node.ensure_certs)."""
    return f"https://{layout.host_ip}:{layout.ports.apiserver}"


def kubeconfig_path(layout: Layout, node: ExtraNode, identity: ClientIdentity) -> Path:
    return layout.state / "kubeconfigs" / f"{identity.stem}.node-{node.index}.kubeconfig"


def cni_conflist(paths: nc.NodePaths, node: ExtraNode) -> dict:
    """Node 1's network (the bridge spk0, in node n's own namespace) on node n's pod subnet."""
    conflist = nc.cni_conflist(paths)
    ipam = conflist["plugins"][0]["ipam"]
    ipam["ranges"] = [[{"subnet": node.pod_cidr}]]
    return conflist


def kubelet_config(layout: Layout, paths: nc.NodePaths, ports: nc.NodePorts, node: ExtraNode) -> dict:
    config = nc.kubelet_config(layout, paths, ports)
    config.update({
        "tlsCertFile": str(layout.pki / f"{node.serving_stem}.crt"),
        "tlsPrivateKeyFile": str(layout.pki / f"{node.serving_stem}.key"),
        # The host's processes (cluster.py's wait) cannot reach the node's loopback.
        "healthzBindAddress": node.node_ip,
        "podCIDR": node.pod_cidr,
        "cgroupRoot": node.cgroup_root,
    })
    return config


def kubelet_command(layout: Layout, paths: nc.NodePaths, node_bin: Path, node: ExtraNode) -> list[str]:
    return [
        str(node_bin / "kubelet"),
        f"--config={paths.kubelet_config}",
        f"--kubeconfig={kubeconfig_path(layout, node, node.identity)}",
        f"--root-dir={paths.kubelet_dir}",
        f"--hostname-override={node.name}",
        f"--node-ip={node.node_ip}",
        "--v=1",
    ]


def proxy_config(layout: Layout, ports: nc.NodePorts, node: ExtraNode) -> dict:
    config = nc.proxy_config(layout, ports)
    config["clientConnection"] = {"kubeconfig": str(kubeconfig_path(layout, node, nc.KUBE_PROXY))}
    config["hostnameOverride"] = node.name
    config["clusterCIDR"] = node.pod_cidr
    return config


def cross_node_nat_rule() -> list[str]:
    """A nat POSTROUTING rule (as `iptables -t nat` arguments after `-A`/`-D`/`-C POSTROUTING`) that
    keeps a pod's own address on traffic to a pod of another node: the bridge plugin masquerades all
    that leaves its subnet, and NetworkPolicy peers are matched by pod address. Inserted first in the
    host's namespace and in each extra node's."""
    marks = [arg for mark in MASQ_MARKS for arg in ("-m", "mark", "!", "--mark", mark)]
    return ["-s", str(POD_NETWORK), "-d", str(POD_NETWORK), *marks,
            "-m", "comment", "--comment", "sparkpoint: pod to pod across nodes keeps its source", "-j", "ACCEPT"]


def outbound_nat_rule() -> list[str]:
    """A nat POSTROUTING rule of the host's: what an extra node sends beyond the host (its pods' traffic
    is masqueraded to the node's address by the bridge plugin) leaves with the host's address, as node
    1's pods' traffic does; the link addresses are this host's secret."""
    return ["-s", str(LINK_NETWORK), "!", "-d", str(LINK_NETWORK), "-m", "comment", "--comment",
            "sparkpoint: extra nodes reach beyond the host", "-j", "MASQUERADE"]
