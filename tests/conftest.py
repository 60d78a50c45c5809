"""Shared fixtures: a real MinIO server for the session, and a `store` over both backends.

`store` is parametrized: each test that uses it runs once on the directory backend and once on
MinIO, each time with a fresh, empty prefix.
"""

from __future__ import annotations

import os
import uuid
from collections.abc import Iterator

import pytest

from harness.minio_server import MinioServer
from sparkpoint.runtime.store import JobRef, ObjectStore, open_store

TEST_BUCKET = "sparkpoint-test"

# Markers that follow from what a test uses, so `make test-unit` (-m "not spark and not minio and not
# tools and not slow") never starts a JVM, MinIO, helm or promtool: a test that takes one of these
# fixtures is marked without anyone remembering to (modules that run Spark in a subprocess say so
# with pytestmark). tests/docs/test_markers.py checks the rule on the collected suite.
FIXTURE_MARKS = {"minio_server": "minio", "minio_env": "minio", "spark": "spark", "helm": "tools",
                 "render": "tools"}


def pytest_collection_modifyitems(config, items):  # type: ignore[no-untyped-def]
    for item in items:
        for fixture in set(getattr(item, "fixturenames", ())) & FIXTURE_MARKS.keys():
            item.add_marker(FIXTURE_MARKS[fixture])
    # `make test` builds helm in the background while the tests run (minutes, cold): the tests that
    # need it go last, so the suite does not sit waiting for the build (a cold CI run waited 450 s).
    items.sort(key=lambda item: "helm" in getattr(item, "fixturenames", ()))


@pytest.fixture(scope="session")
def minio_server() -> Iterator[MinioServer]:
    server = MinioServer().start()
    try:
        server.make_bucket(TEST_BUCKET)
        yield server
    finally:
        server.stop()


@pytest.fixture
def minio_env(minio_server: MinioServer, monkeypatch: pytest.MonkeyPatch) -> dict[str, str]:
    """The server's endpoint and credentials, also set in os.environ for code that reads them."""
    env = minio_server.env()
    for key, value in env.items():
        monkeypatch.setenv(key, value)
    return env


BACKENDS = [pytest.param("dir", id="dir"), pytest.param("minio", id="minio", marks=pytest.mark.minio)]


@pytest.fixture(params=BACKENDS)
def store_url(request: pytest.FixtureRequest, tmp_path) -> str:  # type: ignore[no-untyped-def]
    """A fresh, empty store: a temp directory, or a unique prefix on the session's MinIO server
    (whose endpoint and credentials are then in the environment, as the CLI expects)."""
    if request.param == "dir":
        return f"file://{tmp_path}/store"
    request.getfixturevalue("minio_env")
    return f"s3://{TEST_BUCKET}/t-{uuid.uuid4().hex[:12]}"


@pytest.fixture
def store(store_url: str) -> ObjectStore:
    s = open_store(store_url)
    s.check()
    return s


@pytest.fixture
def job() -> JobRef:
    return JobRef(namespace="default", name=f"job-{uuid.uuid4().hex[:6]}")


@pytest.fixture(scope="session", autouse=True)
def _spark_scratch_under_pytest(tmp_path_factory: pytest.TempPathFactory) -> Iterator[None]:
    """Spark's scratch (its `blockmgr-*` folders) under pytest's own temporary tree, which pytest prunes
    to the last few runs, instead of /tmp: a JVM a test kills never removes its folder, and a day of
    runs once left 40 GB there. In-process sessions and runtimes started as child processes inherit it."""
    before = os.environ.get("SPARK_LOCAL_DIRS")
    os.environ["SPARK_LOCAL_DIRS"] = str(tmp_path_factory.mktemp("spark-local"))
    yield
    if before is None:
        os.environ.pop("SPARK_LOCAL_DIRS", None)
    else:
        os.environ["SPARK_LOCAL_DIRS"] = before


@pytest.fixture(autouse=True)
def _no_inline_from_the_shell(monkeypatch: pytest.MonkeyPatch) -> None:
    """Tests see the runtime's defaults whatever the developer's shell sets; a test that wants files
    carried inline says so (tests/store/test_inline.py, tests/runtime/test_inline_spark.py)."""
    monkeypatch.delenv("SPARKPOINT_CHECKPOINT_INLINE_MAX", raising=False)
