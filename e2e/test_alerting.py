"""Alerting proven to fire: a real Prometheus server discovers a running job's pod through the
local cluster's API server, scrapes it by pod IP, loads the chart's alert rules (shorter `for:`),
and SparkpointCheckpointStale fires when MinIO stops and resolves when it is back.

Local cluster only (it stops the cluster's MinIO process, as test_operator_store_outage does)."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time

import pytest
import yaml
from kube_helpers import REPO, STATE_DIR, wait_for
from operator_jobs import Jobs
from prometheus_server import RULES, PrometheusServer, scrape_config, server_binary, short_rules

STATE = STATE_DIR
ALERT = "SparkpointCheckpointStale"


# What starts the stopped MinIO again: the local cluster's `up`, or the command a cluster names
# (make e2e-kind: `e2e/kind/local.sh minio`), which keeps its pid in the same place.
MINIO_UP = (os.environ["SPARKPOINT_E2E_MINIO_UP"].split() if os.environ.get("SPARKPOINT_E2E_MINIO_UP")
            else [sys.executable, str(REPO / "e2e" / "local" / "cluster.py"), "up"])


def _minio_pid() -> int:
    return int((STATE / "pids" / "minio.pid").read_text().split()[0])


def _runtime_port_name(pod) -> str:
    runtime = next(c for c in pod.spec.containers if c.name == "runtime")
    names = {p.name for p in runtime.ports or []}
    return "metrics" if "metrics" in names else "control"  # before the dedicated metrics port existed


@pytest.fixture(scope="session")
def prometheus_binary() -> str:
    return server_binary()


@pytest.mark.slow
@pytest.mark.ci_sample  # about 2.5 min warm; `make test` builds the server in the background
@pytest.mark.timeout(2400)  # a cold machine builds the Prometheus server first
def test_checkpoint_alert_fires_when_the_store_stops_and_resolves(prometheus_binary, api_client, namespace, operator,
                                                                  store_env, tmp_path):
    jobs = Jobs(api_client, namespace, store_env)
    # Console sink: the query keeps running through the outage, so only checkpoints stop.
    jobs.create("clicks", **{"job.sink": {"kind": "console"}, "restart.maxRestarts": 20})
    jobs.wait_status("clicks", "Running with a checkpoint",
                     lambda s: s.get("phase") == "Running" and s.get("latestCheckpoint"), timeout=600,
                     operator=operator)
    pod = jobs.pods("clicks")[0]
    config = scrape_config(os.environ["KUBECONFIG"], namespace, _runtime_port_name(pod),
                           operator.scrape_target)
    prom = PrometheusServer(prometheus_binary, tmp_path / "prometheus", config, short_rules(yaml.safe_load(RULES.read_text()), "10s"))
    prom.start()
    try:
        def scraped():
            active = (prom.api("targets") or {}).get("activeTargets", [])
            return {(t["labels"].get("sparkpoint_job"), t["labels"].get("container"), t["labels"]["job"])
                    for t in active if t["health"] == "up"} >= {("clicks", "runtime", "sparkpoint-jobs"),
                                                                (None, None, "sparkpoint-operator")} and active
        targets = wait_for("targets up: the job's runtime (sparkpoint_job=clicks, container=runtime) and the operator",
                           scraped, timeout=60, interval=1)
        assert {t["labels"]["pod"] for t in targets if t["labels"].get("sparkpoint_job")} == {pod.metadata.name}
        assert pod.status.pod_ip in {t["scrapeUrl"].split("/")[2].split(":")[0] for t in targets}
        wait_for("the runtime's series in Prometheus", lambda: (prom.api(
            "query", query='sparkpoint_checkpoint_interval_seconds{sparkpoint_job="clicks"}') or {}).get("result"),
            timeout=30)
        # A healthy job is not alerting (polled: on a loaded machine one checkpoint may run late).
        wait_for(f"no {ALERT} while checkpoints complete", lambda: prom.alerts(ALERT) == [], timeout=90, interval=2)
        # The operator's triggers reach the runtime (a trigger without the control token gets a 401, and
        # the runtime's own fallback timer would hide that from the checkpoint alerts).
        trigger_errors = (prom.api("query", query='sparkpoint_operator_checkpoint_triggers_total{result="error"}')
                          or {}).get("result")
        assert not trigger_errors or float(trigger_errors[0]["value"][1]) == 0, f"operator triggers failed: {trigger_errors}"

        os.kill(_minio_pid(), signal.SIGKILL)
        down = time.monotonic()
        try:
            firing = wait_for(f"{ALERT} firing", lambda: [a for a in prom.alerts(ALERT) if a["state"] == "firing"],
                              timeout=180, interval=2)
            fired_after = time.monotonic() - down
        finally:
            up = subprocess.run(MINIO_UP, capture_output=True, text=True, timeout=120)
            assert up.returncode == 0, up.stderr[-2000:]
        assert firing[0]["labels"] == {"alertname": ALERT, "severity": "critical", "namespace": namespace,
                                       "sparkpoint_job": "clicks"}
        assert firing[0]["annotations"]["runbook_url"] == "https://github.com/sparkpoint/sparkpoint/blob/main/docs/alerts.md#sparkpointcheckpointstale"
        back = time.monotonic()
        wait_for(f"{ALERT} resolved", lambda: prom.alerts(ALERT) == [], timeout=240, interval=2)
        print(f"\n{ALERT}: firing {fired_after:.0f} s after MinIO stopped, resolved "
              f"{time.monotonic() - back:.0f} s after it was back")
    except AssertionError as error:
        raise AssertionError(f"{error}\n--- prometheus targets\n{prom.api('targets')}\n--- prometheus log\n"
                             f"{prom.log()}\n{jobs.diagnostics('clicks', operator)}") from None
    finally:
        prom.stop()
