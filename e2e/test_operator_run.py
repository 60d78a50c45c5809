"""The operator runs a StreamingJob: Running, checkpoints in status, `kubectl wait` on Ready."""

from __future__ import annotations

import os
import subprocess

from kube_helpers import wait_for
from operator_jobs import Jobs, condition


def test_job_runs_and_checkpoints_appear_in_status(api_client, namespace, operator, store_env):
    jobs = Jobs(api_client, namespace, store_env)
    jobs.create("clicks")
    st = jobs.wait_status("clicks", "Running", lambda s: s.get("phase") == "Running", operator=operator)
    assert st["attempt"] == 1 and st["pod"] == "clicks-1"
    wait = subprocess.run(["kubectl", "wait", "--for=condition=Ready", "streamingjob/clicks", "-n", namespace,
                           "--timeout=60s"], capture_output=True, text=True, env=dict(os.environ), timeout=90)
    assert wait.returncode == 0, wait.stderr
    st = jobs.wait_status("clicks", "two checkpoints in status, CheckpointHealthy",
                          lambda s: len(s.get("checkpoints") or []) >= 2 and condition(s, "CheckpointHealthy") == "True",
                          timeout=180, operator=operator)
    latest = st["latestCheckpoint"]
    assert latest["id"].startswith("chk-") and latest["batch"] is not None and latest["bytes"] > 0
    assert latest["id"] == st["checkpoints"][-1]["id"]
    assert condition(st, "CheckpointHealthy") == "True" and condition(st, "Degraded") == "False"
    assert st["observedGeneration"] == 1 and st.get("restarts", 0) == 0
    assert 'sparkpoint_operator_jobs{phase="Running"} 1.0' in operator.get("/metrics")
    wait_for("a trigger of the operator completed", lambda: 'sparkpoint_operator_checkpoint_triggers_total'
             '{result="completed"}' in operator.get("/metrics"), timeout=90)
    printed = subprocess.run(["kubectl", "get", "sj", "clicks", "-n", namespace], capture_output=True, text=True,
                             timeout=30).stdout
    assert "Running" in printed and latest["id"][:4] in printed
