"""Image mode: a container whose image was built locally (`make image`) runs inside that image's
root file system instead of the project's virtualenv.

The rule: an image named `sparkpoint/<anything>:dev` (optionally `localhost/`-prefixed) is a local
image; it must be in buildah's store (else the container waits with ErrImageNeverPull). Its rootfs
is a buildah working container (`sparkpoint-node-<image id>`), mounted once and shared read-only by
every container of that image: each run gets its own overlay (a fresh writable layer, as a
container runtime gives) in its own mount namespace, with the volumes, /proc, /dev, /sys and the
host's resolv.conf and hosts bound in, and is chrooted into it as the pod's runAsUser (else the
image's USER). Other images keep the virtualenv mode."""

from __future__ import annotations

import fnmatch
import json
import shlex
import subprocess
import threading
from dataclasses import dataclass
from pathlib import Path

from podspec import ConfigError, Mount

LOCAL_IMAGE_PATTERN = "sparkpoint/*:dev"
HOST_FILES = ("/etc/resolv.conf", "/etc/hosts")


def is_local_image(image: str) -> bool:
    return fnmatch.fnmatchcase(image.removeprefix("localhost/"), LOCAL_IMAGE_PATTERN)


@dataclass(frozen=True)
class ImageConfig:
    """The parts of an OCI image config a container run needs."""

    image_id: str
    env: dict[str, str]
    entrypoint: list[str]
    cmd: list[str]
    working_dir: str
    user: str


def parse_inspect(document: dict) -> ImageConfig:
    """`buildah inspect --type image` output -> ImageConfig."""
    config = (document.get("OCIv1") or {}).get("config") or {}
    env = dict(item.split("=", 1) for item in config.get("Env") or [] if "=" in item)
    return ImageConfig(image_id=document["FromImageID"], env=env, entrypoint=config.get("Entrypoint") or [],
                       cmd=config.get("Cmd") or [], working_dir=config.get("WorkingDir") or "/",
                       user=config.get("User") or "")


def container_argv(container: dict, image: ImageConfig) -> list[str]:
    """Kubernetes' rule: `command` replaces ENTRYPOINT (and drops CMD), `args` replaces CMD."""
    command = container.get("command")
    if command:
        return [*command, *(container.get("args") or [])]
    args = container.get("args")
    return [*image.entrypoint, *(args if args is not None else image.cmd)]


def run_as(pod_spec: dict, container: dict, image: ImageConfig, passwd: str) -> tuple[int, int]:
    """uid and gid: the container's securityContext, then the pod's, then the image's USER;
    refuses root when runAsNonRoot is set, as the kubelet does."""
    pod_ctx, ctr_ctx = pod_spec.get("securityContext") or {}, container.get("securityContext") or {}

    def setting(key: str):  # type: ignore[no-untyped-def]
        return ctr_ctx.get(key, pod_ctx.get(key))

    user, _, group = image.user.partition(":")
    image_uid, image_gid = _numeric_user(user, passwd), None
    if group:
        image_gid = int(group) if group.isdigit() else None
    uid = setting("runAsUser")
    uid = image_uid if uid is None else int(uid)
    gid = setting("runAsGroup")
    gid = (image_gid if image_gid is not None else _primary_gid(uid, passwd)) if gid is None else int(gid)
    if setting("runAsNonRoot") and uid == 0:
        raise ConfigError("CreateContainerConfigError",
                          "container has runAsNonRoot and image will run as root")
    return uid, gid


def _numeric_user(user: str, passwd: str) -> int:
    if not user:
        return 0
    if user.isdigit():
        return int(user)
    for line in passwd.splitlines():
        fields = line.split(":")
        if len(fields) > 3 and fields[0] == user:
            return int(fields[2])
    raise ConfigError("CreateContainerConfigError", f"image user {user!r} is not in the image's /etc/passwd")


def _primary_gid(uid: int, passwd: str) -> int:
    for line in passwd.splitlines():
        fields = line.split(":")
        if len(fields) > 3 and fields[2] == str(uid):
            return int(fields[3])
    return uid if uid else 0


def read_only_root(container: dict) -> bool:
    return bool((container.get("securityContext") or {}).get("readOnlyRootFilesystem"))


