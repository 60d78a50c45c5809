"""Pure functions of the node agent's image mode: which images are local, the argv rule of
command/args over ENTRYPOINT/CMD, the user a container runs as, and the root it builds."""

from __future__ import annotations

from pathlib import Path

import pytest
from image_mode import (
    ImageConfig,
    chroot_script,
    container_argv,
    is_local_image,
    parse_inspect,
    resolve_in_root,
    run_as,
)
from podspec import ConfigError, Mount

IMAGE = ImageConfig(image_id="abc123", env={"PATH": "/opt/venv/bin:/usr/bin", "HOME": "/tmp"},
                    entrypoint=["/usr/bin/tini", "--", "sparkpoint"], cmd=["--help"],
                    working_dir="/opt/spark/work-dir", user="185:185")
PASSWD = "root:x:0:0::/root:/bin/sh\nsparkpoint:x:185:185::/tmp:/usr/sbin/nologin\n"


@pytest.mark.parametrize(("image", "local"), [
    ("sparkpoint/runtime:dev", True), ("localhost/sparkpoint/operator:dev", True),
    ("sparkpoint:e2e", False), ("sparkpoint/runtime:1.0", False), ("docker.io/sparkpoint/runtime:dev", False),
    ("sparkpoint/runtime", False),
])
def test_local_image_rule(image, local):
    assert is_local_image(image) is local


def test_parse_inspect_reads_the_oci_config():
    doc = {"FromImageID": "f00d", "OCIv1": {"config": {
        "Env": ["PATH=/a:/b", "EMPTY=", "X=y=z"], "Entrypoint": ["e"], "WorkingDir": "/w", "User": "185:185"}}}
    config = parse_inspect(doc)
    assert config.env == {"PATH": "/a:/b", "EMPTY": "", "X": "y=z"}
    assert (config.entrypoint, config.cmd, config.working_dir, config.user) == (["e"], [], "/w", "185:185")


@pytest.mark.parametrize(("container", "argv"), [
    ({}, ["/usr/bin/tini", "--", "sparkpoint", "--help"]),
    ({"args": ["gc", "--once"]}, ["/usr/bin/tini", "--", "sparkpoint", "gc", "--once"]),
    ({"args": []}, ["/usr/bin/tini", "--", "sparkpoint"]),
    ({"command": ["sparkpoint", "run"]}, ["sparkpoint", "run"]),  # command drops CMD
    ({"command": ["sh"], "args": ["-c", "id"]}, ["sh", "-c", "id"]),
])
def test_command_and_args_replace_entrypoint_and_cmd(container, argv):
    assert container_argv(container, IMAGE) == argv


def test_user_precedence_container_then_pod_then_image():
    assert run_as({}, {}, IMAGE, PASSWD) == (185, 185)
    assert run_as({"securityContext": {"runAsUser": 1000}}, {}, IMAGE, PASSWD) == (1000, 185)
    assert run_as({"securityContext": {"runAsUser": 1000, "runAsGroup": 7}},
                  {"securityContext": {"runAsUser": 2000}}, IMAGE, PASSWD) == (2000, 7)
    named = ImageConfig("i", {}, [], [], "/", "sparkpoint")
    assert run_as({}, {}, named, PASSWD) == (185, 185)


def test_run_as_non_root_refuses_a_root_image_and_names_the_reason():
    root_image = ImageConfig("i", {}, [], [], "/", "")
    assert run_as({}, {}, root_image, PASSWD) == (0, 0)
    with pytest.raises(ConfigError, match="runAsNonRoot") as error:
        run_as({"securityContext": {"runAsNonRoot": True}}, {}, root_image, PASSWD)
    assert error.value.reason == "CreateContainerConfigError"
    with pytest.raises(ConfigError, match="not in the image's /etc/passwd"):
        run_as({}, {}, ImageConfig("i", {}, [], [], "/", "nobody-here"), PASSWD)


def test_chroot_script_makes_mount_points_before_a_read_only_remount(tmp_path):
    secret = tmp_path / "token"
    secret.write_text("t")
    mounts = [Mount(tmp_path, "/var/lib/sparkpoint", False), Mount(secret, "/run/token", True)]
    script = chroot_script(Path("/lower"), tmp_path / "layer", mounts, "/opt/spark/work-dir", 185, 185,
                           read_only=True).splitlines()
    root = tmp_path / "layer" / "root"
    overlay = next(i for i, line in enumerate(script) if line.startswith("mount -t overlay"))
    remount_root = script.index(f"mount -o remount,ro {root}")
    binds = [i for i, line in enumerate(script) if line.startswith("mount --bind") or line.startswith("mount --rbind")]
    mkdirs = [i for i, line in enumerate(script) if line.startswith("mkdir -p")]
    assert overlay < min(mkdirs[1:]) and max(mkdirs) < min(binds) and max(binds) < remount_root
    assert f"mount --bind {tmp_path} {root}/var/lib/sparkpoint" in script
    assert f"mount -o remount,bind,ro {root}/run/token" in script
    assert script[-1].startswith(f"exec chroot --userspec=185:185 --groups=185 {root} ")
    writable = chroot_script(Path("/lower"), tmp_path / "layer", [], "/", 0, 0, read_only=False)
    assert "remount,ro " + str(root) not in writable


def test_mount_targets_follow_the_images_symlinks_not_the_hosts(tmp_path):
    """Debian images link /var/run -> /run: the service-account token must land in the image's
    /run, not (resolved on the host side) in the host's."""
    (tmp_path / "run").mkdir()
    (tmp_path / "var").mkdir()
    (tmp_path / "var" / "run").symlink_to("/run")
    (tmp_path / "opt").mkdir()
    (tmp_path / "opt" / "current").symlink_to("../srv/app")
    assert resolve_in_root(tmp_path, "/var/run/secrets/kubernetes.io/serviceaccount") == \
        "/run/secrets/kubernetes.io/serviceaccount"
    assert resolve_in_root(tmp_path, "/opt/current/conf") == "/srv/app/conf"
    assert resolve_in_root(tmp_path, "/var/lib/sparkpoint") == "/var/lib/sparkpoint"
    (tmp_path / "loop").symlink_to("/loop")
    with pytest.raises(ConfigError, match="too many symlinks"):
        resolve_in_root(tmp_path, "/loop/x")
    token = Mount(tmp_path / "run", "/var/run/secrets/kubernetes.io/serviceaccount", True)
    script = chroot_script(tmp_path, tmp_path / "layer", [token], "/", 185, 185, read_only=False)
    assert f"{tmp_path}/layer/root/run/secrets/kubernetes.io/serviceaccount" in script
    assert "root/var/run/secrets" not in script
