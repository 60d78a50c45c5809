"""The Kafka example job (sparkpoint/examples/kafka_events.py) under the runtime, with a real broker,
real Spark and the checkpoints on a real MinIO: Kafka offsets travel in Spark's checkpoint, so a
local recovery, a remote restore, a restore that re-cuts the batches and a broker outage all end in
the committed output of a failure-free run (and of the Python oracle)."""

from __future__ import annotations

import os
import time
import uuid
from pathlib import Path

import pytest

from harness.kafka_job import JobRuns, KafkaJob, batch_offsets, new_topic, read_all
from harness.kafka_server import KafkaServer, produce
from harness.runtime_job import committed, wait_until
from tests.conftest import TEST_BUCKET

# Each test starts Spark two or three times (plus the reference run for the first one to ask for it):
# minutes on two shared cores, so more room than the suite-wide 600 s; every wait inside is bounded.
pytestmark = [pytest.mark.spark, pytest.mark.minio, pytest.mark.timeout(1200)]
# The broker outage: 25 s by default (CI's tier), a minute in make test-full (its recipe sets it).
OUTAGE_SECONDS = float(os.environ.get("SPARKPOINT_KAFKA_OUTAGE_SECONDS", "25"))


def runs_on_minio(base: Path, job: KafkaJob, minio_server, connector_jars: str) -> JobRuns:  # type: ignore[no-untyped-def]
    """Runs on a fresh prefix of the session's MinIO; a `with` block kills what a failure leaves."""
    env = {**minio_server.env(), "SPARKPOINT_SPARK_JARS_DIR": connector_jars}
    return JobRuns(base, job, f"s3://{TEST_BUCKET}/kafka-{uuid.uuid4().hex[:10]}", env)


@pytest.fixture(scope="module")
def topic(kafka_server, kafka_spark) -> str:  # type: ignore[no-untyped-def]
    name = new_topic()
    produce(kafka_spark, kafka_server.bootstrap, name, KafkaJob("", name).values())
    return name


@pytest.fixture(scope="module")
def reference(tmp_path_factory, kafka_server, topic, minio_server, connector_jars):  # type: ignore[no-untyped-def]
    """The output of a failure-free run over the whole topic (checked against the oracle)."""
    with runs_on_minio(tmp_path_factory.mktemp("kafka-reference"), KafkaJob(kafka_server.bootstrap, topic),
                       minio_server, connector_jars) as runs:
        runs.finish(runs.start())
    out = runs.output()
    assert out == runs.job.expected_rows(), "the failure-free run differs from the oracle"
    return out


@pytest.mark.slow
def test_offsets_resume_after_local_and_remote_restore(tmp_path, kafka_server, topic, reference, minio_server,
                                                       connector_jars):
    with runs_on_minio(tmp_path, KafkaJob(kafka_server.bootstrap, topic), minio_server, connector_jars) as runs:
        p = runs.start()
        runs.wait_for(p, batches=3, checkpoints=1)
        p, local = runs.restart(p, wipe=False)
        assert local.get("restore") == "local"
        runs.wait_for(p, batches=committed(runs.pod) + 2, checkpoints=runs.checkpoints() + 1)
        p, remote = runs.restart(p, wipe=True)
        assert remote.get("restore") == "remote"
        runs.finish(p)
    assert runs.output() == reference


@pytest.mark.slow
@pytest.mark.ci_sample
def test_remote_restore_recuts_batches_and_output_is_unchanged(tmp_path, kafka_server, topic, minio_server,
                                                               connector_jars):
    """Compared with the oracle, which the reference run above equals: CI runs this test alone and
    saves that run (about a minute)."""
    with runs_on_minio(tmp_path, KafkaJob(kafka_server.bootstrap, topic), minio_server, connector_jars) as runs:
        p = runs.start()
        runs.wait_for(p, batches=3, checkpoints=1)
        # The restore brings offsets up to its batch only: later batches are planned anew, 400 at a time.
        p, remote = runs.restart(p, wipe=True, max_offsets_per_trigger=400)
        assert remote.get("restore") == "remote"
        runs.finish(p)
    assert runs.output() == runs.job.expected_rows()
    after = remote["batch"] + 1
    sizes = [sum((batch_offsets(runs.pod, b) or {}).values()) for b in (after - 1, after)]
    assert sizes[1] - sizes[0] > 150, f"batch {after} was not cut anew (offsets {sizes})"


@pytest.mark.slow
def test_broker_outage_delays_the_job_and_loses_nothing(tmp_path, kafka_spark, minio_server, connector_jars):
    broker = KafkaServer(data_dir=str(tmp_path / "kafka")).start()  # its own: this one goes away
    try:
        job = KafkaJob(broker.bootstrap, new_topic())
        half = job.events // 2
        produce(kafka_spark, broker.bootstrap, job.topic, job.values(0, half))
        with runs_on_minio(tmp_path / "run", job, minio_server, connector_jars) as runs:
            p = runs.start()
            wait_until(lambda: read_all(runs.pod, half), runs.timeout, "the first half read", p)
            broker.halt(hard=True)
            stalled_at = committed(runs.pod)
            time.sleep(OUTAGE_SECONDS)
            assert p.alive(), f"the runtime died during the broker outage; see {p.log_path}"
            broker.start()
            produce(kafka_spark, broker.bootstrap, job.topic, job.values(half))
            runs.finish(p)
        assert committed(runs.pod) > stalled_at
        assert runs.output() == job.expected_rows()
    finally:
        broker.stop()
