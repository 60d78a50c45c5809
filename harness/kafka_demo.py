"""`make demo-kafka`: the Kafka example job killed and restored, checked against a failure-free run.

A throwaway broker (harness/kafka_server.py) gets a topic of JSON events from a producer (Spark's
Kafka writer, then stopped). The job (examples/kafka_to_delta.py: per-user totals in event-time
windows, with state, into a Delta Lake table: job.sink.kind delta) reads it twice into the embedded
default store (a directory, no MinIO):
  1. reference: to the end without failures;
  2. crash: SIGKILLed after its first checkpoints and restarted on the same disk (local recovery),
     then SIGKILLed again, the pod's disk wiped, restarted from the store (a remote restore: the
     Kafka offsets come back with Spark's checkpoint).
Both Delta tables, read with polars (not this project's reader), must be identical and equal to the
result computed in Python.
Run from the checkout: `python -m harness.kafka_demo`.
"""

from __future__ import annotations

import argparse
import os
import shutil
import sys
import time
from pathlib import Path

from .kafka_job import JobRuns, KafkaJob, new_topic
from .kafka_server import KafkaServer, jars_dir, produce
from .runtime_job import REPO, committed


def produce_events(bootstrap: str, job: KafkaJob) -> None:
    """Writes the topic with a short-lived Spark session (its JVM is gone before the job starts)."""
    from sparkpoint.runtime.spark.session import build_session
    from sparkpoint.runtime.spec import SparkSection

    spark = build_session(SparkSection(master="local[1]", shuffle_partitions=1), "sparkpoint-kafka-producer")
    try:
        produce(spark, bootstrap, job.topic, job.values())
    finally:
        spark.stop()


def run_demo(base: Path, events: int) -> bool:
    shutil.rmtree(base, ignore_errors=True)
    os.environ["SPARKPOINT_SPARK_JARS_DIR"] = str(jars_dir("spark-kafka"))
    t0 = time.monotonic()
    with KafkaServer(data_dir=str(base / "kafka")) as broker:
        print(f"[1/5] Kafka broker at {broker.bootstrap} (answered {broker.start_seconds:.1f} s after start)")
        job = KafkaJob(broker.bootstrap, new_topic(), name="kafka-to-delta", events=events,
                       entrypoint="kafka_to_delta:build", python_path=[str(REPO / "examples")],
                       sink={"kind": "delta", "path": "user-totals"})
        produce_events(broker.bootstrap, job)
        print(f"[2/5] produced {events} events to {job.topic}")
        env = {"SPARKPOINT_SPARK_JARS_DIR": os.environ["SPARKPOINT_SPARK_JARS_DIR"]}
        reference = JobRuns(base / "reference", job, f"file://{base / 'reference' / 'store'}", env)
        print(f"[3/5] failure-free reference run (at most {job.max_offsets_per_trigger} offsets a batch)")
        reference.finish(reference.start())
        crash = JobRuns(base / "crash", job, f"file://{base / 'crash' / 'store'}", env)
        print("[4/5] crash run: SIGKILL after the first checkpoint, restart on the same disk (local), SIGKILL "
              "again, wipe the pod's disk, restore from the store (remote)")
        p = crash.start()
        crash.wait_for(p, batches=3, checkpoints=1)
        for wipe in (False, True):
            if wipe:
                crash.wait_for(p, batches=committed(crash.pod) + 2, checkpoints=crash.checkpoints() + 1)
            p, info = crash.restart(p, wipe=wipe)
            print(f"      killed at batch {info['killed_at']}, restored ({info.get('restore')}) after batch "
                  f"{info.get('batch')} in {info.get('restore_seconds')} s")
        crash.finish(p)
    print(f"[5/5] comparing the Delta tables ({crash.table().uri}), read with polars")
    ref_rows, crash_rows, expected = (reference.table_output("polars"), crash.table_output("polars"),
                                      job.expected_rows())
    identical = ref_rows == crash_rows
    print(f"rows: reference {sum(ref_rows.values())}, crash run {sum(crash_rows.values())}, "
          f"computed {sum(expected.values())}; missing {sum((ref_rows - crash_rows).values())}, "
          f"extra/duplicate {sum((crash_rows - ref_rows).values())}")
    print(f"identical: {identical}")
    print(f"failure-free run equals the independently computed result: {ref_rows == expected}")
    print(f"whole demo {time.monotonic() - t0:.0f} s")
    return identical and ref_rows == expected


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--work", default=str(REPO / ".work" / "demo-kafka"), help="scratch dir (wiped first)")
    parser.add_argument("--events", type=int, default=KafkaJob.events)
    args = parser.parse_args(argv)
    ok = run_demo(Path(args.work).absolute(), args.events)
    print("RESULT:", "PASS" if ok else "FAIL")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
