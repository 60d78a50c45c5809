"""The local cluster's second node, as pure descriptions (extra_node_config.py): its addresses and
subnets, the configs and command lines that differ from node 1's, the cross-node NAT exception, and
the `--nodes` count kept in the state dir (cluster.py). Nothing here starts a process."""

from __future__ import annotations

import ipaddress
import json
from pathlib import Path

import components as c
import extra_node_config as xc
import network_policy
import node_config as nc
import pytest

NODE2 = xc.ExtraNode(2)


@pytest.fixture
def layout(tmp_path: Path) -> c.Layout:
    return c.Layout(state=tmp_path, repo=tmp_path, k8s_bin=tmp_path / "k8s", etcd_bin=tmp_path / "etcd",
                    ports=c.Ports(2379, 2380, 6443, 10257, 10259, 9000), node="real", host_ip="192.0.2.2",
                    nodes=2)


def test_node_2_has_its_own_name_link_and_subnets() -> None:
    assert NODE2.name == "sparkpoint-node-2" and NODE2.netns == "sparkpoint-node-2"
    assert (NODE2.host_side_ip, NODE2.node_ip) == ("10.243.2.1", "10.243.2.2")
    assert NODE2.pod_cidr == "10.244.1.0/24"
    assert all(len(name) <= 15 for name in (NODE2.host_link, NODE2.node_link))  # IFNAMSIZ - 1
    assert NODE2.host_link != NODE2.node_link


def test_no_two_networks_of_the_cluster_overlap() -> None:
    """Node 1's pods, node 2's pods, node 2's link and the Service range must all be told apart by
    routes; node 1's subnet is the one the one-node cluster has always had."""
    assert xc.pod_cidr_of(1) == ipaddress.ip_network(nc.POD_CIDR)
    networks = [ipaddress.ip_network(nc.POD_CIDR), ipaddress.ip_network(NODE2.pod_cidr), NODE2.link_network,
                ipaddress.ip_network(c.SERVICE_CIDR)]
    for i, a in enumerate(networks):
        for b in networks[i + 1:]:
            assert not a.overlaps(b), (a, b)
    assert ipaddress.ip_address(NODE2.node_ip) in NODE2.link_network
    assert all(ipaddress.ip_network(x).subnet_of(xc.POD_NETWORK) for x in (nc.POD_CIDR, NODE2.pod_cidr))


def test_node_count_is_bounded() -> None:
    assert xc.extra_nodes(1) == []
    assert xc.extra_nodes(2) == [NODE2]
    for count in (0, xc.MAX_NODES + 1):
        with pytest.raises(ValueError):
            xc.extra_nodes(count)
    with pytest.raises(ValueError):
        xc.ExtraNode(1)  # node 1 is the host's, not an extra node


def test_cni_network_is_node_1s_on_node_2s_subnet(layout: c.Layout) -> None:
    paths = xc.node_paths(layout, NODE2)
    mine, node1 = xc.cni_conflist(paths, NODE2), nc.cni_conflist(paths)
    assert mine["plugins"][0]["ipam"]["ranges"] == [[{"subnet": "10.244.1.0/24"}]]
    assert mine["plugins"][0]["ipam"]["dataDir"].startswith(str(layout.state / "real-node-2"))
    node1["plugins"][0]["ipam"]["ranges"] = mine["plugins"][0]["ipam"]["ranges"]
    assert mine == node1  # nothing else differs
    assert nc.cni_conflist(paths)["plugins"][0]["ipam"]["ranges"] == [[{"subnet": nc.POD_CIDR}]]  # untouched


