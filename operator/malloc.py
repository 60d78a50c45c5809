"""glibc malloc settings that keep the operator's resident memory small at 1,000 jobs.

glibc gives threads that allocate at the same time arenas of their own (up to 8 per core), and
freed heap space is seldom returned: with the kube and store executors' 32 threads, arenas held a
large part of the operator's RSS, and after a ramp the heap kept pages no longer used (a trim
after a 300-job ramp: 204 -> 157 MiB; docs/benchmarks.md, "Operator under load"). Both are done
with mallopt/malloc_trim at run time, so they hold however the operator is started (console
script, `python -m`, image, chart); they do nothing where libc is not glibc.
"""

from __future__ import annotations

import asyncio
import ctypes
import os

M_ARENA_MAX = -8  # glibc's mallopt parameter numbers (malloc.h)
M_MMAP_THRESHOLD = -3
ARENAS = 2
# Blocks this large come from mmap and go back to the system when freed. Setting it also stops
# glibc from raising the threshold (up to 32 MiB) after the first large free, which otherwise
# puts every later large buffer (decoded API answers, JSON text) on the heap, where it fragments.
MMAP_THRESHOLD = 128 * 1024
TRIM_EVERY = float(os.environ.get("SPARKPOINT_MALLOC_TRIM_SECONDS", "10"))  # a trim takes milliseconds


def _glibc() -> ctypes.CDLL | None:
    try:
        libc = ctypes.CDLL(None)
        return libc if hasattr(libc, "mallopt") and hasattr(libc, "malloc_trim") else None
    except OSError:
        return None


def limit_arenas(arenas: int = ARENAS) -> bool:
    """At most `arenas` malloc arenas for the threads started from now on (call it before any
    executor starts). An explicit MALLOC_ARENA_MAX in the environment wins. True if applied."""
    if "MALLOC_ARENA_MAX" in os.environ:
        return False
    libc = _glibc()
    if libc is None or libc.mallopt(M_ARENA_MAX, arenas) != 1:
        return False
    if "MALLOC_MMAP_THRESHOLD_" not in os.environ:
        libc.mallopt(M_MMAP_THRESHOLD, MMAP_THRESHOLD)
    return True



def trim() -> bool:
    """Hand free heap pages back to the system. True if any were."""
    libc = _glibc()
    return bool(libc is not None and libc.malloc_trim(0))


async def trim_every(seconds: float = TRIM_EVERY) -> None:
    """Trim periodically, in a thread (it walks the heap under malloc's lock; the loop goes on)."""
    while True:
        await asyncio.sleep(seconds)
        await asyncio.to_thread(trim)
