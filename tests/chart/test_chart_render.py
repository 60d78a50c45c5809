"""`helm lint` and `helm template` of charts/sparkpoint with several value sets: what each renders."""

from __future__ import annotations

import json
import subprocess

import pytest
import yaml
from conftest import CHART, RELEASE_NS, ROOT, helm_template, operator_container

NAMESPACES = ["team-a", "team-b"]


@pytest.mark.parametrize("values", [[], ["--set-json", f"watchNamespaces={NAMESPACES}".replace("'", '"')],
                                    ["--set", "replicas=2,serviceMonitor.enabled=true,podMonitor.enabled=true,"
                                              "prometheusRule.enabled=true,networkPolicy.enabled=true,"
                                              "grafanaDashboard.enabled=true"]])
def test_helm_lint_is_clean(helm, values) -> None:
    out = subprocess.run([helm, "lint", "--strict", str(CHART), *values], capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stdout + out.stderr


def test_operator_deployment_is_hardened_and_probed(render) -> None:
    objs = render()
    pod = objs.one("Deployment", RELEASE_NS)["spec"]["template"]
    assert pod["metadata"]["labels"]["app.kubernetes.io/name"] == "sparkpoint"
    assert pod["metadata"]["labels"]["app.kubernetes.io/component"] == "operator"
    spec, container = pod["spec"], operator_container(objs)
    assert spec["securityContext"]["runAsNonRoot"] is True
    assert spec["securityContext"]["seccompProfile"] == {"type": "RuntimeDefault"}
    sc = container["securityContext"]
    assert sc["readOnlyRootFilesystem"] is True and sc["allowPrivilegeEscalation"] is False
    assert sc["capabilities"] == {"drop": ["ALL"]} and sc["seccompProfile"] == {"type": "RuntimeDefault"}
    assert container["command"] == ["sparkpoint-operator"]
    assert container["args"][0] == "--all-namespaces"
    assert {"name": "metrics", "containerPort": 9100, "protocol": "TCP"} in container["ports"]
    assert container["livenessProbe"]["httpGet"] == {"path": "/healthz", "port": "metrics"}
    assert container["resources"]["requests"] and container["resources"]["limits"]["memory"]
    # The read-only root needs a writable /tmp.
    mounts = {m["name"]: m["mountPath"] for m in container["volumeMounts"]}
    volumes = {v["name"]: v for v in spec["volumes"]}
    assert mounts == {"tmp": "/tmp"} and "emptyDir" in volumes["tmp"]
    accounts = {o["metadata"]["name"]: o for o in objs.of("ServiceAccount", RELEASE_NS)}
    # no drivers' account beside a cluster-wide operator (issue 41; driverServiceAccount.namespaces)
    assert set(accounts) == {spec["serviceAccountName"], "sparkpoint-runtime"}
    assert accounts["sparkpoint-runtime"]["automountServiceAccountToken"] is False
    svc = objs.one("Service", RELEASE_NS)
    assert svc["spec"]["ports"] == [{"name": "metrics", "port": 9100, "targetPort": "metrics", "protocol": "TCP"}]
    assert svc["spec"]["selector"].items() <= pod["metadata"]["labels"].items()


def test_namespaced_operator_watches_exactly_the_given_namespaces(render) -> None:
    objs = render(watchNamespaces=NAMESPACES)
    assert [a for a in operator_container(objs)["args"] if "namespace" in a] == [
        "--namespace=team-a", "--namespace=team-b"]
    # The job pods' ServiceAccount goes where the jobs run, without an API token, and they run as it.
    assert "--job-service-account=sparkpoint-runtime" in operator_container(objs)["args"]
    assert not [a for a in operator_container(render())["args"] if a.startswith("--job-service-account")]
    for ns in NAMESPACES:
        sa = next(o for o in objs.of("ServiceAccount", ns) if o["metadata"]["name"] == "sparkpoint-runtime")
        assert sa["automountServiceAccountToken"] is False


def test_standby_replica_peers_instead_of_running_standalone(render) -> None:
    objs = render(replicas=2)
    assert objs.one("Deployment")["spec"]["replicas"] == 2
    assert "--standalone" not in operator_container(objs)["args"]
    kinds = {d["spec"]["names"]["kind"] for d in yaml.safe_load_all((CHART / "crds" / "kopf-peering.yaml").read_text())}
    assert kinds == {"KopfPeering", "ClusterKopfPeering"}


def test_monitoring_objects_are_off_by_default_and_render_when_enabled(render) -> None:
    kinds = ("ServiceMonitor", "PodMonitor", "PrometheusRule", "NetworkPolicy")
    assert not [o for o in render() if o["kind"] in kinds]
    objs = render(serviceMonitor={"enabled": True, "labels": {"release": "prom"}}, podMonitor={"enabled": True},
                  prometheusRule={"enabled": True})
    sm = objs.one("ServiceMonitor")
    assert sm["metadata"]["labels"]["release"] == "prom"
    assert sm["spec"]["endpoints"][0]["port"] == "metrics"
    assert sm["spec"]["selector"]["matchLabels"].items() <= objs.one("Service")["metadata"]["labels"].items()
    pm = objs.one("PodMonitor")
    assert pm["spec"]["selector"]["matchLabels"] == {"app.kubernetes.io/name": "sparkpoint",
                                                     "app.kubernetes.io/component": "runtime"}
    assert [e["port"] for e in pm["spec"]["podMetricsEndpoints"]] == ["metrics", "gc-metrics"]
    assert pm["spec"]["namespaceSelector"] == {"any": True}
    assert render(watchNamespaces=NAMESPACES, podMonitor={"enabled": True}).one("PodMonitor")[
        "spec"]["namespaceSelector"] == {"matchNames": NAMESPACES}
    # The PrometheusRule carries rules/alerts.yaml as it is (the file promtool tests).
    rules_file = yaml.safe_load((CHART / "rules" / "alerts.yaml").read_text())
    assert objs.one("PrometheusRule")["spec"]["groups"] == rules_file["groups"]


def test_grafana_dashboard_configmap_carries_the_dashboard_and_the_sidecar_label(render) -> None:
    assert not [o for o in render() if o["kind"] == "ConfigMap"]   # off by default
    dashboard = json.loads((CHART / "dashboards" / "sparkpoint.json").read_text())
    cm = render(grafanaDashboard={"enabled": True}).one("ConfigMap", RELEASE_NS)
    assert cm["metadata"]["labels"]["grafana_dashboard"] == "1"    # what Grafana's chart sidecar selects by default
    assert cm["metadata"]["labels"]["app.kubernetes.io/name"] == "sparkpoint"
    assert list(cm["data"]) == ["sparkpoint.json"]
    assert json.loads(cm["data"]["sparkpoint.json"]) == dashboard  # the file as it is, not a copy that drifts
    custom = render(grafanaDashboard={"enabled": True, "labelName": "dashboards.example.com/load",
                                      "labelValue": "yes", "namespace": "monitoring",
                                      "annotations": {"grafana_folder": "Sparkpoint"}}).one("ConfigMap", "monitoring")
    assert custom["metadata"]["labels"]["dashboards.example.com/load"] == "yes"
    assert "grafana_dashboard" not in custom["metadata"]["labels"]
    assert custom["metadata"]["annotations"] == {"grafana_folder": "Sparkpoint"}
    assert json.loads(custom["data"]["sparkpoint.json"]) == dashboard


def test_runbook_links_follow_the_docs_base_url(render) -> None:
    rules_file = yaml.safe_load((CHART / "rules" / "alerts.yaml").read_text())
    alerts = [r for g in rules_file["groups"] for r in g["rules"] if "alert" in r]
    objs = render(prometheusRule={"enabled": True, "docsBaseUrl": "https://docs.example.internal/sparkpoint"})
    rendered = {r["alert"]: r for g in objs.one("PrometheusRule")["spec"]["groups"] for r in g["rules"] if "alert" in r}
    assert set(rendered) == {a["alert"] for a in alerts}
    for alert in alerts:
        assert rendered[alert["alert"]]["annotations"]["runbook_url"] == \
            f"https://docs.example.internal/sparkpoint/alerts.md#{alert['alert'].lower()}"
        # nothing but the link changes
        assert {**rendered[alert["alert"]], "annotations": alert["annotations"]} == alert


def test_network_policy_limits_the_control_port_to_the_operator(render) -> None:
    objs = render(watchNamespaces=NAMESPACES, networkPolicy={
        "enabled": True, "prometheusNamespaces": ["prom"],
        "prometheusNamespaceSelector": {"matchLabels": {"team": "observability"}}})
    for ns in NAMESPACES:
        policy = objs.one("NetworkPolicy", ns)["spec"]
        assert policy["podSelector"]["matchLabels"] == {"app.kubernetes.io/name": "sparkpoint",
                                                        "app.kubernetes.io/component": "runtime"}
        control, ui, scrape = policy["ingress"]
        # Spark's UI has no authentication: only the operator's and History Server's pods (docs/security.md)
        assert [p["port"] for p in ui["ports"]] == [4040]
        assert [peer["namespaceSelector"] for peer in ui["from"]] == \
            [{"matchLabels": {"kubernetes.io/metadata.name": RELEASE_NS}}] * 2
        assert [peer["podSelector"]["matchLabels"]["app.kubernetes.io/component"] for peer in ui["from"]] == \
            ["operator", "history-server"]
        # spark.master k8s: no namespace-wide executor rule; each job's own policies (operator/kube/isolation.py)
        assert all(7078 not in [p["port"] for p in rule["ports"]] for rule in policy["ingress"])
        assert [p["port"] for p in control["ports"]] == [8080]
        peer = control["from"][0]
        assert peer["namespaceSelector"]["matchLabels"] == {"kubernetes.io/metadata.name": RELEASE_NS}
        assert peer["podSelector"]["matchLabels"]["app.kubernetes.io/component"] == "operator"
        assert sorted(p["port"] for p in scrape["ports"]) == [9090, 9091]
        assert scrape["from"] == [
            {"namespaceSelector": {"matchExpressions": [
                {"key": "kubernetes.io/metadata.name", "operator": "In", "values": ["prom"]}]}},
            {"namespaceSelector": {"matchLabels": {"team": "observability"}}}]
    operator_policy = objs.one("NetworkPolicy", RELEASE_NS)["spec"]
    assert [p["port"] for p in operator_policy["ingress"][0]["ports"]] == [9100]


def test_chart_crds_equal_the_repository_crds() -> None:
    """crds/ is the source (`make crd` regenerates it and copies it into the chart)."""
    repo = {p.name: p.read_text() for p in (ROOT / "crds").glob("*.yaml")}
    chart = {p.name: p.read_text() for p in (CHART / "crds").glob("*.yaml")}
    assert chart == repo, "charts/sparkpoint/crds drifted from crds/: run `make crd`"


def test_network_policy_refuses_to_admit_every_scraper(helm) -> None:
    """An empty `from` would let anyone reach the metrics ports: rendering fails instead."""
    out = helm_template(helm, {"networkPolicy": {"enabled": True, "prometheusNamespaces": []}})
    assert out.returncode != 0 and "networkPolicy.prometheusNamespaces" in out.stderr
