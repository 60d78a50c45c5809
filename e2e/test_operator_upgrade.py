"""Upgrades: a spec change drains with a savepoint the new attempt restores (upgradeMode
savepoint); a new attempt that is not Ready in time rolls back to the last stable spec."""

from __future__ import annotations

import pytest
from operator_jobs import Jobs
from test_operator_recovery import _number


def running(jobs: Jobs, name: str, operator) -> dict:
    return jobs.wait_status(name, "Running with a checkpoint",
                            lambda s: s.get("phase") == "Running" and s.get("latestCheckpoint"), operator=operator)


@pytest.mark.slow
@pytest.mark.timeout(1800)
def test_upgrade_with_savepoint_then_a_broken_upgrade_rolls_back(api_client, namespace, operator, store_env):
    # Long enough for a healthy attempt's Spark start on a loaded 2-core machine (60 s was not:
    # the good upgrade was rolled back); the broken one waits this long before its rollback.
    operator.set_upgrade_timeout("240s")
    jobs = Jobs(api_client, namespace, store_env)
    jobs.create("clicks")
    running(jobs, "clicks", operator)
    jobs.patch_spec("clicks", {"job": {"args": {"rows_per_batch": 300, "keys": 20}}})
    generation = jobs.get("clicks")["metadata"]["generation"]
    st = jobs.wait_status("clicks", "attempt 2 Running", lambda s: s.get("phase") == "Running" and s.get("attempt") == 2
                          and s.get("restore"), timeout=600, operator=operator)
    assert st["restore"]["checkpoint"] == f"upgrade-{generation}" and st["restarts"] == 0
    cm = jobs.core.read_namespaced_config_map("clicks-job", namespace)
    assert '"rows_per_batch": 300' in cm.data["job.json"]

    # An upgrade that never gets Ready (its entrypoint does not exist) is rolled back.
    jobs.patch_spec("clicks", {"job": {"entrypoint": "windowed_aggregation:no_such_function"}})
    broken = jobs.get("clicks")["metadata"]["generation"]
    st = jobs.wait_status("clicks", "rolled back and Running on the old spec",
                          lambda s: s.get("phase") == "Running" and s.get("attempt", 0) >= 4, timeout=900,
                          operator=operator)
    # Not Ready in time, or (sooner) restarted past maxRestarts before it was ever Ready.
    assert st["lastFailure"]["reason"] in ("UpgradeTimeout", "UpgradeFailed"), st["lastFailure"]
    assert st["restore"]["checkpoint"] == f"upgrade-{broken}"
    cm = jobs.core.read_namespaced_config_map("clicks-job", namespace)
    assert "no_such_function" not in cm.data["job.json"]
    events = {e.reason for e in jobs.core.list_namespaced_event(namespace).items}
    assert "UpgradeRolledBack" in events


@pytest.mark.slow
@pytest.mark.timeout(1500)
def test_upgrade_modes_last_checkpoint_then_stateless(api_client, namespace, operator, store_env):
    jobs = Jobs(api_client, namespace, store_env)
    jobs.create("clicks", upgradeMode="last-checkpoint")
    before = running(jobs, "clicks", operator)["latestCheckpoint"]["id"]

    # last-checkpoint: the old attempt drains with a final checkpoint, the new one restores it.
    jobs.patch_spec("clicks", {"job": {"args": {"rows_per_batch": 300, "keys": 20}}})
    st = jobs.wait_status("clicks", "attempt 2 Running, restored", lambda s: s.get("phase") == "Running"
                          and s.get("attempt") == 2 and s.get("restore"), timeout=300, operator=operator)
    restored = st["restore"]
    assert restored["source"] == "remote" and restored["checkpoint"].startswith("chk-"), restored
    assert _number(restored["checkpoint"]) >= _number(before), (restored, before)
    assert st.get("restarts", 0) == 0

    # stateless: the pod goes at once and the new attempt starts without state.
    jobs.patch_spec("clicks", {"upgradeMode": "stateless", "job": {"args": {"rows_per_batch": 200, "keys": 20}}})
    st = jobs.wait_status("clicks", "attempt 3 Running, fresh", lambda s: s.get("phase") == "Running"
                          and s.get("attempt") == 3 and s.get("restore"), timeout=300, operator=operator)
    assert st["restore"]["source"] == "fresh" and st["restore"].get("checkpoint") is None, st["restore"]
    last = (st.get("latestCheckpoint") or {}).get("id")
    jobs.wait_status("clicks", "a checkpoint of the fresh attempt", lambda s: (s.get("latestCheckpoint") or {})
                     .get("id") not in (None, last), timeout=240, operator=operator)
    cm = jobs.core.read_namespaced_config_map("clicks-job", namespace)
    assert '"rows_per_batch": 200' in cm.data["job.json"]
