"""Upgrades: a spec change drains with a savepoint the new attempt restores (upgradeMode
savepoint); a new attempt that is not Ready in time rolls back to the last stable spec."""

from __future__ import annotations

import pytest
from operator_jobs import Jobs


def running(jobs: Jobs, name: str, operator) -> dict:
    return jobs.wait_status(name, "Running with a checkpoint",
                            lambda s: s.get("phase") == "Running" and s.get("latestCheckpoint"), operator=operator)


@pytest.mark.slow
def test_upgrade_with_savepoint_then_a_broken_upgrade_rolls_back(api_client, namespace, operator, store_env):
    operator.stop()
    operator.extra_args = ["--upgrade-timeout", "60s"]
    operator.start()
    jobs = Jobs(api_client, namespace, store_env)
    jobs.create("clicks")
    running(jobs, "clicks", operator)
    jobs.patch_spec("clicks", {"job": {"args": {"rows_per_batch": 300, "keys": 20}}})
    generation = jobs.get("clicks")["metadata"]["generation"]
    st = jobs.wait_status("clicks", "attempt 2 Running", lambda s: s.get("phase") == "Running" and s.get("attempt") == 2
                          and s.get("restore"), timeout=300, operator=operator)
    assert st["restore"]["checkpoint"] == f"upgrade-{generation}" and st["restarts"] == 0
    cm = jobs.core.read_namespaced_config_map("clicks-job", namespace)
    assert '"rows_per_batch": 300' in cm.data["job.json"]

    # An upgrade that never gets Ready (its entrypoint does not exist) is rolled back.
    jobs.patch_spec("clicks", {"job": {"entrypoint": "windowed_aggregation:no_such_function"}})
    broken = jobs.get("clicks")["metadata"]["generation"]
    st = jobs.wait_status("clicks", "rolled back and Running on the old spec",
                          lambda s: s.get("phase") == "Running" and s.get("attempt", 0) >= 4, timeout=420,
                          operator=operator)
    assert st["lastFailure"]["reason"] == "UpgradeTimeout"
    assert st["restore"]["checkpoint"] == f"upgrade-{broken}"
    cm = jobs.core.read_namespaced_config_map("clicks-job", namespace)
    assert "no_such_function" not in cm.data["job.json"]
    events = {e.reason for e in jobs.core.list_namespaced_event(namespace).items}
    assert "UpgradeRolledBack" in events
