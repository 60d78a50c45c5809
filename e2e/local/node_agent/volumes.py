"""Materialises a pod's volumes as directories under its pod dir.

emptyDir is created once and kept for the pod's life (it survives container restarts);
configMap, secret, downwardAPI and projected volumes (including the service-account token)
are (re)written atomically on every refresh, like the kubelet does.
"""

from __future__ import annotations

import contextlib
import os
import tempfile
from collections.abc import Callable
from pathlib import Path

from podspec import ConfigError, field_value, object_data

TokenSource = Callable[[str, int, str | None], str]  # (service account, seconds, audience) -> token


def _write_atomic(path: Path, content: bytes, mode: int, group: int | None = None) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=".tmp-")
    with os.fdopen(fd, "wb") as handle:
        handle.write(content)
    if group is not None:
        _chgrp(Path(tmp), group)
    os.chmod(tmp, mode)
    os.replace(tmp, path)


def _chgrp(path: Path, group: int) -> None:
    """fsGroup, as the kubelet applies it: the volume's files belong to the pod's group, so a file
    of mode 0440 is readable by a non-root runAsUser in that group. Needs the agent to run as root;
    otherwise every container runs as the agent's own user anyway, and nothing needs changing."""
    with contextlib.suppress(PermissionError):
        os.chown(path, -1, group)


def _key_files(data: dict[str, bytes], items: list | None, default_mode: int) -> dict[str, tuple[bytes, int]]:
    if not items:
        return {key: (value, default_mode) for key, value in data.items()}
    files = {}
    for item in items:
        if item["key"] not in data:
            raise ConfigError("CreateContainerConfigError", f'key "{item["key"]}" not found')
        files[item["path"]] = (data[item["key"]], item.get("mode", default_mode))
    return files


class VolumeBuilder:
    def __init__(self, pod: dict, lookup: Callable[[str, str], dict | None], token_source: TokenSource,
                 ca_bundle: bytes, pod_ip: str, host_ip: str):
        self.pod, self.lookup, self.token_source = pod, lookup, token_source
        self.ca_bundle, self.pod_ip, self.host_ip = ca_bundle, pod_ip, host_ip

    def _object_files(self, kind: str, source: dict, default_mode: int) -> dict[str, tuple[bytes, int]]:
        name = source.get("name") or source.get("secretName")
        obj = self.lookup(kind, name)
        if obj is None and kind == "ConfigMap" and name == "kube-root-ca.crt":
            obj = {"data": {"ca.crt": self.ca_bundle.decode()}}  # published late in a new namespace
        data = object_data(obj, kind)
        if data is None:
            if source.get("optional"):
                return {}
            raise ConfigError("CreateContainerConfigError", f'{kind.lower()} "{name}" not found')
        return _key_files(data, source.get("items"), default_mode)

    def _downward_files(self, source: dict, default_mode: int) -> dict[str, tuple[bytes, int]]:
        files = {}
        for item in source.get("items") or []:
            if "fieldRef" not in item:
                raise ConfigError("CreateContainerConfigError", "only fieldRef is supported in downwardAPI")
            value = field_value(self.pod, item["fieldRef"]["fieldPath"], self.pod_ip, self.host_ip)
            files[item["path"]] = (value.encode(), item.get("mode", default_mode))
        return files

    def files_of(self, volume: dict) -> dict[str, tuple[bytes, int]]:
        """relative path -> (content, mode) for a file-backed volume."""
        if "configMap" in volume:
            source = volume["configMap"]
            return self._object_files("ConfigMap", source, source.get("defaultMode", 0o644))
        if "secret" in volume:
            source = volume["secret"]
            return self._object_files("Secret", source, source.get("defaultMode", 0o644))
        if "downwardAPI" in volume:
            source = volume["downwardAPI"]
            return self._downward_files(source, source.get("defaultMode", 0o644))
        projected = volume["projected"]
        default_mode = projected.get("defaultMode", 0o644)
        files: dict[str, tuple[bytes, int]] = {}
        for source in projected.get("sources") or []:
            if "serviceAccountToken" in source:
                token_spec = source["serviceAccountToken"]
                token = self.token_source(self.pod["spec"].get("serviceAccountName", "default"),
                                          token_spec.get("expirationSeconds", 3607), token_spec.get("audience"))
                files[token_spec["path"]] = (token.encode(), default_mode)
            elif "configMap" in source:
                files.update(self._object_files("ConfigMap", source["configMap"], default_mode))
            elif "secret" in source:
                files.update(self._object_files("Secret", source["secret"], default_mode))
            elif "downwardAPI" in source:
                files.update(self._downward_files(source["downwardAPI"], default_mode))
        return files

    def materialize(self, volumes_dir: Path) -> dict[str, Path]:
        """Create or refresh every volume; returns volume name -> host directory."""
        dirs = {}
        group = (self.pod["spec"].get("securityContext") or {}).get("fsGroup")
        for volume in self.pod["spec"].get("volumes") or []:
            target = volumes_dir / volume["name"]
            if "emptyDir" in volume:
                target.mkdir(parents=True, exist_ok=True)
                target.chmod(0o777)  # as the kubelet makes it: writable by a non-root runAsUser
            elif "hostPath" in volume:
                target = Path(volume["hostPath"]["path"])
                if volume["hostPath"].get("type") in ("DirectoryOrCreate", None, ""):
                    target.mkdir(parents=True, exist_ok=True)
            elif any(k in volume for k in ("configMap", "secret", "downwardAPI", "projected")):
                target.mkdir(parents=True, exist_ok=True)
                for relative, (content, mode) in self.files_of(volume).items():
                    if relative.startswith("/") or ".." in Path(relative).parts:
                        raise ConfigError("CreateContainerConfigError", f"invalid item path {relative!r}")
                    _write_atomic(target / relative, content, mode, group)
            else:
                raise ConfigError("CreateContainerConfigError",
                                  f'volume "{volume["name"]}" has a type the node agent does not support')
            dirs[volume["name"]] = target
        return dirs
