"""One run of one container: a local process in its own session and its own mount namespace,
where each volume is bind-mounted at its mountPath (so the service-account token sits at the
usual /var/run/secrets/kubernetes.io/serviceaccount). Output goes to a log file."""

from __future__ import annotations

import contextlib
import os
import shlex
import signal
import subprocess
from pathlib import Path

from podspec import Mount


def mount_script(mounts: list[Mount], working_dir: str) -> str:
    """The shell prologue that builds the container's view of the file system, then execs."""
    lines = ["set -e"]
    for mount in mounts:
        source, target = shlex.quote(str(mount.source)), shlex.quote(mount.target)
        if mount.source.is_file():
            lines.append(f"mkdir -p $(dirname {target}); [ -e {target} ] || : > {target}")
        else:
            lines.append(f"mkdir -p {target}")
        lines.append(f"mount --bind {source} {target}")
        if mount.read_only:
            lines.append(f"mount -o remount,bind,ro {target}")
    lines.append(f"mkdir -p {shlex.quote(working_dir)} && cd {shlex.quote(working_dir)}")
    lines.append('exec "$@"')
    return "\n".join(lines)


def in_container_view(mounts: list[Mount], working_dir: str) -> list[str]:
    """argv prefix that runs a command with the container's mounts (exec probes use it too)."""
    return ["unshare", "--mount", "--propagation", "private", "--",
            "/bin/sh", "-c", mount_script(mounts, working_dir), "container"]


class ContainerProcess:
    def __init__(self, argv: list[str], env: dict[str, str], view: list[str], log_file: Path, pid_file: Path):
        """`view`: the argv prefix that builds the container's file system view (in_container_view,
        or image_mode.in_image_view) and execs the command."""
        log_file.parent.mkdir(parents=True, exist_ok=True)
        pid_file.parent.mkdir(parents=True, exist_ok=True)
        wrapper = [*view, *argv]
        with open(log_file, "ab") as out:
            # unshare and sh exec in place: the pid we hold is the container's main process.
            self.popen = subprocess.Popen(wrapper, env=env, stdout=out, stderr=subprocess.STDOUT,
                                          stdin=subprocess.DEVNULL, start_new_session=True)
        self.pid_file = pid_file
        pid_file.write_text(f"{self.popen.pid}\n")

    @property
    def pid(self) -> int:
        return self.popen.pid

    def poll(self) -> int | None:
        """None while running, else the Kubernetes-style exit code (128 + signal when killed)."""
        code = self.popen.poll()
        if code is None:
            return None
        self._reap_group()
        self.pid_file.unlink(missing_ok=True)
        return 128 - code if code < 0 else code

    def signal(self, sig: int) -> None:
        """SIGTERM (any catchable signal) goes to the main process only, as a kubelet's runtime sends
        it to the container's PID 1: a runtime that drains on SIGTERM still has its JVM child to stop
        Spark with (signalling the group stopped both at once, and the drained attempt's last event
        log upload lost SparkContext.stop's events). SIGKILL takes the whole group, as the end of a
        PID namespace does."""
        with contextlib.suppress(ProcessLookupError):
            if sig == signal.SIGKILL:
                os.killpg(self.popen.pid, sig)
            else:
                os.kill(self.popen.pid, sig)

    def terminate(self) -> None:
        self.signal(signal.SIGTERM)

    def kill(self) -> None:
        self.signal(signal.SIGKILL)

    def _reap_group(self) -> None:
        """A container's leftover children die with it, as they would with its PID namespace."""
        self.signal(signal.SIGKILL)