def test_kubelet_differs_from_node_1s_only_where_it_must(layout: c.Layout) -> None:
    paths, ports = xc.node_paths(layout, NODE2), nc.NodePorts(1, 2, 3, 4)
    mine, node1 = xc.kubelet_config(layout, paths, ports, NODE2), nc.kubelet_config(layout, paths, ports)
    changed = {key for key in mine if mine[key] != node1.get(key)}
    assert changed == {"tlsCertFile", "tlsPrivateKeyFile", "healthzBindAddress", "podCIDR", "cgroupRoot"}
    assert mine["cgroupRoot"] == "/sparkpoint-node-2" and mine["healthzBindAddress"] == "10.243.2.2"
    assert mine["tlsCertFile"] == str(layout.pki / "kubelet-serving-2.crt")
    argv = xc.kubelet_command(layout, paths, Path("/bin"), NODE2)
    assert "--hostname-override=sparkpoint-node-2" in argv and "--node-ip=10.243.2.2" in argv
    kubeconfig = next(a for a in argv if a.startswith("--kubeconfig=")).split("=", 1)[1]
    assert kubeconfig != str(layout.kubeconfig_for(c.NODE))
    assert f"--root-dir={layout.state / 'real-node-2' / 'kubelet'}" in argv


def test_node_2s_daemons_reach_the_api_server_at_the_hosts_address(layout: c.Layout) -> None:
    assert xc.api_server_url(layout) == "https://192.0.2.2:6443"
    paths = xc.node_paths(layout, NODE2)
    proxy = xc.proxy_config(layout, nc.NodePorts(1, 2, 3, 4), NODE2)
    assert proxy["hostnameOverride"] == "sparkpoint-node-2" and proxy["clusterCIDR"] == "10.244.1.0/24"
    assert proxy["clientConnection"]["kubeconfig"] == str(xc.kubeconfig_path(layout, NODE2, nc.KUBE_PROXY))
    assert xc.kubeconfig_path(layout, NODE2, nc.KUBE_PROXY).parent == layout.state / "kubeconfigs"
    assert nc.proxy_config(layout, nc.NodePorts(1, 2, 3, 4))["hostnameOverride"] == c.NODE_NAME
    assert paths.socket != nc.node_paths(layout).socket


def test_kube_router_of_node_2_names_its_node_and_kubeconfig(layout: c.Layout) -> None:
    kubeconfig = xc.kubeconfig_path(layout, NODE2, network_policy.IDENTITY)
    argv = network_policy.command(layout, Path("/kr"), kubeconfig, NODE2.name)
    assert f"--kubeconfig={kubeconfig}" in argv and "--hostname-override=sparkpoint-node-2" in argv
    node1 = network_policy.command(layout, Path("/kr"))
    assert f"--hostname-override={c.NODE_NAME}" in node1
    assert f"--kubeconfig={layout.kubeconfig_for(network_policy.IDENTITY)}" in node1


def test_the_nat_exception_covers_pod_to_pod_only_and_spares_kube_proxys_marked_packets() -> None:
    rule = xc.cross_node_nat_rule()
    assert rule[rule.index("-s") + 1] == rule[rule.index("-d") + 1] == "10.244.0.0/16"
    excluded = [rule[i + 1] for i, arg in enumerate(rule) if arg == "--mark" and rule[i - 1] == "!"]
    assert excluded == ["0x4000/0x4000", "0x2000/0x2000"]  # kube-proxy's and portmap's masquerade marks
    assert rule[-2:] == ["-j", "ACCEPT"]


def test_the_node_count_is_kept_in_the_state_dir(layout: c.Layout, tmp_path: Path) -> None:
    import cluster

    (tmp_path / "cluster.json").write_text(layout.to_json())
    assert json.loads(layout.to_json())["nodes"] == 2
    assert cluster.load_layout(tmp_path).nodes == 2  # `up` without --nodes keeps the count
    assert cluster.load_layout(tmp_path, nodes=1).nodes == 1
    (tmp_path / "cluster.json").write_text(json.dumps({"ports": json.loads(layout.to_json())["ports"],
                                                       "node": "real"}))
    assert cluster.load_layout(tmp_path).nodes == 1  # a state dir from before --nodes
    with pytest.raises(SystemExit, match="node agent is one node"):
        cluster.load_layout(tmp_path, node="agent", nodes=2)
