"""`kubectl sparkpoint rescale JOB --executors N`, then `--partitions N`, on the local cluster (issue 26):
a stateful job with one executor (spark.master k8s, a hostPath hot volume) is rescaled to two while
its input flows. The edit is an upgrade (drain with a savepoint, a new attempt restores it): the new
attempt's driver runs two executor pods, checkpoints go on past the point of the rescale, and the
state partitions stay as they were (executors are not partitions: nothing is repartitioned). Then its
state goes from 2 to 4 partitions: Spark's repartition runs as tasks on the two executors, which
write the new partitions into the shared hot volume, and the checkpoint at once holds partitions
0-3. The committed output equals the failure-free run's, every row exactly once."""

from __future__ import annotations

import time

import pytest
from kube_helpers import wait_for
from operator_jobs import BUCKET, Jobs, state_partitions
from test_kubectl_plugin import plugin
from test_operator_executors import (
    _driver_account_for_a_process_operator,
    _executors,
    _image,
    _running,
    remove_hot_dir,
    shared_hot_dir,
)

from harness.runtime_job import WindowedJob, canonical
from sparkpoint.runtime.checkpoint.catalog import latest_checkpoint
from sparkpoint.runtime.sink.transactional import read_committed
from sparkpoint.runtime.store import JobRef, open_store

ROWS, KEYS, WINDOW, WATERMARK, TOTAL = 100, 40, 5, 2, 60
BEFORE = 6  # committed batches before the rescale


@pytest.mark.slow
@pytest.mark.timeout(3600)
def test_rescale_executors_1_to_2_then_partitions_2_to_4_keeps_output_exactly_once(api_client, core, namespace, operator,
                                                                           store_env):
    _driver_account_for_a_process_operator(api_client, namespace, operator)
    operator.set_upgrade_timeout("400s")  # a driver and its executors starting on a loaded 2-core machine
    hot = shared_hot_dir(namespace)
    jobs = Jobs(api_client, namespace, store_env)
    try:
        t0 = time.monotonic()
        jobs.create("scaled", image=_image(), **{
            "spark.master": "k8s", "spark.shufflePartitions": 2,
            "spark.executors": {"instances": 1, "cores": 1, "memory": "512Mi"},
            "spark.conf": {"spark.kubernetes.executor.request.cores": "100m"},
            "checkpoint.hotVolume": {"hostPath": {"path": str(hot)}},
            "job.args": {"rows_per_batch": ROWS, "keys": KEYS, "total_batches": TOTAL,
                         "window": f"{WINDOW} seconds", "watermark": f"{WATERMARK} seconds"}})
        st = jobs.wait_status("scaled", f"{BEFORE} batches checkpointed with one executor", lambda s: s.get(
            "phase") == "Running" and (s.get("latestCheckpoint") or {}).get("batch", -1) >= BEFORE, timeout=900,
            operator=operator)
        attempt, before = st["attempt"], st["latestCheckpoint"]["batch"]
        assert len(_running(_executors(core, namespace, attempt=attempt))) == 1

        out = plugin("-n", namespace, "rescale", "scaled", "--executors", "2")
        assert "executors.instances = 2" in out.stdout, out.stdout
        t1 = time.monotonic()
        st = jobs.wait_status("scaled", "a new attempt Running with a newer checkpoint", lambda s: s.get(
            "phase") == "Running" and s.get("attempt", 0) > attempt and (s.get("latestCheckpoint") or {}).get(
            "batch", -1) > before, timeout=900, operator=operator)
        rescaled_s = time.monotonic() - t1
        assert st["restore"]["checkpoint"].startswith("upgrade-"), st["restore"]  # the drain's savepoint
        assert st.get("lastFailure") is None or st["lastFailure"]["reason"] not in (
            "RescaleFailed", "UpgradeFailed", "UpgradeTimeout"), st["lastFailure"]
        assert st.get("lastRescale") is None, st["lastRescale"]  # executors changed, partitions did not
        new = st["attempt"]
        # At least two: under a loaded API server Spark's pod creation can time out after the pod was
        # made, and its retry then runs one more than asked (seen here: 3 for instances 2).
        wait_for("two executors of the new attempt running", lambda: len(
            _running(_executors(core, namespace, attempt=new))) >= 2, timeout=300, interval=1.0)
        running = len(_running(_executors(core, namespace, attempt=new)))
        wait_for("the old attempt's executor gone", lambda: not _executors(core, namespace, attempt=attempt),
                 timeout=180, interval=1.0)
        spec = jobs.get("scaled")["spec"]["spark"]["executors"]
        assert spec["instances"] == 2, spec
        store, ref = open_store(f"s3://{BUCKET}/{namespace}", env=store_env), JobRef(namespace, "scaled")
        assert state_partitions(latest_checkpoint(store, ref)) == {0, 1}

        # The state's partitions, repartitioned by Spark's tasks on the two executors.
        since = st["latestCheckpoint"]["batch"]
        jobs.wait_status("scaled", "batches past the executors' rescale", lambda s: (
            s.get("latestCheckpoint") or {}).get("batch", -1) >= since + 4, timeout=900, operator=operator)
        out = plugin("-n", namespace, "rescale", "scaled", "--partitions", "4")
        assert "shufflePartitions = 4" in out.stdout, out.stdout
        st = jobs.wait_status("scaled", "rescaled to 4 partitions and Running", lambda s: s.get(
            "phase") == "Running" and (s.get("lastRescale") or {}).get("to") == 4 and s.get("attempt", 0) > new,
            timeout=900, operator=operator)
        assert (st["lastRescale"]["from"], st["lastRescale"]["to"]) == (2, 4), st["lastRescale"]
        partitioned = st["attempt"]
        wait_for("executors of the repartitioned attempt running", lambda: len(
            _running(_executors(core, namespace, attempt=partitioned))) >= 2, timeout=300, interval=1.0)
        # the checkpoint taken at once after the repartition (the status may say Running before it lands)
        wait_for("a checkpoint of 4 state partitions", lambda: state_partitions(
            latest_checkpoint(store, ref)) == {0, 1, 2, 3}, timeout=300, interval=2.0)

        done = TOTAL + WINDOW + WATERMARK + 3
        jobs.wait_status("scaled", f"a checkpoint past batch {done}",
                         lambda s: (s.get("latestCheckpoint") or {}).get("batch", -1) >= done, timeout=1500,
                         operator=operator)
        assert jobs.status("scaled")["attempt"] == partitioned  # no restart after the rescales
        want = WindowedJob(rows_per_batch=ROWS, keys=KEYS, total_batches=TOTAL, window_seconds=WINDOW,
                           watermark_seconds=WATERMARK).expected_rows()
        got = canonical(read_committed(store, ref))
        assert got == want, (f"missing {sum((want - got).values())}, extra {sum((got - want).values())} "
                             f"of {sum(want.values())} rows")
        print(f"\nexecutors 1 -> 2 ({running} running): rescaled at batch {before}, new attempt {new} checkpointing after "
              f"{rescaled_s:.0f}s; partitions 2 -> 4 in {st['lastRescale'].get('durationSeconds')}s (attempt "
              f"{partitioned}); {time.monotonic() - t0:.0f}s in all ({_image()})", flush=True)
    finally:
        remove_hot_dir(jobs, hot)
