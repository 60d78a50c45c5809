"""Pure translation of a container spec into what a local process needs: argv, environment,
and the bind mounts of its volumes. No I/O; ConfigMaps and Secrets are passed in as dicts."""

from __future__ import annotations

import base64
import re
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

# The image-name rule: a container without `command` runs the virtualenv entry point named
# after the last path component of its image repository (tag and digest dropped).
_IMAGE_REPO = re.compile(r"^(?:.*/)?([^/:@]+)(?::[^/@]*)?(?:@.*)?$")
_VAR_REF = re.compile(r"\$\$|\$\(([A-Za-z_][A-Za-z0-9_.-]*)\)")

# SPARKPOINT_SPARK_JARS_DIR: the connector jars the runtime image carries (cluster.py sets it for the
# agent); pods run the virtualenv in the image's place. Image-mode pods get the image's own env instead.
PASSTHROUGH_ENV = ("JAVA_HOME", "LANG", "LC_ALL", "TZ", "OPENBLAS_CORETYPE", "OPENBLAS_L2_SIZE",
                   "SPARKPOINT_SPARK_JARS_DIR")
SYSTEM_PATH = "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"


class ConfigError(Exception):
    """The pod references something that does not exist (a missing ConfigMap key, ...)."""

    def __init__(self, reason: str, message: str):
        super().__init__(message)
        self.reason = reason


def image_entrypoint(image: str) -> str:
    match = _IMAGE_REPO.match(image)
    if not match:
        raise ConfigError("InvalidImageName", f"cannot map image {image!r} to an entry point")
    return match.group(1)


def expand(text: str, env: dict[str, str]) -> str:
    """Kubernetes $(VAR) expansion: defined variables are substituted, `$$` escapes a `$`,
    undefined references stay as written."""
    def substitute(match: re.Match) -> str:
        if match.group(0) == "$$":
            return "$"
        name = match.group(1)
        return env.get(name, match.group(0))
    return _VAR_REF.sub(substitute, text)


def resolve_argv(container: dict, env: dict[str, str], venv_bin: Path,
                 which: Callable[[str], str | None]) -> list[str]:
    command = container.get("command") or [image_entrypoint(container.get("image", ""))]
    argv = [expand(part, env) for part in [*command, *(container.get("args") or [])]]
    program = argv[0]
    if "/" not in program:
        program = str(venv_bin / program) if (venv_bin / program).exists() else which(program) or program
    return [program, *argv[1:]]


def _decode(data: dict, binary: dict | None = None, is_secret: bool = False) -> dict[str, bytes]:
    decoded = {k: (base64.b64decode(v) if is_secret else v.encode()) for k, v in (data or {}).items()}
    decoded.update({k: base64.b64decode(v) for k, v in (binary or {}).items()})
    return decoded


def object_data(obj: dict | None, kind: str) -> dict[str, bytes] | None:
    if obj is None:
        return None
    if kind == "Secret":
        return _decode(obj.get("data"), None, is_secret=True)
    return _decode(obj.get("data"), obj.get("binaryData"))


def field_value(pod: dict, path: str, pod_ip: str, host_ip: str) -> str:
    meta, spec = pod["metadata"], pod["spec"]
    simple = {
        "metadata.name": meta["name"], "metadata.namespace": meta["namespace"],
        "metadata.uid": meta["uid"], "spec.nodeName": spec.get("nodeName", ""),
        "spec.serviceAccountName": spec.get("serviceAccountName", ""),
        "status.podIP": pod_ip, "status.podIPs": pod_ip, "status.hostIP": host_ip,
        "status.hostIPs": host_ip,
    }
    if path in simple:
        return simple[path]
    match = re.fullmatch(r"metadata\.(labels|annotations)\['(.+)'\]", path)
    if match:
        return (meta.get(match.group(1)) or {}).get(match.group(2), "")
    raise ConfigError("CreateContainerConfigError", f"unsupported fieldRef {path!r}")


