"""The driver JVM's heap, sized from the runtime container's memory limit (spec.spark.resources.memory).

The container holds more than the heap: the JVM's own memory (metaspace, code cache, thread stacks,
GC structures, Netty's direct buffers), RocksDB's native memory (memtables, block cache) and the
Python runtime beside the JVM. A heap as large as the limit is OOM-killed by the kernel (on a real
node a 1g heap in a 512Mi container was, every time: e2e/README.md), so the heap is what is left
after a fixed reserve, and at most a fraction of the limit (the native parts grow with the job).
Pure: no JVM, no Spark import; the operator passes the result to the runtime as SPARKPOINT_DRIVER_MEMORY.
"""

from __future__ import annotations

from decimal import Decimal

DRIVER_MEMORY_ENV = "SPARKPOINT_DRIVER_MEMORY"  # spark.driver.memory; unset (a local run): 1g
MIB = 1 << 20
# JVM non-heap (about 250 MiB for a Spark driver) plus the Python runtime (about 150 MiB), with margin.
NON_HEAP_RESERVE_MIB = 512
HEAP_FRACTION = Decimal("0.75")
# Spark refuses a driver whose heap is under 1.5 times its 300 MiB reserved memory ("System memory ...
# must be at least 471859200"); 512 MiB clears it with the JVM's own accounting (one survivor space less).
MIN_HEAP_MIB = 512
# The smallest container limit that leaves MIN_HEAP_MIB: the spec's minimum for spark.resources.memory.
MIN_CONTAINER_MIB = MIN_HEAP_MIB + NON_HEAP_RESERVE_MIB


def driver_heap_mib(limit_bytes: int | Decimal) -> int:
    """The heap in MiB for a container limited to `limit_bytes`: min(limit - reserve, 0.75 limit).
    A limit too small for MIN_HEAP_MIB is a ValueError (the spec's minimum refuses it first)."""
    limit_mib = Decimal(limit_bytes) / MIB
    heap = int(min(limit_mib - NON_HEAP_RESERVE_MIB, limit_mib * HEAP_FRACTION))
    if heap < MIN_HEAP_MIB:
        raise ValueError(f"a memory limit of {limit_mib:.0f}Mi leaves a {heap}Mi driver heap; Spark needs "
                         f"{MIN_HEAP_MIB}Mi, so the limit must be at least {MIN_CONTAINER_MIB}Mi")
    return heap


def driver_memory(limit: str) -> str:
    """spark.driver.memory for a container limit given as a Kubernetes quantity ('2Gi' -> '1536m')."""
    from sparkpoint.runtime.spec_rules import parse_quantity

    return f"{driver_heap_mib(parse_quantity(limit))}m"
