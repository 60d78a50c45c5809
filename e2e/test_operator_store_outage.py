"""MinIO stopped for a minute: CheckpointHealthy turns False (with an Event and the metric), the
job keeps running, and checkpoints (and the condition) recover when MinIO is back.

Local cluster only: it stops the cluster's own MinIO process and starts it again with
`cluster.py up` (idempotent: it starts only what is not running, on the same port)."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time

import pytest
from kube_helpers import REPO, STATE_DIR, wait_for
from operator_jobs import Jobs, condition

STATE = STATE_DIR


def minio_pid() -> int:
    return int((STATE / "pids" / "minio.pid").read_text().split()[0])


@pytest.mark.slow
def test_store_outage_turns_checkpoints_unhealthy_then_recovers(api_client, namespace, operator, store_env):
    jobs = Jobs(api_client, namespace, store_env)
    # Console sink: output does not go to the store, so the query keeps running through the outage
    # (a transactional sink stops the query when it cannot publish; that path is a restart, not this).
    jobs.create("clicks", **{"job.sink": {"kind": "console"}, "restart.maxRestarts": 20})
    st = jobs.wait_status("clicks", "Running, checkpoints healthy",
                          lambda s: s.get("phase") == "Running" and s.get("latestCheckpoint")
                          and condition(s, "CheckpointHealthy") == "True", operator=operator)
    os.kill(minio_pid(), signal.SIGKILL)
    down_at = time.monotonic()
    try:
        st = jobs.wait_status("clicks", "CheckpointHealthy=False", lambda s: condition(s, "CheckpointHealthy") == "False",
                              timeout=120, operator=operator)
        unhealthy = next(c for c in st["conditions"] if c["type"] == "CheckpointHealthy")
        assert unhealthy["reason"] == "NoRecentCheckpoint"
        assert condition(st, "Degraded") == "True" and st["phase"] == "Running"
        series = f'sparkpoint_operator_checkpoint_unhealthy{{job="clicks",namespace="{namespace}"}} 1.0'
        assert series in operator.get("/metrics")
        events = jobs.core.list_namespaced_event(namespace, field_selector="involvedObject.name=clicks").items
        assert "CheckpointUnhealthy" in {e.reason for e in events}
        time.sleep(max(0.0, 60 - (time.monotonic() - down_at)))
    finally:
        up = subprocess.run([sys.executable, str(REPO / "e2e" / "local" / "cluster.py"), "up"], capture_output=True,
                            text=True, timeout=120)
        assert up.returncode == 0, up.stderr[-2000:]
    before = st["latestCheckpoint"]["id"]
    st = jobs.wait_status("clicks", "healthy again with a new checkpoint",
                          lambda s: condition(s, "CheckpointHealthy") == "True"
                          and s["latestCheckpoint"]["id"] > before, timeout=240, operator=operator)
    assert st["phase"] == "Running"
    wait_for("the unhealthy metric cleared", lambda: series.replace("1.0", "0.0") in operator.get("/metrics"),
             timeout=30)