def build_env(pod: dict, container: dict, lookup: Callable[[str, str], dict | None],
              base: dict[str, str], pod_ip: str, host_ip: str) -> dict[str, str]:
    """The process environment: `base`, then envFrom, then env (later wins, as in Kubernetes).
    `lookup(kind, name)` returns a ConfigMap/Secret as a dict, or None when it does not exist."""
    env = dict(base)
    for source in container.get("envFrom") or []:
        for kind, key in (("ConfigMap", "configMapRef"), ("Secret", "secretRef")):
            if key not in source:
                continue
            ref = source[key]
            data = object_data(lookup(kind, ref["name"]), kind)
            if data is None:
                if ref.get("optional"):
                    continue
                raise ConfigError("CreateContainerConfigError", f'{kind.lower()} "{ref["name"]}" not found')
            prefix = source.get("prefix", "")
            env.update({prefix + k: v.decode(errors="replace") for k, v in data.items()})
    for var in container.get("env") or []:
        if "valueFrom" not in var:
            env[var["name"]] = expand(var.get("value", ""), env)
            continue
        source = var["valueFrom"]
        if "fieldRef" in source:
            env[var["name"]] = field_value(pod, source["fieldRef"]["fieldPath"], pod_ip, host_ip)
        elif "resourceFieldRef" in source:
            env[var["name"]] = "0"  # no resource accounting here
        else:
            kind, ref = (("ConfigMap", source["configMapKeyRef"]) if "configMapKeyRef" in source
                         else ("Secret", source["secretKeyRef"]))
            data = object_data(lookup(kind, ref["name"]), kind)
            if data is None or ref["key"] not in data:
                if ref.get("optional"):
                    continue
                raise ConfigError("CreateContainerConfigError",
                                  f'couldn\'t find key {ref["key"]} in {kind} {pod["metadata"]["namespace"]}/{ref["name"]}')
            env[var["name"]] = data[ref["key"]].decode(errors="replace")
    return env


@dataclass(frozen=True)
class Mount:
    source: Path
    target: str
    read_only: bool


TERMINATION_LOG = "/dev/termination-log"  # the kubelet's default terminationMessagePath
MESSAGE_LIMIT = 4096  # bytes of a termination message the kubelet keeps


def termination_mount(container: dict, source: Path) -> Mount:
    """The container's terminationMessagePath bound to a file of the pod's own, as the kubelet
    does: what the process writes there becomes state.terminated.message."""
    return Mount(source, container.get("terminationMessagePath") or TERMINATION_LOG, False)


def termination_message(source: Path) -> str:
    """What the container left in its termination message file (at most MESSAGE_LIMIT bytes)."""
    try:
        with open(source, "rb") as f:
            return f.read(MESSAGE_LIMIT).decode(errors="replace")
    except FileNotFoundError:
        return ""


def mounts_for(container: dict, volume_dirs: dict[str, Path]) -> list[Mount]:
    """Bind mounts for the container's volumeMounts, parents before children."""
    mounts = []
    for vm in container.get("volumeMounts") or []:
        if vm["name"] not in volume_dirs:
            raise ConfigError("CreateContainerConfigError", f'volume "{vm["name"]}" is not defined')
        source = volume_dirs[vm["name"]]
        sub_path = vm.get("subPath", "")
        if sub_path:
            if sub_path.startswith("/") or ".." in Path(sub_path).parts:
                raise ConfigError("CreateContainerConfigError", f"invalid subPath {sub_path!r}")
            root, source = source, source / sub_path
            if root.is_dir():  # as the kubelet: missing directories made with the volume root's mode
                parts = Path(sub_path).parts
                missing = [root.joinpath(*parts[:n]) for n in range(1, len(parts) + 1)
                           if not root.joinpath(*parts[:n]).exists()]
                for directory in missing:
                    directory.mkdir()
                    directory.chmod(root.stat().st_mode & 0o7777)
        mounts.append(Mount(source, vm["mountPath"], bool(vm.get("readOnly"))))
    return sorted(mounts, key=lambda m: len(Path(m.target).parts))


def split_shadowing(mounts: list[Mount], needed: list[Path]) -> tuple[list[Mount], list[Mount]]:
    """(usable, hidden): in venv mode a container sees the host's file system, so a mount whose
    target contains a path the process needs (the venv, the pod's own volume dirs) would hide it:
    an emptyDir at /tmp hides a checkout under /tmp. Those are not mounted; the caller points
    TMPDIR at a hidden /tmp volume instead."""
    usable, hidden = [], []
    for mount in mounts:
        target = Path(mount.target)
        (hidden if any(p.is_relative_to(target) for p in needed) else usable).append(mount)
    return usable, hidden
