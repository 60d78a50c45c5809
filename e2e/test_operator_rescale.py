"""Rescaling state through the operator (issue 26): a stateful job running at 4 shuffle partitions
is rescaled with `kubectl sparkpoint rescale --partitions` to 2, then to 6, while its input flows.
Each edit is an upgrade (drain with a savepoint, a new attempt restores it, Spark repartitions the
state before the query starts); status.lastRescale and a Rescaled Event say so, and the committed
output equals the failure-free run's, every row exactly once."""

from __future__ import annotations

import pytest
from operator_jobs import BUCKET, Jobs
from test_kubectl_plugin import plugin

from harness.runtime_job import WindowedJob, canonical
from sparkpoint.runtime.sink.transactional import read_committed
from sparkpoint.runtime.store import JobRef, open_store

# Per batch; seconds (= batches); input batches (two upgrades take minutes on a loaded 2-core machine,
# where a batch took ~5 s: the rescales happen while input flows, the rest drains after them).
ROWS, KEYS, WINDOW, WATERMARK, TOTAL = 100, 40, 5, 2, 120
RESCALE_AFTER = 15  # batches between rescales (state in all 40 keys' windows, output on both sides)


def _rescaled_to(partitions: int, attempt_after: int):
    def check(s: dict) -> bool:
        last = s.get("lastRescale") or {}
        return s.get("phase") == "Running" and last.get("to") == partitions and last.get("attempt", 0) > attempt_after
    return check


@pytest.mark.slow
@pytest.mark.timeout(3000)
def test_rescale_4_to_2_to_6_while_running_keeps_output_exactly_once(api_client, namespace, operator, store_env):
    operator.set_upgrade_timeout("300s")  # a Spark start plus the repartition on a loaded 2-core machine
    jobs = Jobs(api_client, namespace, store_env)
    jobs.create("rescaled", **{"spark.shufflePartitions": 4, "job.args": {
        "rows_per_batch": ROWS, "keys": KEYS, "total_batches": TOTAL, "window": f"{WINDOW} seconds",
        "watermark": f"{WATERMARK} seconds"}})
    st = jobs.wait_status("rescaled", "Running with a checkpoint", lambda s: s.get("phase") == "Running"
                          and s.get("latestCheckpoint"), timeout=300, operator=operator)

    for before, partitions in ((4, 2), (2, 6)):
        # Each rescale carries real state and splits the output: at least RESCALE_AFTER batches
        # committed since the previous point (the first draft rescaled at batches 2 and 3).
        since = (st.get("latestCheckpoint") or {}).get("batch", 0)
        st = jobs.wait_status("rescaled", f"{RESCALE_AFTER} batches past batch {since}",
                              lambda s, b=since: (s.get("latestCheckpoint") or {}).get("batch", -1) >= b + RESCALE_AFTER,
                              timeout=600, operator=operator)
        attempt = st["attempt"]
        out = plugin("-n", namespace, "rescale", "rescaled", "--partitions", str(partitions))
        assert f"shufflePartitions = {partitions}" in out.stdout
        st = jobs.wait_status("rescaled", f"rescaled to {partitions} and Running", _rescaled_to(partitions, attempt),
                              timeout=600, operator=operator)
        last = st["lastRescale"]
        assert (last["from"], last["to"]) == (before, partitions) and last["durationSeconds"] > 0, last
        assert st["restore"]["checkpoint"].startswith("upgrade-"), st["restore"]  # upgradeMode savepoint's point
        print(f"rescaled {before} -> {partitions} at batch {last.get('batch')} in {last['durationSeconds']} s "
              f"(attempt {last['attempt']})", flush=True)
    events = [(e.reason, e.message) for e in jobs.core.list_namespaced_event(
        namespace, field_selector="involvedObject.name=rescaled").items]
    assert [m for r, m in events if r == "Rescaled" and "from 4 to 2" in m], events
    assert [m for r, m in events if r == "Rescaled" and "from 2 to 6" in m], events

    done = TOTAL + WINDOW + WATERMARK + 3
    jobs.wait_status("rescaled", f"a checkpoint past batch {done}",
                     lambda s: (s.get("latestCheckpoint") or {}).get("batch", -1) >= done, timeout=1500,
                     operator=operator)
    rows = read_committed(open_store(f"s3://{BUCKET}/{namespace}", env=store_env), JobRef(namespace, "rescaled"))
    want = WindowedJob(rows_per_batch=ROWS, keys=KEYS, total_batches=TOTAL, window_seconds=WINDOW,
                       watermark_seconds=WATERMARK).expected_rows()
    got = canonical(rows)
    assert got == want, (f"missing {sum((want - got).values())}, extra {sum((got - want).values())} "
                         f"of {sum(want.values())} rows")