def resolve_in_root(lower: Path, target: str, hops: int = 40) -> str:
    """`target` with the image's symlinks followed inside the image (Debian's /var/run -> /run):
    a mount point resolved on the host side would otherwise land on the host's /run."""
    parts = [p for p in Path(target).parts if p != "/"]
    resolved: list[str] = []
    while parts:
        part = parts.pop(0)
        if part == "..":
            resolved = resolved[:-1]
            continue
        candidate = lower.joinpath(*resolved, part)
        if candidate.is_symlink():
            hops -= 1
            if hops < 0:
                raise ConfigError("CreateContainerConfigError", f"too many symlinks in {target!r}")
            link = Path(candidate.readlink())
            if link.is_absolute():
                resolved = []
            parts = [p for p in link.parts if p != "/"] + parts
            continue
        resolved.append(part)
    return "/" + "/".join(resolved)


def chroot_script(lower: Path, layer: Path, mounts: list[Mount], working_dir: str, uid: int, gid: int,
                  read_only: bool) -> str:
    """The shell prologue (run by unshare in a new mount namespace) that assembles the container's
    root and execs the command in it: overlay, mount points (made before a read-only remount),
    volumes, then chroot as uid:gid."""
    root = layer / "root"
    q = shlex.quote
    lines = ["set -e", f"mkdir -p {q(str(layer / 'upper'))} {q(str(layer / 'work'))} {q(str(root))}",
             f"mount -t overlay overlay -o lowerdir={q(str(lower))},upperdir={q(str(layer / 'upper'))},"
             f"workdir={q(str(layer / 'work'))} {q(str(root))}"]
    binds = [(Path(p), p.lstrip("/"), False, "--rbind") for p in ("/proc", "/dev", "/sys")]
    binds += [(Path(p), resolve_in_root(lower, p).lstrip("/"), True, "--bind") for p in HOST_FILES]
    binds += [(m.source, resolve_in_root(lower, m.target).lstrip("/"), m.read_only, "--bind") for m in mounts]
    for source, target, _, _ in binds:
        path = q(str(root / target))
        if source.is_file():
            lines.append(f"mkdir -p $(dirname {path}); [ -e {path} ] || : > {path}")
        else:
            lines.append(f"mkdir -p {path}")
    lines.append(f"mkdir -p {q(str(root / working_dir.lstrip('/')))}")
    for source, target, ro, kind in binds:
        path = q(str(root / target))
        lines.append(f"mount {kind} {q(str(source))} {path}")
        if ro:
            lines.append(f"mount -o remount,bind,ro {path}")
    if read_only:
        lines.append(f"mount -o remount,ro {q(str(root))}")
    lines.append(f"exec chroot --userspec={uid}:{gid} --groups={gid} {q(str(root))} "
                 f"/bin/sh -c 'cd \"$0\" && exec \"$@\"' {q(working_dir)} \"$@\"")
    return "\n".join(lines)


def in_image_view(lower: Path, layer: Path, mounts: list[Mount], working_dir: str, uid: int, gid: int,
                  read_only: bool) -> list[str]:
    return ["unshare", "--mount", "--propagation", "private", "--", "/bin/sh", "-c",
            chroot_script(lower, layer, mounts, working_dir, uid, gid, read_only), "container"]


def exec_view(pid: int, layer: Path, working_dir: str, uid: int, gid: int) -> list[str]:
    """argv prefix for exec probes: enter the running container's mount namespace and root."""
    return ["nsenter", f"--target={pid}", "--mount", "--", "chroot", f"--userspec={uid}:{gid}",
            f"--groups={gid}", str(layer / "root"), "/bin/sh", "-c", 'cd "$0" && exec "$@"', working_dir]


class LocalImages:
    """buildah's store seen by the node agent: image configs and one mounted rootfs per image id."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._rootfs: dict[str, Path] = {}

    def config(self, image: str) -> ImageConfig:
        result = subprocess.run(["buildah", "inspect", "--type", "image", image], capture_output=True, text=True)
        if result.returncode != 0:
            raise ConfigError("ErrImageNeverPull",
                              f"image {image!r} is not in buildah's local store (run `make image`)")
        return parse_inspect(json.loads(result.stdout))

    def rootfs(self, image: str, config: ImageConfig) -> Path:
        with self._lock:
            if config.image_id not in self._rootfs:
                name = f"sparkpoint-node-{config.image_id[:12]}"
                exists = subprocess.run(["buildah", "inspect", "--type", "container", name], capture_output=True)
                if exists.returncode != 0:
                    subprocess.run(["buildah", "from", "--pull-never", "--name", name, config.image_id],
                                   check=True, capture_output=True)
                mounted = subprocess.run(["buildah", "mount", name], check=True, capture_output=True, text=True)
                self._rootfs[config.image_id] = Path(mounted.stdout.strip())
            return self._rootfs[config.image_id]
