"""The operator logs in as its pod's ServiceAccount whenever it has one (as kopf does), so the RBAC
the chart grants is what limits it; a kubeconfig is only the fallback outside a cluster."""

from __future__ import annotations

import pytest
from kubernetes import config

from sparkpoint.operator.kube import client as kube


@pytest.fixture
def calls(monkeypatch) -> list[str]:
    made: list[str] = []
    monkeypatch.setattr(config, "load_incluster_config", lambda: made.append("in-cluster"))
    monkeypatch.setattr(config, "load_kube_config", lambda: made.append("kubeconfig"))
    return made


def test_in_cluster_service_account_wins_over_a_kubeconfig(calls) -> None:
    kube.load_config()
    assert calls == ["in-cluster"]


def test_kubeconfig_outside_a_cluster(calls, monkeypatch) -> None:
    def not_in_a_pod() -> None:
        calls.append("in-cluster")
        raise config.ConfigException("Service host/port is not set.")

    monkeypatch.setattr(config, "load_incluster_config", not_in_a_pod)
    kube.load_config()
    assert calls == ["in-cluster", "kubeconfig"]
