"""The operator caps glibc's malloc arenas at startup unless MALLOC_ARENA_MAX says otherwise."""

from __future__ import annotations

import asyncio
import subprocess
import sys

from sparkpoint.operator import malloc


def test_an_explicit_malloc_arena_max_is_left_alone(monkeypatch) -> None:
    monkeypatch.setenv("MALLOC_ARENA_MAX", "4")
    assert malloc.limit_arenas() is False


def test_arenas_are_limited_on_glibc(monkeypatch) -> None:
    monkeypatch.delenv("MALLOC_ARENA_MAX", raising=False)
    # In a child process: the cap is process-wide and stays.
    code = "from sparkpoint.operator import malloc; print(malloc.limit_arenas())"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout.split()
    assert out == ["True"]  # the CI and the image run on glibc (Debian)


def test_the_heap_is_trimmed_periodically(monkeypatch) -> None:
    trims: list[int] = []
    monkeypatch.setattr(malloc, "trim", lambda: trims.append(1) or True)

    async def scenario() -> None:
        task = asyncio.create_task(malloc.trim_every(0.01))
        while len(trims) < 3:
            await asyncio.sleep(0.01)
        task.cancel()
    asyncio.run(asyncio.wait_for(scenario(), timeout=30))
    assert len(trims) >= 3
