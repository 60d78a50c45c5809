"""The real node's NetworkPolicy engine (the default node): kube-router's network-policy controller, and only
it (no routing, no service proxy, no CNI: the bridge plugin and kube-proxy do those). `cluster.py up`
starts it after the kubelet and waits for its first sync; `down` stops it and removes the iptables
chains and ipsets it made, which outlive it.

kube-router enforces policies with iptables rules per pod and ipsets of the selected peers' addresses.
Traffic from the node itself (`-m addrtype --src-type LOCAL`) is always accepted, as on any node: the
kubelet's probes, and the e2e tests' host-side clients, reach every pod whatever the policies say.

Its own clean-up (`kube-router --cleanup-config`) is not used: in v2.1.0 it also cleans up the IPVS
service proxy, which panics without the ip_vs module, and it runs the policy clean-up on an empty
controller that has no iptables handlers, so nothing of the policy controller is removed anyway.
"""

from __future__ import annotations

import json
import logging
import shlex
import shutil
import subprocess
from collections.abc import Callable
from pathlib import Path

import components as c
import pki
import real_node

log = logging.getLogger("cluster")
NAME = "kube-router"
IDENTITY = pki.ClientIdentity("kube-router", "sparkpoint:kube-router")
# kube-router v2.1.0, pkg/controllers/netpol/network_policy_controller.go: its chains (the three
# top-level ones are jumped to from INPUT, FORWARD and OUTPUT) and its ipsets.
CHAIN_PREFIXES = ("KUBE-ROUTER-", "KUBE-POD-FW-", "KUBE-NWPLCY-")
IPSET_PREFIXES = ("KUBE-SRC-", "KUBE-DST-")
FIRST_SYNC_CHAIN = "KUBE-ROUTER-FORWARD"
# What the policy controller reads (upstream's ClusterRole, daemonset/generic-kuberouter.yaml, without
# the leases and services/status its other controllers write).
RULES = [
    {"apiGroups": [""], "resources": ["namespaces", "pods", "services", "nodes", "endpoints"],
     "verbs": ["get", "list", "watch"]},
    {"apiGroups": ["networking.k8s.io"], "resources": ["networkpolicies"], "verbs": ["get", "list", "watch"]},
    {"apiGroups": ["discovery.k8s.io"], "resources": ["endpointslices"], "verbs": ["get", "list", "watch"]},
]


def binary(layout: c.Layout) -> Path:
    version = real_node.versions()["KUBE_ROUTER_VERSION"]
    return layout.k8s_bin.parent.parent / f"kube-router-{version}" / "bin" / "kube-router"


def command(layout: c.Layout, kube_router: Path, kubeconfig: Path | None = None,
            node_name: str | None = None) -> list[str]:
    """Node 1's, or with `kubeconfig` and `node_name` an extra node's (extra_node.py)."""
    return [
        str(kube_router),
        f"--kubeconfig={kubeconfig or layout.kubeconfig_for(IDENTITY)}",
        "--run-firewall=true", "--run-router=false", "--run-service-proxy=false", "--enable-cni=false",
        f"--hostname-override={node_name or layout.node_name}",
        f"--service-cluster-ip-range={c.SERVICE_CIDR}",
        "--health-port=0", "--metrics-port=0",  # nothing to serve: `up` waits for its chains instead
        "--v=1",
    ]


def ensure_identity(layout: c.Layout) -> None:
    """A client certificate of its own, bound to a read-only ClusterRole (not the admin's)."""
    pki.ensure_client_cert(layout.pki, IDENTITY)
    path = layout.kubeconfig_for(IDENTITY)
    path.write_text(json.dumps(c.kubeconfig(layout, IDENTITY), indent=2))
    path.chmod(0o600)
    role = "sparkpoint:kube-router"
    real_node.api_create(layout, "/apis/rbac.authorization.k8s.io/v1/clusterroles", {
        "apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRole", "metadata": {"name": role},
        "rules": RULES})
    real_node.api_create(layout, "/apis/rbac.authorization.k8s.io/v1/clusterrolebindings", {
        "apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRoleBinding", "metadata": {"name": role},
        "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": role},
        "subjects": [{"apiGroup": "rbac.authorization.k8s.io", "kind": "User", "name": IDENTITY.user}]})


def start(layout: c.Layout, start_component: Callable[..., None], wait_for: Callable[..., None]) -> None:
    kube_router = binary(layout)
    if not kube_router.exists():
        raise SystemExit(f"{kube_router} is missing: run e2e/local/build.sh first (make cluster-up does)")
    ensure_identity(layout)
    start_component(layout, NAME, command(layout, kube_router))
    # Its first full sync creates the top-level chains: from then on every policy is enforced.
    wait_for("kube-router's first policy sync", lambda: chain_exists(FIRST_SYNC_CHAIN), 120, layout, NAME)


def stop(layout: c.Layout, stop_component: Callable[..., None]) -> None:
    stop_component(layout, NAME, grace=15)
    cleanup()


def chain_exists(chain: str) -> bool:
    return subprocess.run(["iptables", "-w", "-t", "filter", "-S", chain], capture_output=True).returncode == 0


def our_chains(saved: str) -> list[str]:
    return [line[1:].split()[0] for line in saved.splitlines()
            if line.startswith(":") and line[1:].startswith(CHAIN_PREFIXES)]


def jumps_into(saved: str, chains: list[str]) -> list[list[str]]:
    """`-A CHAIN ...` rules of other chains that jump to one of `chains`, as `iptables -D` arguments."""
    rules = []
    for line in saved.splitlines():
        if not line.startswith("-A "):
            continue
        words = shlex.split(line)
        if words[1] not in chains and "-j" in words and words[words.index("-j") + 1] in chains:
            rules.append(["-D", *words[1:]])
    return rules


def cleanup() -> None:
    """Removes kube-router's chains (after the jumps into them) and then its ipsets; idempotent."""
    if not shutil.which("iptables-save"):
        return
    saved = subprocess.run(["iptables-save", "-t", "filter"], capture_output=True, text=True).stdout
    chains = our_chains(saved)
    for rule in jumps_into(saved, chains):
        subprocess.run(["iptables", "-w", "-t", "filter", *rule], capture_output=True)
    for chain in chains:
        subprocess.run(["iptables", "-w", "-t", "filter", "-F", chain], capture_output=True)
    for chain in chains:
        subprocess.run(["iptables", "-w", "-t", "filter", "-X", chain], capture_output=True)
    names = subprocess.run(["ipset", "list", "-n"], capture_output=True, text=True).stdout.split() \
        if shutil.which("ipset") else []
    sets = [n for n in names if n.removeprefix("inet6:").startswith(IPSET_PREFIXES)]
    for name in sets:
        subprocess.run(["ipset", "destroy", name], capture_output=True)
    left = our_chains(subprocess.run(["iptables-save", "-t", "filter"], capture_output=True, text=True).stdout)
    if chains or sets:
        log.info("kube-router's rules removed", extra={"chains": len(chains), "ipsets": len(sets), "left": left})
    if left:
        log.warning("kube-router chains left behind", extra={"chains": left})
