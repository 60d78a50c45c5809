"""How the node agent stops a container's processes: as a kubelet, not as a shell's job control."""

from __future__ import annotations

import os
import time
from pathlib import Path

from process import ContainerProcess


def _alive(pid: int) -> bool:
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except FileNotFoundError:
        return False
    return state not in ("Z", "X")


def _wait_for(predicate, seconds: float = 10.0) -> bool:  # type: ignore[no-untyped-def]
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        if predicate():
            return True
        time.sleep(0.02)
    return False


def test_sigterm_reaches_the_main_process_only_and_the_group_dies_with_it(tmp_path: Path):
    """A runtime drains on SIGTERM and still needs its JVM child to stop Spark cleanly: the child
    must not get the SIGTERM too. Once the main process is gone, its leftovers are killed."""
    child_file = tmp_path / "child"
    script = f"sleep 300 & echo $! > {child_file}; trap 'sleep 0.3; exit 7' TERM; while :; do sleep 0.05; done"
    proc = ContainerProcess(["sh", "-c", script], env=dict(os.environ), view=[],
                            log_file=tmp_path / "log", pid_file=tmp_path / "pid")
    try:
        assert _wait_for(lambda: child_file.exists() and child_file.read_text().strip() != "")
        child = int(child_file.read_text())
        proc.terminate()
        assert proc.popen.wait(timeout=10) == 7  # its own TERM handler ran to the end
        assert _alive(child), "the main process's child got the SIGTERM meant for the main process"
        assert proc.poll() == 7
        assert _wait_for(lambda: not _alive(child)), "a leftover child outlived its container"
    finally:
        proc.kill()
