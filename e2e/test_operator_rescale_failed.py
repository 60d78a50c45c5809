"""A rescale Spark refuses, on the local cluster (issue 26): the job keeps its state in the HDFS state
store (`spark.stateStore: hdfs`), which Spark's StreamingCheckpointManager.repartition does not
support, so `kubectl sparkpoint rescale --partitions` makes the upgrade's new attempt exit 4 for
real (Spark's own refusal, nothing injected). The operator rolls the upgrade back at once: Status
and a Warning Event say RescaleFailed naming from and to, the next attempt runs the stable spec's 2
partitions from the savepoint the upgrade started from, and the committed output equals the
failure-free run's, every row exactly once."""

from __future__ import annotations

import pytest
from operator_jobs import BUCKET, Jobs
from test_kubectl_plugin import plugin

from harness.runtime_job import WindowedJob, canonical
from sparkpoint.runtime.checkpoint.catalog import latest_checkpoint
from sparkpoint.runtime.sink.transactional import read_committed
from sparkpoint.runtime.store import JobRef, open_store

ROWS, KEYS, WINDOW, WATERMARK, TOTAL = 100, 40, 5, 2, 30
BEFORE = 8  # committed batches before the rescale: state in every key's window, output on both sides


def state_partitions(manifest) -> set[int]:
    """The state partitions a checkpoint holds (state/<operator>/<partition>/...)."""
    parts = set()
    for entry in manifest.files:
        bits = entry.path.split("/")
        if len(bits) > 3 and bits[0] == "state" and bits[2].isdigit():
            parts.add(int(bits[2]))
    return parts


@pytest.mark.slow
@pytest.mark.timeout(2400)
def test_a_rescale_spark_refuses_rolls_back_and_keeps_output_exactly_once(api_client, namespace, operator,
                                                                          store_env):
    operator.set_upgrade_timeout("300s")  # a Spark start on a loaded 2-core machine
    jobs = Jobs(api_client, namespace, store_env)
    store, ref = open_store(f"s3://{BUCKET}/{namespace}", env=store_env), JobRef(namespace, "refused")
    jobs.create("refused", **{"spark.shufflePartitions": 2, "spark.stateStore": "hdfs", "job.args": {
        "rows_per_batch": ROWS, "keys": KEYS, "total_batches": TOTAL, "window": f"{WINDOW} seconds",
        "watermark": f"{WATERMARK} seconds"}})
    st = jobs.wait_status("refused", f"{BEFORE} batches checkpointed", lambda s: s.get("phase") == "Running"
                          and (s.get("latestCheckpoint") or {}).get("batch", -1) >= BEFORE, timeout=600,
                          operator=operator)
    attempt = st["attempt"]
    assert state_partitions(latest_checkpoint(store, ref)) == {0, 1}

    out = plugin("-n", namespace, "rescale", "refused", "--partitions", "4")
    assert "shufflePartitions = 4" in out.stdout
    generation = jobs.get("refused")["metadata"]["generation"]
    # attempt+1 is the upgrade's (refused, exit 4); attempt+2 the rollback's, Running the stable spec
    st = jobs.wait_status("refused", "rolled back after RescaleFailed and Running again", lambda s: s.get(
        "phase") == "Running" and (s.get("lastFailure") or {}).get("reason") == "RescaleFailed"
        and s.get("attempt", 0) >= attempt + 2, timeout=900, operator=operator)
    failure = st["lastFailure"]["message"]
    assert "from 2 to 4 partitions" in failure and "rolled back to the last stable spec (2 partitions)" in failure, \
        failure
    assert st.get("lastRescale") is None, st["lastRescale"]  # nothing was repartitioned
    # the rollback restores the point the upgrade started from: the drain's savepoint
    assert st["restore"]["checkpoint"] == f"upgrade-{generation}", st["restore"]
    events = [(e.type, e.reason, e.message) for e in jobs.core.list_namespaced_event(
        namespace, field_selector="involvedObject.name=refused").items]
    refused = [m for t, r, m in events if (t, r) == ("Warning", "RescaleFailed")]
    assert refused and "from 2 to 4 partitions" in refused[0], events
    assert "unsupported" in refused[0].lower() or "invalid-checkpoint" in refused[0], refused[0]

    # the rolled-back attempt checkpoints at the old count: 2 state partitions, no more
    since = st["latestCheckpoint"]["batch"]
    jobs.wait_status("refused", "a checkpoint of the rolled-back attempt", lambda s: (s.get("latestCheckpoint")
                     or {}).get("batch", -1) > since + 2, timeout=600, operator=operator)
    latest = latest_checkpoint(store, ref)
    assert latest.batch_id > since and state_partitions(latest) == {0, 1}, (latest.id, state_partitions(latest))

    done = TOTAL + WINDOW + WATERMARK + 3
    jobs.wait_status("refused", f"a checkpoint past batch {done}",
                     lambda s: (s.get("latestCheckpoint") or {}).get("batch", -1) >= done, timeout=1500,
                     operator=operator)
    want = WindowedJob(rows_per_batch=ROWS, keys=KEYS, total_batches=TOTAL, window_seconds=WINDOW,
                       watermark_seconds=WATERMARK).expected_rows()
    got = canonical(read_committed(store, ref))
    assert got == want, (f"missing {sum((want - got).values())}, extra {sum((got - want).values())} "
                         f"of {sum(want.values())} rows")
    print(f"\nrescale refused and rolled back: attempts {attempt} -> {st['attempt']}, restored "
          f"{st['restore']['checkpoint']}; {failure}", flush=True)
