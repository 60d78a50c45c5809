"""An extra node's cgroups (extra_node_config.py): its root `/<netns name>` in every mounted hierarchy,
with its daemons in `<root>/daemons` and its kubelet's pods in `<root>/kubepods`. The kubelet refuses a
`cgroupRoot` that does not exist, so `ensure` makes it before the node starts; `remove` deletes the
whole tree once the node's processes are gone. The freezer (freezer.py) freezes `<root>` at once.

This machine mounts the cgroup v1 controllers (one hierarchy each under /sys/fs/cgroup, and an empty v2
hierarchy at /sys/fs/cgroup/unified); on a pure v2 host the single hierarchy is /sys/fs/cgroup itself.
"""

from __future__ import annotations

import contextlib
import logging
import os
from pathlib import Path

from extra_node_config import ExtraNode

log = logging.getLogger("cluster")
CGROUP_ROOT = Path("/sys/fs/cgroup")


def hierarchies(root: Path = CGROUP_ROOT) -> list[Path]:
    """The mounted hierarchies' top directories (each has a cgroup.procs)."""
    if (root / "cgroup.procs").exists():
        return [root]  # a pure v2 host
    return sorted(p for p in root.iterdir() if (p / "cgroup.procs").exists() and not p.is_symlink())


def _inherit_cpuset(directory: Path) -> None:
    """A new v1 cpuset cgroup has no CPUs and memory nodes, and takes no process until given some."""
    for name in ("cpuset.cpus", "cpuset.mems"):
        own = directory / name
        if own.exists() and not own.read_text().strip():
            own.write_text((directory.parent / name).read_text())


def ensure(node: ExtraNode, root: Path = CGROUP_ROOT) -> list[Path]:
    """Makes the node's root and daemons cgroups; returns the daemons' cgroup.procs files to join."""
    procs = []
    for hierarchy in hierarchies(root):
        for rel in (node.cgroup_root, node.daemons_cgroup):
            directory = hierarchy / rel.lstrip("/")
            directory.mkdir(exist_ok=True)
            _inherit_cpuset(directory)
        procs.append(hierarchy / node.daemons_cgroup.lstrip("/") / "cgroup.procs")
    return procs


def processes(node: ExtraNode, root: Path = CGROUP_ROOT, cgroup: str | None = None) -> list[int]:
    """Every process of the node (daemons, shims, pods), or of its `cgroup` (node.daemons_cgroup: the
    daemons and shims only), from one hierarchy's tree."""
    found = hierarchies(root)
    hierarchy = root / "freezer" if root / "freezer" in found else found[0]
    top = hierarchy / (cgroup or node.cgroup_root).lstrip("/")
    pids: set[int] = set()
    for procs in top.rglob("cgroup.procs") if top.exists() else []:
        with contextlib.suppress(OSError):
            pids.update(int(line) for line in procs.read_text().split())
    return sorted(pids)


def rss_bytes(pids: list[int]) -> int:
    """The summed VmRSS of `pids` (shared pages counted in each: an upper bound)."""
    total = 0
    for pid in pids:
        with contextlib.suppress(OSError):
            for line in Path(f"/proc/{pid}/status").read_text().splitlines():
                if line.startswith("VmRSS:"):
                    total += int(line.split()[1]) * 1024
    return total


def remove(node: ExtraNode, root: Path = CGROUP_ROOT) -> None:
    """Deletes the node's cgroup tree, deepest first; a cgroup that still holds a process stays (logged)."""
    left = []
    for hierarchy in hierarchies(root):
        top = hierarchy / node.cgroup_root.lstrip("/")
        if not top.exists():
            continue
        for directory in sorted((d for d, _, _ in os.walk(top)), key=len, reverse=True):
            try:
                os.rmdir(directory)
            except OSError:
                left.append(directory)
    if left:
        log.warning("cgroups still in use, left in place", extra={"node": node.name, "cgroups": left[:5]})
