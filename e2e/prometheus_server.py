"""A real Prometheus server for the alerting e2e test: a config that discovers job pods through the
cluster's API server (kubernetes_sd, credentials from $KUBECONFIG), scrapes them by pod IP with the
labels the alert rules expect (docs/alerts.md#scraping), scrapes the operator as a static target
(it runs outside the cluster in the e2e fixtures), and loads the chart's rules with shorter `for:`.

The server is built from the pinned Go module (scripts/ensure-prometheus-server.sh): Debian's
prometheus package, which gives promtool, is built without kubernetes_sd_configs."""

from __future__ import annotations

import json
import socket
import subprocess
import urllib.parse
import urllib.request
from pathlib import Path
from typing import Any

import yaml

REPO = Path(__file__).resolve().parents[1]
RULES = REPO / "charts" / "sparkpoint" / "rules" / "alerts.yaml"


def short_rules(rules: dict, for_: str) -> dict:
    """The production rules with every `for:` set to `for_` (nothing else changes)."""
    out = yaml.safe_load(yaml.safe_dump(rules))
    for group in out["groups"]:
        group["interval"] = "2s"
        for rule in group["rules"]:
            if "for" in rule:
                rule["for"] = for_
    return out


def scrape_config(kubeconfig: str, namespace: str | None, runtime_port: str, operator_target: str | None,
                  interval: str = "2s") -> dict[str, Any]:
    """`namespace`: where the pods are discovered (None: every namespace).
    `runtime_port`: the runtime's metrics port name (`metrics`; `control` where no dedicated one exists).
    `operator_target`: host:port of an operator process; None discovers the Helm-installed operator's
    pods (label app.kubernetes.io/component=operator, port `metrics`) as the chart's ServiceMonitor does."""
    meta = "__meta_kubernetes_pod_"
    sd = {"role": "pod", "kubeconfig_file": kubeconfig, **({"namespaces": {"names": [namespace]}} if namespace else {})}
    if operator_target:
        operator_sd = {"static_configs": [{"targets": [operator_target]}]}
    else:
        operator_sd = {
            "kubernetes_sd_configs": [sd],
            "relabel_configs": [
                {"source_labels": [f"{meta}label_app_kubernetes_io_component"], "regex": "operator", "action": "keep"},
                {"source_labels": [f"{meta}container_port_name"], "regex": "metrics", "action": "keep"},
                {"source_labels": [f"{meta}name"], "target_label": "operator_pod"},
            ]}
    return {
        "global": {"scrape_interval": interval, "evaluation_interval": interval, "scrape_timeout": "1s"},
        "rule_files": ["rules.yaml"],
        "scrape_configs": [
            {"job_name": "sparkpoint-jobs",
             "kubernetes_sd_configs": [sd],
             "relabel_configs": [
                 {"source_labels": [f"{meta}label_app_kubernetes_io_component"], "regex": "runtime", "action": "keep"},
                 {"source_labels": [f"{meta}container_port_name"], "regex": f"{runtime_port}|gc-metrics",
                  "action": "keep"},
                 {"source_labels": ["__meta_kubernetes_namespace"], "target_label": "namespace"},
                 {"source_labels": [f"{meta}name"], "target_label": "pod"},
                 {"source_labels": [f"{meta}label_sparkpoint_dev_job"], "target_label": "sparkpoint_job"},
                 {"source_labels": [f"{meta}container_name"], "target_label": "container"},
             ]},
            {"job_name": "sparkpoint-operator", "honor_labels": True, **operator_sd},
        ],
    }


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def server_binary() -> str:
    """The pinned server with kubernetes_sd (built once into the cache: minutes the first time)."""
    out = subprocess.run([str(REPO / "scripts" / "ensure-prometheus-server.sh")], capture_output=True, text=True,
                         timeout=1800)
    assert out.returncode == 0, f"building prometheus failed:\n{out.stderr[-3000:]}"
    return out.stdout.strip().splitlines()[-1]


class PrometheusServer:
    def __init__(self, binary: str, workdir: Path, config: dict, rules: dict, port: int | None = None):
        self.binary, self.workdir = binary, workdir
        workdir.mkdir(parents=True, exist_ok=True)
        (workdir / "prometheus.yml").write_text(yaml.safe_dump(config))
        (workdir / "rules.yaml").write_text(yaml.safe_dump(rules))
        self.port = port or _free_port()
        self.process: subprocess.Popen | None = None

    def start(self) -> PrometheusServer:
        log = (self.workdir / "prometheus.log").open("ab")
        self.process = subprocess.Popen(
            [self.binary, f"--config.file={self.workdir / 'prometheus.yml'}", f"--storage.tsdb.path={self.workdir / 'data'}",
             f"--web.listen-address=127.0.0.1:{self.port}"], stdout=log, stderr=subprocess.STDOUT, cwd=self.workdir)
        return self

    def log(self) -> str:
        path = self.workdir / "prometheus.log"
        return path.read_text(errors="replace")[-4000:] if path.exists() else ""

    def api(self, path: str, **params: str) -> Any:
        query = f"?{urllib.parse.urlencode(params)}" if params else ""
        try:
            with urllib.request.urlopen(f"http://127.0.0.1:{self.port}/api/v1/{path}{query}", timeout=5) as resp:
                return json.loads(resp.read())["data"]
        except OSError:
            if self.process and self.process.poll() is not None:
                raise AssertionError(f"prometheus exited {self.process.returncode}:\n{self.log()}") from None
            return None

    def alerts(self, name: str) -> list[dict]:
        data = self.api("alerts") or {"alerts": []}
        return [a for a in data["alerts"] if a["labels"].get("alertname") == name]

    def stop(self) -> None:
        if self.process and self.process.poll() is None:
            self.process.terminate()
            try:
                self.process.wait(15)
            except subprocess.TimeoutExpired:
                self.process.kill()
