"""uiIngress (issue 30): off by default; when on, an Ingress per namespace with a path per listed job
to its Service's spark-ui port under pathPrefix, the operator told the prefix (so Spark's
spark.ui.proxyBase matches the path), and the NetworkPolicy opened to the controller's namespaces only
then."""

from __future__ import annotations

import pytest
from conftest import RELEASE_NS, helm_template

UI = {"enabled": True, "jobs": ["team/clicks", "team/orders", "ops/etl"], "className": "nginx",
      "host": "spark.example.com", "annotations": {"example.com/auth": "sso"}}


def _operator_args(objs) -> list[str]:
    deployment = next(d for d in objs.of("Deployment", RELEASE_NS) if d["metadata"]["name"].endswith("-operator"))
    return deployment["spec"]["template"]["spec"]["containers"][0]["args"]


def _ui_rules(objs, namespace: str) -> list[dict]:
    ingress = objs.one("Ingress", namespace)
    return ingress["spec"]["rules"]


def test_off_by_default_and_the_ui_port_stays_closed(render) -> None:
    objs = render(watchNamespaces=["team"], networkPolicy={"enabled": True})
    assert not objs.of("Ingress")
    assert not [a for a in _operator_args(objs) if a.startswith("--ui-path-prefix")]
    policy = next(p for p in objs.of("NetworkPolicy", "team") if p["metadata"]["name"].endswith("-runtime"))
    ui_rules = [r for r in policy["spec"]["ingress"] if {"protocol": "TCP", "port": 4040} in r["ports"]]
    in_release = {"matchLabels": {"kubernetes.io/metadata.name": RELEASE_NS}}
    assert ui_rules == [{"from": [{"namespaceSelector": in_release, "podSelector": {"matchLabels": {
        "app.kubernetes.io/name": "sparkpoint", "app.kubernetes.io/instance": "sp", "app.kubernetes.io/component": c}}}
        for c in ("operator", "history-server")], "ports": [{"protocol": "TCP", "port": 4040}]}]


def test_a_path_per_job_to_its_services_ui_port_and_the_operator_knows_the_prefix(render) -> None:
    objs = render(uiIngress=UI, watchNamespaces=["team", "ops"])
    assert "--ui-path-prefix=/sparkpoint" in _operator_args(objs)
    (rule,) = _ui_rules(objs, "team")
    assert rule["host"] == "spark.example.com"
    assert rule["http"]["paths"] == [
        {"path": f"/sparkpoint/team/{job}", "pathType": "Prefix",
         "backend": {"service": {"name": job, "port": {"name": "spark-ui"}}}} for job in ("clicks", "orders")]
    (etl,) = _ui_rules(objs, "ops")
    assert [p["path"] for p in etl["http"]["paths"]] == ["/sparkpoint/ops/etl"] and etl["host"] == "spark.example.com"
    ingress = objs.one("Ingress", "team")
    assert ingress["spec"]["ingressClassName"] == "nginx"
    assert ingress["metadata"]["annotations"] == {"example.com/auth": "sso"}


def test_the_network_policy_opens_the_ui_port_to_the_controller_only_with_the_ingress(render) -> None:
    objs = render(uiIngress={**UI, "controllerNamespaces": ["ingress"]}, watchNamespaces=["team", "ops"],
                  networkPolicy={"enabled": True})
    policy = next(p for p in objs.of("NetworkPolicy", "team") if p["metadata"]["name"].endswith("-runtime"))
    opened = [r for r in policy["spec"]["ingress"] if {"protocol": "TCP", "port": 4040} in r["ports"]]
    assert len(opened) == 2
    assert opened[1]["from"] == [{"namespaceSelector": {"matchExpressions": [
        {"key": "kubernetes.io/metadata.name", "operator": "In", "values": ["ingress"]}]}}]


@pytest.mark.parametrize(("values", "message"), [
    ({"enabled": True}, "uiIngress.jobs"),
    ({**UI, "jobs": ["no-namespace"]}, "jobs"),
    ({**UI, "pathPrefix": "/trailing/"}, "pathPrefix"),
    ({**UI, "pathPrefix": "relative"}, "pathPrefix"),
])
def test_refuses_an_ingress_it_cannot_route(helm, values, message) -> None:
    out = helm_template(helm, {"uiIngress": values})
    assert out.returncode != 0 and message in out.stderr, out.stderr
