"""The SparkSession made beside the restore (runtime/service/early_start.py), with a stand-in for
Spark: the caller gets what the thread built, or its error, and a disabled start builds when asked."""

from __future__ import annotations

import threading

import pytest

from sparkpoint.runtime.service.early_start import EarlyStart
from sparkpoint.runtime.service.start_phases import StartPhases
from sparkpoint.runtime.spec import SparkSection


def test_the_session_is_built_on_its_own_thread_and_handed_over() -> None:
    early, seen = EarlyStart(SparkSection(), True, StartPhases(origin=0.0)), []

    def build() -> str:
        seen.append(threading.current_thread().name)
        return "session"

    early.start_session(build)
    assert early.session(build) == "session" and seen == ["session-start"]  # built once, there
    early.join()


def test_its_failure_is_raised_to_the_caller() -> None:
    early = EarlyStart(SparkSection(), True, StartPhases(origin=0.0))

    def build() -> str:
        raise RuntimeError("no JVM")

    early.start_session(build)
    with pytest.raises(RuntimeError, match="no JVM"):
        early.session(build)


def test_disabled_it_builds_when_asked_on_the_callers_thread() -> None:
    early, seen = EarlyStart(SparkSection(), False, StartPhases(origin=0.0)), []
    early.launch_jvm()
    early.start_session(lambda: seen.append("early"))
    assert seen == []
    assert early.session(lambda: threading.current_thread().name) == threading.current_thread().name
