"""The operator may be killed at any moment: on restart it continues from CR status and the
store, with no duplicate pods and no lost checkpoint records."""

from __future__ import annotations

import re

import pytest
from kube_helpers import exists, wait_for
from operator_jobs import BUCKET, Jobs

from sparkpoint.runtime.checkpoint.catalog import list_checkpoint_ids
from sparkpoint.runtime.store import JobRef, open_store


def _number(cid: str) -> int:
    return int(cid.rsplit("-", 1)[1])


def _triggers_made(operator) -> int | None:
    """Checkpoint triggers the operator has made (its trigger-lag histogram counts one per trigger).
    A trigger's bookkeeping is written to status only with its completion, so status cannot show
    one in flight; the metric can."""
    found = re.search(r"^sparkpoint_operator_checkpoint_trigger_lag_seconds_count (\S+)$",
                      operator.get("/metrics") or "", re.M)
    return int(float(found.group(1))) if found else None


@pytest.mark.slow
def test_operator_killed_mid_checkpoint_resumes_without_duplicates_or_lost_records(api_client, namespace, operator,
                                                                                  store_env):
    jobs = Jobs(api_client, namespace, store_env)
    jobs.create("clicks")
    jobs.wait_status("clicks", "Running with a checkpoint",
                     lambda s: s.get("phase") == "Running" and s.get("latestCheckpoint"), operator=operator)
    made = wait_for("the operator's trigger count", lambda: _triggers_made(operator), timeout=60)
    wait_for("a new trigger (a checkpoint in flight)", lambda: (_triggers_made(operator) or 0) > made,
             timeout=60, interval=0.2)
    operator.kill()
    st = jobs.get("clicks")["status"]
    at_kill = _number(st["latestCheckpoint"]["id"])
    store = open_store(f"s3://{BUCKET}/{namespace}", env=store_env)
    job = JobRef(namespace, "clicks")
    # Without triggers the runtime checkpoints on its own timer (after two intervals).
    newer = wait_for("checkpoints while the operator is down",
                     lambda: [c for c in list_checkpoint_ids(store, job) if _number(c) > at_kill + 1], timeout=120)
    operator.start()
    st = jobs.wait_status("clicks", "status has every checkpoint taken while the operator was down",
                          lambda s: {c["id"] for c in s.get("checkpoints") or []} >= set(newer), timeout=60,
                          operator=operator)
    assert st["phase"] == "Running" and st["attempt"] == 1 and st["restarts"] == 0
    assert [p.metadata.name for p in jobs.pods("clicks")] == ["clicks-1"]
    # Triggering resumes: a checkpoint newer than any taken while the operator was down.
    jobs.wait_status("clicks", "a trigger completes after the restart",
                     lambda s: _number(s["latestCheckpoint"]["id"]) > max(map(_number, newer)), timeout=120,
                     operator=operator)
    wait_for("a trigger of the restarted operator completed", lambda: 'sparkpoint_operator_checkpoint_triggers_total'
             '{result="completed"}' in (operator.get("/metrics") or ""), timeout=120)
    assert [p.metadata.name for p in jobs.pods("clicks")] == ["clicks-1"]


@pytest.mark.slow
@pytest.mark.ci_sample
def test_operator_killed_mid_restart_starts_exactly_one_new_attempt(api_client, namespace, operator, store_env):
    jobs = Jobs(api_client, namespace, store_env)
    jobs.create("clicks")
    jobs.wait_status("clicks", "Running", lambda s: s.get("phase") == "Running", operator=operator)
    jobs.core.delete_namespaced_pod("clicks-1", namespace)
    jobs.wait_status("clicks", "Recovering", lambda s: s.get("phase") in ("Recovering", "Pending")
                     and s.get("attempt", 1) >= 1, timeout=60, operator=operator)
    operator.kill()
    # While the operator is down, the deleted pod finishes draining and goes: the restarted
    # operator must start attempt 2 from status alone.
    wait_for("the deleted pod gone while the operator is down",
             lambda: not exists(lambda: jobs.core.read_namespaced_pod("clicks-1", namespace)), timeout=120)
    operator.start()
    st = jobs.wait_status("clicks", "attempt 2 Running", lambda s: s.get("phase") == "Running"
                          and s.get("attempt") == 2, timeout=300, operator=operator)
    assert st["restarts"] == 1
    assert [p.metadata.name for p in jobs.pods("clicks")] == ["clicks-2"]
