"""The local cluster's extra real nodes (`cluster.py up --nodes 2`), started and stopped by cluster.py
after node 1 (real_node.py) and before it. Each is node 1's set of daemons (containerd, kubelet,
kube-proxy, kube-router) in a network namespace and cgroup tree of its own (extra_node_config.py,
node_netns.py, node_cgroups.py), with the images imported into its own containerd. `stop` leaves no
process, namespace, link, route or cgroup of the node behind; its state dir (images, kubelet root) stays.
"""

from __future__ import annotations

import contextlib
import json
import logging
import os
import signal
import subprocess
import time
from collections.abc import Callable
from pathlib import Path

import components as c
import extra_node_config as xc
import freezer
import network_policy
import node_cgroups
import node_config as nc
import node_netns
import pki
import real_node

log = logging.getLogger("cluster")
COMPONENTS = ["containerd", "kubelet", "kube-proxy", "kube-router"]


def component_names(node: xc.ExtraNode) -> list[str]:
    return [node.component(name) for name in COMPONENTS]


def ensure_identity(layout: c.Layout, node: xc.ExtraNode) -> None:
    """Its kubelet's client and serving certificates (same CA), and kubeconfigs naming the host's address."""
    pki.ensure_client_cert(layout.pki, node.identity)
    pki.ensure_serving_cert(layout.pki, node.serving_stem, f"system:node:{node.name}",
                            extra_ips=(node.node_ip,), extra_dns=(node.name,))
    for identity in (node.identity, nc.KUBE_PROXY, network_policy.IDENTITY):
        config = c.kubeconfig(layout, identity)
        config["clusters"][0]["cluster"]["server"] = xc.api_server_url(layout)
        path = xc.kubeconfig_path(layout, node, identity)
        real_node.write_if_changed(path, json.dumps(config, indent=2))
        path.chmod(0o600)


def write_configs(layout: c.Layout, node: xc.ExtraNode, paths: nc.NodePaths, ports: nc.NodePorts) -> None:
    for directory in (paths.containerd_root, paths.containerd_state, paths.cni_conf_dir, paths.kubelet_dir,
                      paths.pod_logs, paths.imported):
        directory.mkdir(parents=True, exist_ok=True)
    write = real_node.write_if_changed
    write(paths.containerd_config, nc.containerd_config(paths, real_node.pause_dir(layout)[1]))
    write(paths.cni_conf_dir / "10-sparkpoint.conflist", json.dumps(xc.cni_conflist(paths, node), indent=2))
    write(paths.kubelet_config, json.dumps(xc.kubelet_config(layout, paths, ports, node), indent=2))
    write(paths.proxy_config, json.dumps(xc.proxy_config(layout, ports, node), indent=2))


def start(layout: c.Layout, node: xc.ExtraNode, start_component: Callable[..., None],
          wait_for: Callable[..., None], free_port: Callable[[], int]) -> None:
    """Node 1 is up (packages, sysctls, RBAC): the node's network, cgroups, certificates and configs,
    then its daemons inside them. The caller waits for the Node to be Ready."""
    began = time.monotonic()
    paths = xc.node_paths(layout, node)
    paths.root.mkdir(parents=True, exist_ok=True)
    ports = real_node.load_ports(paths, free_port)
    node_netns.ensure(node)
    inside = node_netns.enter(node, node_cgroups.ensure(node))
    freezer.thaw(freezer.node_cgroup(node.cgroup_root))  # `up` brings a node frozen by a test back
    ensure_identity(layout, node)
    write_configs(layout, node, paths, ports)
    binaries = real_node.node_bin(layout)

    def start_inside(name: str, argv: list[str]) -> None:
        start_component(layout, node.component(name), argv, preexec_fn=inside)

    start_inside("containerd", nc.containerd_command(paths))
    wait_for(f"{node.name}'s containerd to answer", lambda: real_node.containerd_answers(paths), 60,
             layout, node.component("containerd"))
    imports_began = time.monotonic()
    real_node.import_images(layout, paths)
    imports = time.monotonic() - imports_began
    start_inside("kubelet", xc.kubelet_command(layout, paths, binaries, node))
    start_inside("kube-proxy", nc.proxy_command(paths, binaries))
    healthz = f"http://{node.node_ip}:{ports.kubelet_healthz}/healthz"
    wait_for(f"{node.name}'s kubelet healthz", lambda: real_node._healthy(healthz), 60,
             layout, node.component("kubelet"))
    start_inside("kube-router", network_policy.command(
        layout, network_policy.binary(layout), xc.kubeconfig_path(layout, node, network_policy.IDENTITY), node.name))
    first_sync = node_netns.in_netns(node, "iptables", "-w", "-t", "filter", "-S", network_policy.FIRST_SYNC_CHAIN)
    wait_for(f"{node.name}'s kube-router's first policy sync",
             lambda: subprocess.run(first_sync, capture_output=True).returncode == 0, 120,
             layout, node.component("kube-router"))
    log.info("node started", extra={"node": node.name, "seconds": round(time.monotonic() - began, 1),
                                     "image_import_seconds": round(imports, 1)})


