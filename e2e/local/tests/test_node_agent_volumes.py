"""Volumes as the kubelet makes them: a Secret volume's files follow defaultMode and the pod's fsGroup,
so a non-root container in that group can read a 0440 token (seen failing: the runtime image, uid
185, could not read its control token)."""

from __future__ import annotations

import base64
import os
from pathlib import Path

import pytest
from volumes import VolumeBuilder

SECRET = {"data": {"token": base64.b64encode(b"s3cr3t").decode()}}


def pod(security_context: dict) -> dict:
    return {"metadata": {"name": "p", "namespace": "ns", "uid": "u"},
            "spec": {"securityContext": security_context, "containers": [],
                     "volumes": [{"name": "tok", "secret": {"secretName": "t", "defaultMode": 0o440}}]}}


def build(tmp_path, security_context: dict):
    builder = VolumeBuilder(pod(security_context), lambda kind, name: SECRET, lambda *a: "", b"", "127.1.0.9",
                            "127.0.0.1")
    return builder.materialize(tmp_path)["tok"] / "token"


@pytest.mark.skipif(os.geteuid() != 0, reason="fsGroup needs the agent to run as root, as it does in make test")
def test_secret_files_belong_to_the_pods_fs_group(tmp_path):
    token = build(tmp_path, {"fsGroup": 4242, "runAsUser": 185})
    st = token.stat()
    assert st.st_gid == 4242 and st.st_mode & 0o777 == 0o440 and token.read_bytes() == b"s3cr3t"


def test_without_fs_group_the_files_keep_the_agents_group(tmp_path):
    token = build(tmp_path, {})
    assert token.stat().st_gid == os.getegid() and token.stat().st_mode & 0o777 == 0o440


def test_a_mount_that_would_hide_the_checkout_is_not_made():
    """An emptyDir at /tmp (the restricted pods have one) hid a checkout under /tmp in venv mode:
    the pod's own volume dirs and the venv vanished ("special device ... does not exist")."""
    from podspec import Mount, split_shadowing

    pod_dir, venv = Path("/tmp/cc/e2e/local/.state/node/pods/u"), Path("/tmp/cc/.venv/bin")
    mounts = [Mount(pod_dir / "volumes/tmp", "/tmp", False), Mount(pod_dir / "volumes/job", "/etc/sparkpoint", True),
              Mount(pod_dir / "volumes/hot", "/var/lib/sparkpoint", False)]
    usable, hidden = split_shadowing(mounts, [venv, pod_dir])
    assert [m.target for m in hidden] == ["/tmp"]
    assert [m.target for m in usable] == ["/etc/sparkpoint", "/var/lib/sparkpoint"]
    # A checkout elsewhere keeps every mount.
    usable, hidden = split_shadowing(mounts, [Path("/work/repo/.venv/bin"), Path("/work/repo/e2e/local/.state/x")])
    assert hidden == [] and len(usable) == 3
