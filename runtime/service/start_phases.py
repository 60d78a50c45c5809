"""Where the seconds of a start go (issue 43, the cold path): the moments one runtime start reaches,
as seconds since its process started (monotonic clock), on GET /status as `startPhases` and in one
structured log line `start phases` once the first new batch has committed (docs/design.md §8).

  imports     the runtime's code is imported and the spec read (Python's start and the CLI's imports)
  entrypoint  the job's own module imported (pyspark with it, for most jobs)
  api         the store client made and the control API listening
  promoted    a standby (standby.py) was asked to start as the next attempt (POST /promote); the
              phases before it (jvm, session) happened while it followed the store
  fence       the store answered and this start claimed its attempt (§5)
  jvm         the driver's JVM (the Py4J gateway) is up; it boots from the start, beside everything above
  restored    the state is in the hot dir (local, remote or fresh)
  session     the SparkSession is up (on that JVM)
  built       the job's DataFrame built: its entrypoint's function called on the session, the plan analysed
  query       the streaming query started (the progress listener and foreachBatch's callbacks set up too)
  firstBatchPlanned    Spark logged the offsets of the first batch after the restored one
  firstBatchCommitted  ... and committed it: the first new output can be published

`jvm` and `session` may come before `fence` and `restored`: the JVM boots from the start and the
session is made once the attempt is claimed, while the restore downloads (runner.py). With
`spark.master: k8s` or `--serial-start` (the benchmarks' baseline) both come after `restored`,
and `jvm` is not recorded.
"""

from __future__ import annotations

import os
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

ORDER = ("imports", "entrypoint", "api", "promoted", "fence", "jvm", "restored", "session", "built", "query",
         "firstBatchPlanned", "firstBatchCommitted")


def process_started() -> float:
    """When this process started, on the time.monotonic() clock: /proc/self/stat's start time (clock
    ticks since boot) against CLOCK_BOOTTIME, whose difference to CLOCK_MONOTONIC is only the time the
    machine slept. Without /proc (not Linux), now."""
    now = time.monotonic()
    try:
        fields = Path("/proc/self/stat").read_text().rsplit(")", 1)[1].split()
        start = int(fields[19]) / os.sysconf("SC_CLK_TCK")  # field 22 of stat(5); 20 after the name
        age = time.clock_gettime(time.CLOCK_BOOTTIME) - start
    except (OSError, ValueError, IndexError, AttributeError):
        return now
    return now - max(0.0, age)


class StartPhases:
    def __init__(self, origin: float | None = None, clock: Callable[[], float] = time.monotonic):
        self.origin = process_started() if origin is None else origin
        self.clock = clock
        self._marks: dict[str, float] = {}
        self._lock = threading.Lock()

    def mark(self, name: str) -> None:
        """The first time only: a phase is when the start first got there."""
        with self._lock:
            self._marks.setdefault(name, self.clock())

    def has(self, name: str) -> bool:
        return name in self._marks

    def to_json(self) -> dict[str, Any]:
        """Seconds since the process started, per phase reached, in ORDER."""
        with self._lock:
            marks = dict(self._marks)
        return {name: round(marks[name] - self.origin, 3) for name in ORDER if name in marks}

    def note_batches(self, planned: int | None, committed: int | None, restored: int | None) -> None:
        """Spark's logs after the restored batch (None: restored nothing): planned and committed."""
        after = -1 if restored is None else restored
        if planned is not None and planned > after:
            self.mark("firstBatchPlanned")
        if committed is not None and committed > after:
            self.mark("firstBatchPlanned")
            self.mark("firstBatchCommitted")
