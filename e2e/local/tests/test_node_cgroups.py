"""An extra node's cgroup tree (node_cgroups.py) and freezing it whole (freezer.node_cgroup), on a fake
cgroup mount: the real one needs root and the cluster (cluster_tests/test_two_nodes.py freezes it)."""

from __future__ import annotations

import subprocess
import time
from pathlib import Path

import freezer
import node_cgroups
import pytest
from extra_node_config import ExtraNode

NODE2 = ExtraNode(2)


@pytest.fixture
def v1(tmp_path: Path) -> Path:
    """This machine's layout: one hierarchy per controller, and the empty v2 one at unified/."""
    for name in ("cpuset", "freezer", "memory", "unified"):
        (tmp_path / name).mkdir()
        (tmp_path / name / "cgroup.procs").write_text("1\n")
    (tmp_path / "cpuset" / "cpuset.cpus").write_text("0-1\n")
    (tmp_path / "cpuset" / "cpuset.mems").write_text("0\n")
    (tmp_path / "cpu,cpuacct").symlink_to(tmp_path / "memory")  # (as the kernel's comounts appear)
    return tmp_path


def fake_kernel_files(directory: Path) -> None:
    """What the kernel puts into a new cgroup directory (a fake mkdir makes an empty one)."""
    (directory / "cgroup.procs").write_text("")
    if "cpuset" in directory.parts:
        (directory / "cpuset.cpus").write_text("")
        (directory / "cpuset.mems").write_text("")


def test_hierarchies_of_a_v1_and_a_v2_host(v1: Path, tmp_path_factory) -> None:
    assert [p.name for p in node_cgroups.hierarchies(v1)] == ["cpuset", "freezer", "memory", "unified"]
    v2 = tmp_path_factory.mktemp("v2")
    (v2 / "cgroup.procs").write_text("1\n")
    assert node_cgroups.hierarchies(v2) == [v2]


def test_ensure_makes_root_and_daemons_in_every_hierarchy_with_cpus_inherited(v1: Path, monkeypatch) -> None:
    real_mkdir = Path.mkdir

    def mkdir(self: Path, *args, **kwargs) -> None:
        real_mkdir(self, *args, **kwargs)
        fake_kernel_files(self)
    monkeypatch.setattr(Path, "mkdir", mkdir)
    procs = node_cgroups.ensure(NODE2, v1)
    assert procs == [v1 / h / "sparkpoint-node-2" / "daemons" / "cgroup.procs"
                     for h in ("cpuset", "freezer", "memory", "unified")]
    for directory in (v1 / "cpuset" / "sparkpoint-node-2", v1 / "cpuset" / "sparkpoint-node-2" / "daemons"):
        assert (directory / "cpuset.cpus").read_text() == "0-1\n"
        assert (directory / "cpuset.mems").read_text() == "0\n"
    assert node_cgroups.ensure(NODE2, v1) == procs  # idempotent


def test_processes_are_read_from_the_freezer_tree_and_remove_deletes_it_deepest_first(v1: Path) -> None:
    pod = v1 / "freezer" / "sparkpoint-node-2" / "kubepods" / "besteffort" / "pod1"
    pod.mkdir(parents=True)
    (v1 / "freezer" / "sparkpoint-node-2" / "daemons").mkdir()
    (v1 / "freezer" / "sparkpoint-node-2" / "daemons" / "cgroup.procs").write_text("10\n11\n")
    (pod / "cgroup.procs").write_text("20\n")
    assert node_cgroups.processes(NODE2, v1) == [10, 11, 20]
    assert node_cgroups.processes(NODE2, v1, NODE2.daemons_cgroup) == [10, 11]
    for path in (v1 / "freezer").rglob("cgroup.procs"):
        if "sparkpoint-node-2" in path.parts:
            path.unlink()  # (a real cgroup's files go with rmdir; the fake's must go first)
    node_cgroups.remove(NODE2, v1)
    assert not (v1 / "freezer" / "sparkpoint-node-2").exists()
    assert node_cgroups.processes(NODE2, v1) == []


def test_rss_sums_the_processes_own() -> None:
    # Two idle `sleep` processes: this test process's own RSS moves between two reads (CI saw 4 KiB).
    sleepers = [subprocess.Popen(["sleep", "60"]) for _ in range(2)]
    try:
        time.sleep(0.2)
        one = node_cgroups.rss_bytes([sleepers[0].pid])
        two = node_cgroups.rss_bytes([sleepers[1].pid])
        assert one > 0 and two > 0
        assert node_cgroups.rss_bytes([sleepers[0].pid, sleepers[1].pid]) == one + two
        assert node_cgroups.rss_bytes([sleepers[0].pid, 2**22 + 7]) == one  # a process gone counts nothing
    finally:
        for sleeper in sleepers:
            sleeper.kill()
            sleeper.wait()


def test_a_whole_node_freezes_with_one_write(v1: Path, tmp_path_factory) -> None:
    cg = freezer.node_cgroup(NODE2.cgroup_root, v1)
    assert cg == freezer.Cgroup(1, "/sparkpoint-node-2")
    state = v1 / "freezer" / "sparkpoint-node-2" / "freezer.state"
    state.parent.mkdir()
    state.write_text("THAWED\n")
    freezer.freeze(cg, v1)
    assert state.read_text() == "FROZEN"
    freezer.thaw(cg, v1)
    assert state.read_text() == "THAWED"
    v2 = tmp_path_factory.mktemp("v2")
    (v2 / "cgroup.procs").write_text("1\n")
    assert freezer.node_cgroup(NODE2.cgroup_root, v2).control_file(v2) == v2 / "sparkpoint-node-2" / "cgroup.freeze"
