"""`sparkpoint run --supervise`: restart the runtime on crash, with exponential backoff.

Each child runs in its own process group; when it dies the whole group is killed, so a Spark JVM
left behind by a crashed driver never writes into the hot dir of its successor. Exit codes 2 (bad
input) and 3 (restore failed) are not retried: a restart cannot fix them.
"""

from __future__ import annotations

import contextlib
import logging
import os
import signal
import subprocess
import time
from collections.abc import Callable
from typing import Any

from sparkpoint.runtime.spec import RestartSection, parse_duration

log = logging.getLogger("sparkpoint.supervisor")
NOT_RETRIED = {2, 3, 4}  # bad input, no restorable point, a rescale Spark refused: a retry would do the same


def should_restart(code: int, restarts: int, policy: RestartSection) -> bool:
    if policy.policy == "Never" or code in NOT_RETRIED:
        return False
    if code == 0 and policy.policy != "Always":
        return False
    return restarts < policy.max_restarts


def supervise(command: list[str], policy: RestartSection, *, env: dict[str, str] | None = None,
              sleep: Callable[[float], None] = time.sleep) -> int:
    restarts = 0
    child: subprocess.Popen[Any] | None = None
    stopping = False

    def forward(signum: int, _frame: Any) -> None:
        nonlocal stopping
        stopping = True
        if child and child.poll() is None:
            child.send_signal(signum)  # the child drains; we wait for it
    signal.signal(signal.SIGTERM, forward)
    signal.signal(signal.SIGINT, forward)
    while True:
        started = time.monotonic()
        child = subprocess.Popen(command, env=env, start_new_session=True)
        code = child.wait()
        _kill_group(child.pid)
        log.info("runtime exited", extra={"code": code, "restarts": restarts,
                                          "seconds": round(time.monotonic() - started, 1)})
        if stopping or not should_restart(code, restarts, policy):
            return code if code >= 0 else 128 - code
        if time.monotonic() - started >= parse_duration(policy.stable_after):
            restarts = 0  # it ran stably (restart.stableAfter): start the backoff over, as the operator does
        restarts += 1
        delay = policy.backoff_seconds(restarts)
        log.warning("restarting runtime", extra={"code": code, "restart": restarts, "delay_seconds": delay})
        sleep(delay)


def _kill_group(pgid: int) -> None:
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(pgid, signal.SIGKILL)