def sandbox_netns(paths: nc.NodePaths) -> list[Path]:
    """The network namespaces containerd made for the node's pods (it leaves them when its tasks are
    killed, and node 1 leaves its own likewise; for an extra node they are removed with it)."""
    if not real_node.containerd_answers(paths):
        return []
    found = []
    for container in subprocess.run(nc.ctr(paths, "containers", "ls", "-q"), capture_output=True,
                                    text=True).stdout.split():
        info = subprocess.run(nc.ctr(paths, "containers", "info", container), capture_output=True, text=True)
        with contextlib.suppress(ValueError, KeyError, TypeError):
            for namespace in json.loads(info.stdout)["Spec"]["linux"]["namespaces"]:
                path = Path(namespace.get("path") or "/")
                if namespace.get("type") == "network" and path.parent.resolve() == node_netns.NETNS_DIR:
                    found.append(path)  # (containers other than the sandbox name /proc/<pid>/ns/net)
    return sorted(set(found))


def stop(layout: c.Layout, node: xc.ExtraNode, stop_component: Callable[..., None]) -> None:
    """Thawed first (a frozen process takes no signal), then as node 1 is stopped (real_node.stop),
    then whatever is left of the node: stray processes of its cgroups, its pods' network namespaces,
    its cgroups, its own namespace and link."""
    paths = xc.node_paths(layout, node)
    freezer.thaw(freezer.node_cgroup(node.cgroup_root))
    stop_component(layout, node.component("kube-router"), grace=15)
    stop_component(layout, node.component("kube-proxy"), grace=15)
    stop_component(layout, node.component("kubelet"), grace=30)
    pod_networks = sandbox_netns(paths)
    real_node.kill_containers(paths)
    stop_component(layout, node.component("containerd"), grace=30)
    real_node.kill_shims(paths)
    kill_processes_left(node)
    for netns in pod_networks:
        subprocess.run(["ip", "netns", "del", netns.name], capture_output=True)
    node_cgroups.remove(node)
    node_netns.remove(node)


def kill_processes_left(node: xc.ExtraNode) -> None:
    for _ in range(50):
        left = node_cgroups.processes(node)
        if not left:
            return
        for pid in left:
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGKILL)
        time.sleep(0.1)
    log.warning("processes of the node outlived SIGKILL", extra={"node": node.name, "pids": left[:10]})


def status(layout: c.Layout, node: xc.ExtraNode, pid_alive: Callable[[Path], int | None]) -> dict:
    """Its components' pids and the summed RSS of its daemons (with containerd's shims) and of all in
    its cgroups (the pods too)."""
    def rss_mib(pids: list[int]) -> float:
        return round(node_cgroups.rss_bytes(pids) / 2**20, 1)
    return {"components": {name: pid_alive(layout.pids / f"{name}.pid") for name in component_names(node)},
            "netns": node.netns, "ip": node.node_ip, "pod_cidr": node.pod_cidr,
            "daemons_rss_mib": rss_mib(node_cgroups.processes(node, cgroup=node.daemons_cgroup)),
            "all_rss_mib": rss_mib(node_cgroups.processes(node))}


# --- the cluster's set of extra nodes (cluster.py) ----------------------------------------------------

def present(layout: c.Layout, pid_alive: Callable[[Path], int | None]) -> list[xc.ExtraNode]:
    """Extra nodes with something of theirs on the host: a running component, a namespace or a cgroup
    (also after a crash, or after `up` asked for fewer nodes)."""
    found = []
    for index in range(2, xc.MAX_NODES + 1):
        node = xc.ExtraNode(index)
        if (node_netns.netns_exists(node) or node_cgroups.processes(node)
                or any(pid_alive(layout.pids / f"{name}.pid") for name in component_names(node))):
            found.append(node)
    return found


def up(layout: c.Layout, start_component: Callable[..., None], stop_component: Callable[..., None],
       wait_for: Callable[..., None], free_port: Callable[[], int], pid_alive: Callable[[Path], int | None],
       node_ready: Callable[[c.Layout, str], bool]) -> None:
    """Starts the extra nodes `layout.nodes` asks for and waits until each is Ready; a node beyond that
    count is stopped and its Node object deleted (its pods go with it, as when a node leaves)."""
    import provision

    wanted = xc.extra_nodes(layout.nodes)
    for node in present(layout, pid_alive):
        if node not in wanted:
            stop(layout, node, stop_component)
            status, _ = provision.admin_api(layout.server_url, layout.pki)("DELETE", f"/api/v1/nodes/{node.name}", None)
            log.info("node removed from the cluster", extra={"node": node.name, "delete_status": status})
            if not wanted:
                node_netns.remove_host_nat_rules()
    for node in wanted:
        start(layout, node, start_component, wait_for, free_port)
    for node in wanted:
        wait_for(f"node {node.name} to be Ready", lambda node=node: node_ready(layout, node.name), 90,
                 layout, node.component("kubelet"))


def down(layout: c.Layout, stop_component: Callable[..., None], pid_alive: Callable[[Path], int | None]) -> None:
    for node in present(layout, pid_alive):
        stop(layout, node, stop_component)
    node_netns.remove_host_nat_rules()
