"""The cgroup freezer helper of `make chaos`'s freeze action (e2e/local/freezer.py): where a pod's
cgroup is, and the control files it writes, on a fake cgroup tree (freezing real processes needs
root and the cluster)."""

from __future__ import annotations

from pathlib import Path

import pytest
from freezer import Cgroup, freeze, pod_cgroup, thaw

UID = "0b4f5c8e-1d2a-4c3b-9e8f-7a6b5c4d3e2f"
CID = "3f" * 32

V1 = f"""12:pids:/kubepods/burstable/pod{UID}/{CID}
11:freezer:/kubepods/burstable/pod{UID}/{CID}
4:cpu,cpuacct:/kubepods/burstable/pod{UID}/{CID}
1:name=systemd:/kubepods/burstable/pod{UID}/{CID}
0::/
"""
V2 = f"0::/kubepods/besteffort/pod{UID}/{CID}\n"
V2_GUARANTEED = f"0::/kubepods/pod{UID}/{CID}\n"
SYSTEMD = f"0::/kubepods.slice/kubepods-burstable.slice/kubepods-burstable-pod{UID.replace('-', '_')}.slice/cri-containerd-{CID}.scope\n"


@pytest.mark.parametrize("text, want", [
    (V1, Cgroup(1, f"/kubepods/burstable/pod{UID}")),  # this machine: v1 controllers, cgroupfs
    (V2, Cgroup(2, f"/kubepods/besteffort/pod{UID}")),
    (V2_GUARANTEED, Cgroup(2, f"/kubepods/pod{UID}")),
    (SYSTEMD, Cgroup(2, "/kubepods.slice/kubepods-burstable.slice/"
                           f"kubepods-burstable-pod{UID.replace('-', '_')}.slice")),
])
def test_the_pods_cgroup_is_read_from_its_process(text: str, want: Cgroup) -> None:
    assert pod_cgroup(text, UID) == want


def test_a_process_of_another_pod_is_refused() -> None:
    with pytest.raises(ValueError, match="no cgroup of pod"):
        pod_cgroup(V1.replace(UID, "ffffffff-1d2a-4c3b-9e8f-7a6b5c4d3e2f"), UID)


def test_v1_writes_freezer_state(tmp_path: Path) -> None:
    cg = Cgroup(1, f"/kubepods/burstable/pod{UID}")
    state = tmp_path / "freezer" / "kubepods" / "burstable" / f"pod{UID}" / "freezer.state"
    state.parent.mkdir(parents=True)
    state.write_text("THAWED\n")
    freeze(cg, tmp_path)  # (a real kernel answers FREEZING, then FROZEN; the fake takes it at once)
    assert state.read_text() == "FROZEN"
    thaw(cg, tmp_path)
    assert state.read_text() == "THAWED"


def test_v2_writes_cgroup_freeze_and_waits_for_its_event(tmp_path: Path) -> None:
    cg = Cgroup(2, f"/kubepods/pod{UID}")
    folder = tmp_path / "kubepods" / f"pod{UID}"
    folder.mkdir(parents=True)
    (folder / "cgroup.events").write_text("populated 1\nfrozen 0\n")
    with pytest.raises(TimeoutError):
        freeze(cg, tmp_path, timeout=0.2)  # the kernel never said frozen
    assert (folder / "cgroup.freeze").read_text() == "1"
    (folder / "cgroup.events").write_text("populated 1\nfrozen 1\n")
    freeze(cg, tmp_path)
    thaw(cg, tmp_path)
    assert (folder / "cgroup.freeze").read_text() == "0"


def test_thawing_a_pod_that_is_gone_is_no_error(tmp_path: Path) -> None:
    thaw(Cgroup(2, f"/kubepods/pod{UID}"), tmp_path)
