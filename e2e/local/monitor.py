"""`make monitor`: a real Prometheus for the local cluster, with the chart's alert rules as they ship.

It discovers every namespace's job pods and Helm-installed operator pods through the cluster's API
server (kubernetes_sd, with $KUBECONFIG) and scrapes them by pod IP with the labels the rules expect
(docs/alerts.md#scraping); an operator started on the host (`make operator`, metrics on
127.0.0.1:9100) is scraped too. It serves http://127.0.0.1:$PROMETHEUS_PORT (default 9095) until
Ctrl-C: /alerts shows the rules, and `python e2e/local/cluster.py stop-minio` makes
SparkpointCheckpointStale fire for a running job within a few checkpoint intervals (`make
cluster-up` brings MinIO back and the alert resolves)."""

from __future__ import annotations

import os
import signal
import sys
import time
from pathlib import Path

import yaml

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent))  # e2e/prometheus_server.py

from prometheus_server import RULES, PrometheusServer, scrape_config, server_binary  # noqa: E402


def main() -> int:
    kubeconfig = os.environ.get("KUBECONFIG")
    if not kubeconfig:
        print("make monitor: set KUBECONFIG (eval \"$(make -s cluster-up | tail -1)\")", file=sys.stderr)
        return 2
    port = int(os.environ.get("PROMETHEUS_PORT", "9095"))
    state = Path(os.environ.get("SPARKPOINT_E2E_STATE", HERE / ".state")) / "prometheus"
    config = scrape_config(str(Path(kubeconfig).resolve()), None, "metrics", None, interval="5s")
    # Also an operator on the host (`make operator`): a second scrape job with its static target.
    host_operator = dict(config["scrape_configs"][1], job_name="sparkpoint-operator-host",
                         static_configs=[{"targets": ["127.0.0.1:9100"]}])
    host_operator.pop("kubernetes_sd_configs", None)
    host_operator.pop("relabel_configs", None)
    config["scrape_configs"].append(host_operator)
    prom = PrometheusServer(server_binary(), state, config, yaml.safe_load(RULES.read_text()), port=port).start()
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(0))
    print(f"Prometheus on http://127.0.0.1:{port} (alerts: /alerts, targets: /targets); data in {state}; "
          "Ctrl-C stops it", flush=True)
    try:
        while prom.process.poll() is None:
            time.sleep(1)
        print(f"prometheus exited {prom.process.returncode}:\n{prom.log()}", file=sys.stderr)
        return 1
    except KeyboardInterrupt:
        return 0
    finally:
        prom.stop()


if __name__ == "__main__":
    sys.exit(main())
