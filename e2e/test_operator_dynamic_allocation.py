"""spark.executors.dynamic on the local cluster (issue 26): Spark's dynamic allocation with shuffle
tracking adds executor pods while a batch's tasks wait (a backlog) and releases them once they ran
no task for idleTimeout, between min and max, while the job keeps checkpointing.

A batch every 20 s: each batch's 6 state tasks back up on the one executor kept (min 1), so Spark
asks for more (up to max 3); between batches the executors idle past the 5 s idleTimeout and are
released down to min. An executor that still holds an old batch's shuffle files goes after
`spark.dynamicAllocation.shuffleTracking.timeout`, which the runtime sets to idleTimeout unless the
spec's spark.conf sets it (without it, Spark keeps such an executor until the driver's garbage
collection lets its cleaner drop the files: over 5 minutes on an idle real node). The test runs
both ways: the timeout set in spark.conf (5 s) and the runtime's default.
"""

from __future__ import annotations

import time

import pytest
from kube_helpers import wait_for
from operator_jobs import Jobs
from test_operator_executors import (
    _driver_account_for_a_process_operator,
    _image,
    _running,
    remove_hot_dir,
    shared_hot_dir,
)

JOB = "elastic"


def _executors(core, namespace: str) -> list:
    return _running(core.list_namespaced_pod(
        namespace, label_selector=f"sparkpoint.dev/job={JOB},spark-role=executor").items)


@pytest.mark.slow
@pytest.mark.timeout(1500)
@pytest.mark.parametrize("shuffle_timeout", ["5s", None], ids=["shuffle-timeout-5s", "no-shuffle-timeout"])
def test_executors_are_added_under_a_backlog_and_released_when_idle(api_client, core, namespace, operator,
                                                                   store_env, shuffle_timeout):
    _driver_account_for_a_process_operator(api_client, namespace, operator)
    hot = shared_hot_dir(namespace)
    image = _image()
    jobs = Jobs(api_client, namespace, store_env)
    seen: list[tuple[float, int]] = []  # (seconds since create, running executors)

    def count() -> int:
        n = len(_executors(core, namespace))
        seen.append((round(time.monotonic() - t0, 1), n))
        assert n <= 3, f"more executors than dynamic.max: {seen[-5:]}"
        return n

    try:
        t0 = time.monotonic()
        jobs.create(JOB, image=image, **{
            "job.triggerInterval": "20s", "job.args": {"rows_per_batch": 20000, "keys": 200},
            "spark.master": "k8s", "spark.shufflePartitions": 6,
            "spark.executors": {"dynamic": {"min": 1, "max": 3, "idleTimeout": "5s"}, "cores": 1, "memory": "512Mi"},
            "spark.conf": {"spark.kubernetes.executor.request.cores": "100m",  # two cores for everything
                           # (whole seconds: Spark reads both in seconds and refuses 0)
                           "spark.dynamicAllocation.schedulerBacklogTimeout": "1s",
                           "spark.dynamicAllocation.sustainedSchedulerBacklogTimeout": "1s",
                           **({"spark.dynamicAllocation.shuffleTracking.timeout": shuffle_timeout}
                              if shuffle_timeout else {})},
            "checkpoint.hotVolume": {"hostPath": {"path": str(hot)}}})
        st = jobs.wait_status(JOB, "Running with a checkpoint", lambda s: s.get("phase") == "Running"
                              and s.get("latestCheckpoint"), timeout=480, operator=operator)
        wait_for("executors added under a backlog (more than min)", lambda: count() > 1, timeout=300, interval=0.5)
        added_at = seen[-1][0]
        wait_for("executors released when idle (back to min)", lambda: count() == 1, timeout=300, interval=0.5)
        released_at = seen[-1][0]
        before = jobs.status(JOB)["latestCheckpoint"]["batch"]
        wait_for("executors added again for a later batch", lambda: count() > 1, timeout=300, interval=0.5)
        st = jobs.wait_status(JOB, "checkpoints go on after executors came and went", lambda s: s.get("phase")
                              == "Running" and s["latestCheckpoint"]["batch"] > before, timeout=240, operator=operator)
        assert st["attempt"] == 1 and st.get("restarts", 0) == 0, st
        peak = max(n for _, n in seen)
        print(f"\ndynamic allocation (shuffleTracking.timeout {shuffle_timeout or 'unset'}): executors "
              f"{seen[0][1]} -> {peak} (first above min at "
              f"{added_at}s), back to 1 at {released_at}s, checkpoints to batch {st['latestCheckpoint']['batch']} "
              f"({image})")
    finally:
        remove_hot_dir(jobs, hot)
