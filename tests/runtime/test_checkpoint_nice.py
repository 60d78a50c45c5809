"""The async checkpoint phase's nice value (SPARKPOINT_CHECKPOINT_NICE)."""

from __future__ import annotations

import os
import threading

import pytest

from sparkpoint.runtime.service import checkpointing


@pytest.mark.parametrize(("value", "nice"), [(None, 0), ("10", 10), ("19", 19), ("40", 19), ("-5", 0), ("x", 0)])
def test_nice_comes_from_the_env_within_linux_range(monkeypatch, value, nice) -> None:
    if value is None:
        monkeypatch.delenv(checkpointing.NICE_ENV, raising=False)
    else:
        monkeypatch.setenv(checkpointing.NICE_ENV, value)
    assert checkpointing.checkpoint_nice() == nice


def test_the_async_thread_gets_that_nice(monkeypatch) -> None:
    monkeypatch.setenv(checkpointing.NICE_ENV, "7")
    seen: list[int] = []

    def body() -> None:
        checkpointing._lower_thread_priority()
        seen.append(os.getpriority(os.PRIO_PROCESS, threading.get_native_id()))
    t = threading.Thread(target=body)
    t.start()
    t.join()
    assert seen == [max(7, os.getpriority(os.PRIO_PROCESS, 0))]
