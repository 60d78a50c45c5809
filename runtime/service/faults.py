"""Fault injection for the reliability tests: kill the whole runtime at a named point.

`SPARKPOINT_KILL_AT=<point>:<n>` makes the n-th pass through `point` SIGKILL the process group
(the Python driver and its Spark JVM die together, as when a container is killed). Unset in
production, where `point()` costs one dict lookup.
"""

from __future__ import annotations

import os
import signal
import threading

POINTS = ("batch", "freeze", "upload", "manifest", "publish")
_counts: dict[str, int] = {}
_lock = threading.Lock()


def _armed() -> tuple[str, int] | None:
    spec = os.environ.get("SPARKPOINT_KILL_AT")
    if not spec:
        return None
    name, _, nth = spec.partition(":")
    return name, int(nth or 1)


def point(name: str) -> None:
    armed = _armed()
    if not armed or armed[0] != name:
        return
    with _lock:
        _counts[name] = _counts.get(name, 0) + 1
        hit = _counts[name] == armed[1]
    if hit:
        kill_self()


def armed_for(name: str) -> bool:
    armed = _armed()
    return bool(armed and armed[0] == name)


def kill_self() -> None:
    os.write(2, b'{"msg": "fault injection: SIGKILL"}\n')
    if os.getpgid(0) == os.getpid():  # only when we lead our own group (never kill a test runner)
        os.killpg(os.getpid(), signal.SIGKILL)
    os.kill(os.getpid(), signal.SIGKILL)
