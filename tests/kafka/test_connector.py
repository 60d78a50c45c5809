"""The pinned connector set (jars.lock `spark-kafka`) works with the pinned pyspark: a streaming
query reads three messages from a real broker. If a pyspark or connector bump breaks the pair
(a NoSuchMethodError, a missing class), this fails with Spark's own error."""

from __future__ import annotations

import uuid

import pytest

from harness.kafka_server import produce

pytestmark = pytest.mark.spark


def test_streaming_query_reads_a_topic_with_the_pinned_connector(kafka_server, kafka_spark):
    topic = f"connector-{uuid.uuid4().hex[:8]}"
    assert produce(kafka_spark, kafka_server.bootstrap, topic, ["one", "two", "three"]) == 3
    stream = (kafka_spark.readStream.format("kafka")
              .option("kafka.bootstrap.servers", kafka_server.bootstrap)
              .option("subscribe", topic).option("startingOffsets", "earliest").load())
    name = f"q_{topic.replace('-', '_')}"
    query = stream.selectExpr("CAST(value AS STRING) AS value").writeStream.format("memory") \
        .queryName(name).start()
    try:
        query.processAllAvailable()
        assert query.exception() is None
    finally:
        query.stop()
    values = sorted(r.value for r in kafka_spark.sql(f"SELECT value FROM {name}").collect())
    assert values == ["one", "three", "two"]
