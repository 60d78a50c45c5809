"""A rescale Spark refuses, on the local cluster (issue 26). A job keeps its state in the HDFS state store
(`spark.stateStore: hdfs`), which Spark's StreamingCheckpointManager.repartition does not support:

- `kubectl sparkpoint rescale --partitions` of it is refused by the API server (the CRD's transition
  rule, runtime/spec/changes.py), naming the field and what to do; the job runs on, untouched;
- the one way left to reach Spark with it, a job created again under the name at another partition
  count that resumes the earlier job's checkpoints (gc.onDelete retain), makes its first attempt exit
  4 for real (Spark's own refusal, nothing injected): Failed at once with RescaleFailed naming from and
  to, not a crash loop; created again at the state's count, it resumes with 2 state partitions."""

from __future__ import annotations

import pytest
from operator_jobs import BUCKET, Jobs, state_partitions
from test_kubectl_plugin import plugin

from sparkpoint.runtime.checkpoint.catalog import latest_checkpoint
from sparkpoint.runtime.spec import HDFS_PARTITIONS_MESSAGE
from sparkpoint.runtime.store import JobRef, open_store

ROWS, KEYS, WINDOW, WATERMARK, TOTAL = 100, 40, 5, 2, 30
BEFORE = 8  # committed batches before the rescale: state in every key's window
ARGS = {"rows_per_batch": ROWS, "keys": KEYS, "total_batches": TOTAL, "window": f"{WINDOW} seconds",
        "watermark": f"{WATERMARK} seconds"}


@pytest.mark.slow
@pytest.mark.timeout(2400)
def test_a_rescale_spark_refuses_is_refused_at_admission_or_fails_at_once(api_client, namespace, operator,
                                                                          store_env):
    operator.set_upgrade_timeout("300s")  # a Spark start on a loaded 2-core machine
    jobs = Jobs(api_client, namespace, store_env)
    store, ref = open_store(f"s3://{BUCKET}/{namespace}", env=store_env), JobRef(namespace, "refused")
    hdfs = {"spark.stateStore": "hdfs", "job.args": ARGS}
    jobs.create("refused", **{"spark.shufflePartitions": 2, **hdfs})
    st = jobs.wait_status("refused", f"{BEFORE} batches checkpointed", lambda s: s.get("phase") == "Running"
                          and (s.get("latestCheckpoint") or {}).get("batch", -1) >= BEFORE, timeout=600,
                          operator=operator)
    attempt, generation = st["attempt"], jobs.get("refused")["metadata"]["generation"]
    assert state_partitions(latest_checkpoint(store, ref)) == {0, 1}

    out = plugin("-n", namespace, "rescale", "refused", "--partitions", "4", check=False)
    assert out.returncode != 0, out.stdout
    said = out.stdout + out.stderr
    assert "spec.spark.shufflePartitions" in said and HDFS_PARTITIONS_MESSAGE.split(":")[0] in said, said
    assert jobs.get("refused")["metadata"]["generation"] == generation
    st = jobs.status("refused")
    assert st["phase"] == "Running" and st["attempt"] == attempt, st

    # Spark's own refusal: the same name again at 4 partitions resumes the earlier job's checkpoints.
    jobs.delete("refused")
    jobs.create("refused", **{"spark.shufflePartitions": 4, **hdfs})
    st = jobs.wait_status("refused", "Failed with RescaleFailed", lambda s: s.get("phase") == "Failed",
                          timeout=900, operator=operator)
    failure = st["lastFailure"]
    assert failure["reason"] == "RescaleFailed" and "from 2 to 4 partitions" in failure["message"], failure
    assert st.get("restarts") == 1, st  # once, not a crash loop through maxRestarts
    events = [(e.type, e.reason, e.message) for e in jobs.core.list_namespaced_event(
        namespace, field_selector="involvedObject.name=refused").items]
    refused = [m for t, r, m in events if (t, r) == ("Warning", "RescaleFailed")]
    assert refused and ("unsupported" in refused[0].lower() or "invalid-checkpoint" in refused[0]), events

    # At the state's own count it resumes (the CRD refuses editing the count back: re-created instead).
    since = latest_checkpoint(store, ref).batch_id
    jobs.delete("refused")
    jobs.create("refused", **{"spark.shufflePartitions": 2, **hdfs})
    jobs.wait_status("refused", "checkpoints past the earlier job's", lambda s: s.get("phase") == "Running" and (
        s.get("latestCheckpoint") or {}).get("batch", -1) > since + 2, timeout=900, operator=operator)
    latest = latest_checkpoint(store, ref)
    assert state_partitions(latest) == {0, 1}, (latest.id, state_partitions(latest))
    print(f"\nrescale refused at admission; re-created at 4 partitions: {failure['message']}", flush=True)
