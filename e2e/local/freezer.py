"""Freeze and thaw a pod's processes with the cgroup freezer, on the local cluster's node (issue 43:
a node that stops answering, without a clean delete).

Where a pod's cgroup is: the local kubelet runs with `cgroupDriver: cgroupfs` and the default
`cgroupsPerQOS` (node_config.py; containerd's runc with `SystemdCgroup = false`), so a pod's cgroup is
`/kubepods/<qos>/pod<uid>` (`/kubepods/pod<uid>` for a Guaranteed pod) and each container's, the pause
container's too, a directory under it. Rather than rebuild that path from the QoS class, it is read
from one of the pod's processes (`/proc/<pid>/cgroup`) and cut at `pod<uid>`, which also checks that
the process is the pod's. cgroup v2 freezes with `cgroup.freeze` (1/0, `cgroup.events` says when it
is frozen); this machine mounts the v1 controllers (node_config.py, failCgroupV1 false), where the
freezer hierarchy's `freezer.state` takes FROZEN/THAWED. Freezing the pod's cgroup stops every
container of the pod (the GC sidecar too), as a hung node would; the kubelet and the pod's network
namespace go on (the kernel still accepts connections to the frozen runtime's port).

A whole extra node of the local cluster (`cluster.py up --nodes 2`, issue 43's "node stops answering")
is one cgroup: its kubelet, containerd (with the shims), kube-proxy, kube-router and every pod of it
run under its cgroup root (node_cgroups.py), and a v1 freezer cgroup freezes its descendants, so one
write stops the node (`node_cgroup`; `python e2e/local/freezer.py freeze-node 2`, `thaw-node 2`). The
control plane then stops hearing from its kubelet and marks the Node NotReady after the node monitor's
grace period; the node's network namespace still forwards and answers pings (the kernel runs it).

Needs root on the node (writes under /sys/fs/cgroup); on kind the pods are not this host's processes.
"""

from __future__ import annotations

import contextlib
import time
from dataclasses import dataclass
from pathlib import Path

CGROUP_ROOT = Path("/sys/fs/cgroup")


@dataclass(frozen=True)
class Cgroup:
    """A cgroup the freezer writes: a pod's or a whole node's."""

    version: int  # 1 or 2
    path: str  # relative to the hierarchy's root: /kubepods/burstable/pod<uid>, /sparkpoint-node-2

    def control_file(self, root: Path = CGROUP_ROOT) -> Path:
        rel = self.path.lstrip("/")
        if self.version == 1:
            return root / "freezer" / rel / "freezer.state"
        unified = root / "unified"  # a hybrid mount keeps the v2 hierarchy there
        base = unified if (unified / "cgroup.controllers").exists() else root
        return base / rel / "cgroup.freeze"


def pod_cgroup(proc_cgroup: str, pod_uid: str) -> Cgroup:
    """The pod's cgroup from a process's /proc/<pid>/cgroup: the v1 freezer hierarchy's line if there
    is one, else the v2 line (0::), cut after its `pod<uid>` component. ValueError if the process is
    not in the pod's cgroup."""
    marks = {f"pod{pod_uid}", f"pod{pod_uid.replace('-', '_')}"}  # (the systemd driver writes underscores)
    lines = [line.split(":", 2) for line in proc_cgroup.splitlines() if line.count(":") >= 2]
    v1 = [path for _, controllers, path in lines if "freezer" in controllers.split(",")]
    v2 = [path for hid, controllers, path in lines if hid == "0" and controllers == ""]
    for version, paths in ((1, v1), (2, v2)):
        for path in paths:
            parts = path.split("/")
            for i, part in enumerate(parts):
                if part in marks or any(part.endswith(f"-{m}.slice") or part == f"{m}.slice" for m in marks):
                    return Cgroup(version, "/".join(parts[: i + 1]) or "/")
    raise ValueError(f"no cgroup of pod {pod_uid} in: {proc_cgroup.strip()!r}")


def pod_cgroup_of_pid(pid: int, pod_uid: str) -> Cgroup:
    return pod_cgroup(Path(f"/proc/{pid}/cgroup").read_text(), pod_uid)


def node_cgroup(cgroup_root: str, root: Path = CGROUP_ROOT) -> Cgroup:
    """An extra node's whole cgroup tree (extra_node_config.ExtraNode.cgroup_root): the v1 freezer
    hierarchy's where it is mounted, else the v2 hierarchy's."""
    return Cgroup(1 if (root / "freezer" / "cgroup.procs").exists() else 2, cgroup_root)


def _frozen(cg: Cgroup, root: Path) -> bool:
    control = cg.control_file(root)
    if cg.version == 1:
        return control.read_text().strip() == "FROZEN"
    events = dict(line.split() for line in (control.parent / "cgroup.events").read_text().splitlines())
    return events.get("frozen") == "1"


def freeze(cg: Cgroup, root: Path = CGROUP_ROOT, timeout: float = 10.0) -> None:
    """Freeze and wait until every process of the cgroup is frozen."""
    cg.control_file(root).write_text("FROZEN" if cg.version == 1 else "1")
    deadline = time.monotonic() + timeout
    while not _frozen(cg, root):
        if time.monotonic() > deadline:
            raise TimeoutError(f"{cg.path} not frozen after {timeout:g}s")
        time.sleep(0.05)


def thaw(cg: Cgroup, root: Path = CGROUP_ROOT) -> None:
    """Thaw; a cgroup already gone (the pod was force-deleted meanwhile) is no error."""
    with contextlib.suppress(FileNotFoundError):
        cg.control_file(root).write_text("THAWED" if cg.version == 1 else "0")


def main() -> int:
    """`freezer.py freeze-node|thaw-node N`: freeze or thaw node N (>= 2) of the local cluster."""
    import argparse
    import sys

    sys.path.insert(0, str(Path(__file__).resolve().parent))
    from extra_node_config import ExtraNode

    parser = argparse.ArgumentParser(description=main.__doc__)
    parser.add_argument("command", choices=["freeze-node", "thaw-node"])
    parser.add_argument("node", type=int, help="the node's number (2: the second node)")
    args = parser.parse_args()
    cg = node_cgroup(ExtraNode(args.node).cgroup_root)
    if not cg.control_file().exists():
        raise SystemExit(f"node {args.node} has no cgroup here (is it up? cluster.py up --nodes {args.node})")
    if args.command == "freeze-node":
        freeze(cg)
    else:
        thaw(cg)
    print(f"node {args.node}: {'frozen' if args.command == 'freeze-node' else 'thawed'} ({cg.control_file()})")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
