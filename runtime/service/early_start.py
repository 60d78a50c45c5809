"""The driver's JVM and SparkSession started beside the rest of a start (issue 43, the cold path).

They took their seconds after the store's first answer, the fence and the restore; now the JVM boots
once the job's module has imported, and the SparkSession is made on it once the attempt is claimed
(its number names the event log and the application), both on threads of their own while the main
thread claims and restores (docs/benchmarks.md, "Recovery: where a start's seconds go"). Nothing of
the session reads the hot dir before the query starts. Off for spark.master k8s (its session asks for
executor pods, which must wait for an earlier start's executors, docs/design.md §9) and for
`sparkpoint run --serial-start` (the benchmarks' baseline): then the session is made when asked for.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable
from typing import Any

from sparkpoint.runtime.spec import SparkSection

from .start_phases import StartPhases

log = logging.getLogger("sparkpoint.runtime")


class EarlyStart:
    def __init__(self, spark: SparkSection, enabled: bool, phases: StartPhases):
        self.spark, self.enabled, self.phases = spark, enabled, phases
        self._jvm: threading.Thread | None = None
        self._session: threading.Thread | None = None
        self._result: Any = None
        self._error: BaseException | None = None

    def launch_jvm(self) -> None:
        """Boot the driver's JVM (pyspark keeps one gateway per process; the session is made on it)."""
        if not self.enabled:
            return
        from sparkpoint.runtime.spark.identity import ensure_user_identity
        from sparkpoint.runtime.spark.session import launch_jvm

        ensure_user_identity()  # here: it may set environment variables, which other threads read

        def launch() -> None:
            try:
                launch_jvm(self.spark)
                self.phases.mark("jvm")
            except BaseException as exc:  # noqa: BLE001 - build_session launches it again, and fails there
                log.warning("the JVM did not start early", extra={"error": str(exc)})

        self._jvm = threading.Thread(target=launch, name="jvm-launch", daemon=True)
        self._jvm.start()

    def start_session(self, build: Callable[[], Any]) -> None:
        """`build()` (the SparkSession) on a thread of its own, after the JVM's boot. Once only: a
        standby started it before its promotion (standby.py)."""
        if not self.enabled or self._session is not None:
            return

        def start() -> None:
            try:
                self._result = self._build(build)
            except BaseException as exc:  # re-raised by session()
                self._error = exc

        self._session = threading.Thread(target=start, name="session-start", daemon=True)
        self._session.start()

    def session(self, build: Callable[[], Any]) -> Any:
        """The session start_session began (waited for), else `build()` now."""
        if self._session is None:
            return self._build(build)
        self._session.join()
        if self._error is not None:
            raise self._error
        return self._result

    def join(self) -> None:
        """Wait for what was started (a start that ends early stops its session cleanly)."""
        for thread in (self._jvm, self._session):
            if thread is not None:
                thread.join()

    def _build(self, build: Callable[[], Any]) -> Any:
        if self._jvm is not None:
            self._jvm.join()  # (its failure is no error here: build_session launches the JVM itself)
        return build()
