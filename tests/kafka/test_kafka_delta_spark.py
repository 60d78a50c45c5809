"""The Kafka -> Delta example (examples/kafka_to_delta.py, job.sink.kind: delta) under the runtime, with
a real broker, real Spark and a real MinIO: the table, read by delta-rs and by polars, equals the
failure-free output after a crash between a checkpoint's manifest and its publish (no Delta commit,
no entry), a restart that re-publishes, and a restore to an older checkpoint (the table returns to
that checkpoint's version first: one history)."""

from __future__ import annotations

import uuid
from pathlib import Path

import pytest
from deltalake import DeltaTable

from harness.kafka_job import JobRuns, KafkaJob, new_topic
from harness.kafka_server import produce
from harness.runtime_job import REPO, committed, wait_until
from sparkpoint.runtime.sink.delta_table import CHECKPOINT_META
from tests.conftest import TEST_BUCKET

pytestmark = [pytest.mark.spark, pytest.mark.minio, pytest.mark.timeout(1200)]


def delta_job(bootstrap: str, topic: str) -> KafkaJob:
    return KafkaJob(bootstrap, topic, name="kafka-to-delta", entrypoint="kafka_to_delta:build",
                    python_path=[str(REPO / "examples")], sink={"kind": "delta", "path": "user-totals"})


def checkpoint_ids(runs: JobRuns) -> list[str]:
    from sparkpoint.runtime.store import open_store

    store = open_store(runs.store_url, env=runs.env)
    return sorted(o.key.rsplit("/", 1)[-1][:-5] for o in store.list(f"{runs.ref.root}/checkpoints/")
                  if o.key.endswith(".json"))


def history(runs: JobRuns) -> list[dict]:
    loc = runs.table()
    return DeltaTable(loc.uri, storage_options=loc.storage_options).history()


@pytest.mark.slow
@pytest.mark.ci_sample
def test_delta_table_equals_failure_free_output_after_crash_and_older_restore(
        tmp_path: Path, kafka_server, kafka_spark, minio_server, connector_jars):  # type: ignore[no-untyped-def]
    job = delta_job(kafka_server.bootstrap, new_topic())
    produce(kafka_spark, kafka_server.bootstrap, job.topic, job.values())
    env = {**minio_server.env(), "SPARKPOINT_SPARK_JARS_DIR": connector_jars}
    with JobRuns(tmp_path, job, f"s3://{TEST_BUCKET}/delta-{uuid.uuid4().hex[:10]}", env) as runs:
        # 1. Killed in the 5th checkpoint's publish step: manifest written, no entry, no Delta commit.
        #    (A checkpoint needs a new batch, so the 4th covers batch 3, the first whose windows close.)
        p = runs.start(env={"SPARKPOINT_KILL_AT": "publish:5"})
        wait_until(lambda: not p.alive(), runs.timeout, "the injected crash at the 5th publish")
        crashed = checkpoint_ids(runs)[-1]
        before = [h.get(CHECKPOINT_META) for h in reversed(history(runs))]  # oldest first
        assert crashed == "chk-000005" and before[-1] == "chk-000004", before
        # 2. A new pod restores the first checkpoint (no rows yet): the table first returns to it, in
        #    a commit named after it that removes every later file; chk-000005's never reach the table.
        p, info = runs.restart(p, wipe=True, restore_from={"checkpoint": "chk-000001"})
        assert info.get("restore") == "remote"
        after = [h.get(CHECKPOINT_META) for h in reversed(history(runs))]
        assert after[len(before)] == "chk-000001", after
        runs.finish(p)
    by_delta_rs, by_polars, expected = runs.table_output(), runs.table_output("polars"), job.expected_rows()
    # The oracle equals the failure-free run (checked by test_kafka_restore_spark's reference run).
    assert by_delta_rs == by_polars == expected
    assert runs.output() == expected  # this project's reader of the commit entries agrees
    commits = [h.get(CHECKPOINT_META) for h in history(runs)]
    assert crashed not in commits and committed(runs.pod) > 0
