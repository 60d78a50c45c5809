"""The network of an extra node (extra_node_config.py says why it has one): its network namespace, the
veth pair to the host, the routes both ways, the cross-node NAT exception, and how a process is
started inside it. `ensure` is idempotent; `remove` takes away everything `ensure` made.

Only the network namespace is entered, never a mount namespace (`ip netns exec` would make one): the
node's kubelet mounts secrets and tokens that its containerd must see.
"""

from __future__ import annotations

import ctypes
import logging
import os
import shutil
import subprocess
from collections.abc import Callable
from pathlib import Path

from extra_node_config import ExtraNode, cross_node_nat_rule, outbound_nat_rule

log = logging.getLogger("cluster")
NETNS_DIR = Path("/run/netns")  # where `ip netns add` mounts a namespace
CLONE_NEWNET = 0x40000000


def run(argv: list[str], check: bool = True) -> subprocess.CompletedProcess:
    result = subprocess.run(argv, capture_output=True, text=True, timeout=60)
    if check and result.returncode != 0:
        raise SystemExit(f"{' '.join(argv)} failed ({result.returncode}): {result.stderr.strip()}")
    return result


def in_netns(node: ExtraNode, *argv: str) -> list[str]:
    """A short-lived command in the node's network (`ip netns exec`, whose mount namespace is fine for it)."""
    return ["ip", "netns", "exec", node.netns, *argv]


def netns_exists(node: ExtraNode) -> bool:
    return (NETNS_DIR / node.netns).exists()


def ensure(node: ExtraNode) -> None:
    if not netns_exists(node):
        run(["ip", "netns", "add", node.netns])
    if not Path(f"/sys/class/net/{node.host_link}").exists():
        run(["ip", "link", "add", node.host_link, "type", "veth", "peer", "name", node.node_link,
             "netns", node.netns])
    prefix = node.link_network.prefixlen
    run(["ip", "addr", "replace", f"{node.host_side_ip}/{prefix}", "dev", node.host_link])
    run(["ip", "link", "set", node.host_link, "up"])
    run(["ip", "-n", node.netns, "addr", "replace", f"{node.node_ip}/{prefix}", "dev", node.node_link])
    run(["ip", "-n", node.netns, "link", "set", node.node_link, "up"])
    run(["ip", "-n", node.netns, "link", "set", "lo", "up"])
    # The node reaches the host (API server, MinIO) and node 1's pods through the host; the host
    # reaches the node's pods through the node.
    run(["ip", "-n", node.netns, "route", "replace", "default", "via", node.host_side_ip])
    run(["ip", "route", "replace", node.pod_cidr, "via", node.node_ip, "dev", node.host_link])
    # A new namespace starts with forwarding off; bridged pod traffic must pass its iptables (Services).
    for key in ("net/ipv4/ip_forward", "net/bridge/bridge-nf-call-iptables"):
        run(in_netns(node, "sh", "-c", f"echo 1 > /proc/sys/{key}"))
    ensure_nat_rule(in_netns(node), cross_node_nat_rule())
    ensure_nat_rule([], cross_node_nat_rule())
    ensure_nat_rule([], outbound_nat_rule())


def ensure_nat_rule(prefix: list[str], rule: list[str]) -> None:
    """`rule` first in nat POSTROUTING (of the host with `prefix` [], else of a node), unless there."""
    if run([*prefix, "iptables", "-w", "-t", "nat", "-C", "POSTROUTING", *rule], check=False).returncode != 0:
        run([*prefix, "iptables", "-w", "-t", "nat", "-I", "POSTROUTING", "1", *rule])


def remove_host_nat_rules() -> None:
    """The host's rules, once no extra node is left (a node's own go with its namespace)."""
    if not shutil.which("iptables"):
        return
    for rule in (cross_node_nat_rule(), outbound_nat_rule()):
        while run(["iptables", "-w", "-t", "nat", "-D", "POSTROUTING", *rule], check=False).returncode == 0:
            pass


def remove(node: ExtraNode) -> None:
    """The veth pair (its route goes with it) and the namespace. The node's processes must be gone: a
    namespace that a process still holds outlives its name."""
    if Path(f"/sys/class/net/{node.host_link}").exists():
        run(["ip", "link", "del", node.host_link])
    if netns_exists(node):
        run(["ip", "netns", "del", node.netns])
    log.info("node network removed", extra={"node": node.name, "netns": node.netns})


def enter(node: ExtraNode, cgroup_procs: list[Path]) -> Callable[[], None]:
    """A Popen preexec_fn: the child joins the node's network namespace and its cgroups before it
    execs, so the pid file names the program itself (cluster.pid_alive) and its children (containerd's
    shims) inherit both."""
    libc = ctypes.CDLL(None, use_errno=True)
    netns_path = str(NETNS_DIR / node.netns)

    def preexec() -> None:
        for procs in cgroup_procs:
            procs.write_text(f"{os.getpid()}\n")
        fd = os.open(netns_path, os.O_RDONLY)
        try:
            if libc.setns(fd, CLONE_NEWNET) != 0:
                raise OSError(ctypes.get_errno(), f"setns({netns_path})")
        finally:
            os.close(fd)
    return preexec
