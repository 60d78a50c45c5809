"""Options for the runtime tests: `--soak` turns the fault-injection sample into the long run."""

from __future__ import annotations

import pytest


def pytest_addoption(parser):
    group = parser.getgroup("sparkpoint runtime")
    group.addoption("--soak", action="store_true", default=False,
                    help="fault injection: run 200+ kills and write docs/reliability.md")
    group.addoption("--soak-kills", type=int, default=200, help="kills in --soak mode (default 200)")
    group.addoption("--fault-seed", type=int, default=None, help="seed of the random kill schedule")


def pytest_collection_modifyitems(config, items):
    """Each kill/restart costs a Spark JVM start: give the fault-injection test room (the soak runs
    for hours; its own waits are bounded, so a hang still fails)."""

    limit = 0 if config.getoption("--soak", default=False) else 2400
    for item in items:
        if item.path.name == "test_fault_injection.py":
            item.add_marker(pytest.mark.timeout(limit))


@pytest.fixture(scope="module")
def spark():
    """A local Spark session with the runtime's own settings, one per test module (a JVM start each)."""
    from sparkpoint.runtime.spark.session import build_session
    from sparkpoint.runtime.spec import SparkSection

    session = build_session(SparkSection(master="local[2]", shuffle_partitions=2), "sparkpoint-tests")
    yield session
    session.stop()
