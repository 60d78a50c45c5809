"""A real Kafka broker (harness/kafka_server.py) for the session, the connector jars, and a Spark
session with them on its classpath (the runtime's own builder, as a job gets it)."""

from __future__ import annotations

import os
from collections.abc import Iterator

import pytest

from harness.kafka_server import KafkaServer, jars_dir


@pytest.fixture(scope="session")
def kafka_server() -> Iterator[KafkaServer]:
    server = KafkaServer().start()
    try:
        yield server
    finally:
        server.stop()


@pytest.fixture(scope="session")
def connector_jars() -> str:
    """The pinned connector set's dir, for SPARKPOINT_SPARK_JARS_DIR (fetched on a fresh machine)."""
    return str(jars_dir("spark-kafka"))


@pytest.fixture(scope="module")
def kafka_spark(connector_jars: str):  # type: ignore[no-untyped-def]
    from sparkpoint.runtime.spark.session import build_session
    from sparkpoint.runtime.spec import SparkSection

    before = os.environ.get("SPARKPOINT_SPARK_JARS_DIR")
    os.environ["SPARKPOINT_SPARK_JARS_DIR"] = connector_jars
    try:
        session = build_session(SparkSection(master="local[2]", shuffle_partitions=2), "sparkpoint-kafka-tests")
    finally:
        if before is None:
            os.environ.pop("SPARKPOINT_SPARK_JARS_DIR")
        else:
            os.environ["SPARKPOINT_SPARK_JARS_DIR"] = before
    yield session
    session.stop()
