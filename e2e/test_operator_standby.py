"""kopf peering: a standby operator replica takes over when the active one dies; the job keeps
checkpointing through the standby, and no second pod appears."""

from __future__ import annotations

import re
import time

import pytest
from kube_helpers import OperatorProcess, wait_for
from operator_jobs import Jobs
from test_operator_recovery import _number


def triggers(op: OperatorProcess, result: str = "completed") -> float:
    """The replica's checkpoint triggers with this result (0 when it has made none)."""
    text = op.get("/metrics") or ""
    m = re.search(rf'^sparkpoint_operator_checkpoint_triggers_total{{result="{result}"}} (\S+)$', text, re.M)
    return float(m.group(1)) if m else 0.0


@pytest.mark.slow
def test_standby_takes_over_when_the_active_operator_is_killed(api_client, namespace, operator_process, store_env):
    operator = operator_process  # two host processes with chosen priorities
    operator.stop()
    operator.extra_args = ["--priority", "100"]  # the active replica
    operator.start()
    standby = OperatorProcess(namespace, operator.log_path.with_name(f"{namespace}-standby.log"))
    standby.extra_args = ["--priority", "10"]
    standby.start()
    try:
        jobs = Jobs(api_client, namespace, store_env)
        jobs.create("clicks")
        jobs.wait_status("clicks", "Running with a checkpoint",
                         lambda s: s.get("phase") == "Running" and s.get("latestCheckpoint"), timeout=300,
                         operator=operator)
        wait_for("the active replica's completed triggers", lambda: triggers(operator) >= 1, timeout=60)
        assert triggers(standby) == 0 and triggers(standby, "error") == 0, "the standby acted while the active ran"

        operator.kill()
        killed = time.monotonic()
        before = jobs.status("clicks")["latestCheckpoint"]["id"]
        pods_seen: set[str] = set()
        most_live = 0

        def standby_checkpointing() -> bool:
            nonlocal most_live
            live = [p.metadata.name for p in jobs.pods("clicks") if p.metadata.deletion_timestamp is None]
            pods_seen.update(live)
            most_live = max(most_live, len(live))
            latest = jobs.status("clicks").get("latestCheckpoint") or {}
            return triggers(standby) >= 2 and _number(latest.get("id", "chk-0")) > _number(before)

        try:
            wait_for("the standby triggering checkpoints", standby_checkpointing, timeout=240, interval=1.0)
        except AssertionError as error:
            raise AssertionError(f"{error}\n--- standby log\n{standby.log()}") from None
        print(f"standby took over within {time.monotonic() - killed:.0f}s")
        assert pods_seen == {"clicks-1"} and most_live == 1, f"pods during the takeover: {pods_seen}"
        st = jobs.status("clicks")
        assert st["phase"] == "Running" and st["attempt"] == 1 and st.get("restarts", 0) == 0
    finally:
        standby.stop()  # the fixture restarts the active replica to run the finalizer
