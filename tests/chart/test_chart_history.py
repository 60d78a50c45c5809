"""historyServer (issue 30): off by default; when on, one pod with the store mirror and Spark's own
History Server sharing an emptyDir, a Service the plugin finds by component, hardened like the
operator, behind the NetworkPolicy; and rendering refuses a History Server with nothing to read."""

from __future__ import annotations

import pytest
from conftest import RELEASE_NS, helm_template

HS = {"enabled": True, "storeUrl": "s3://sparkpoint/examples", "secretName": "sparkpoint-storage",
      "jobs": ["default/windowed-aggregation", "team/clicks"]}


def _pod(objs) -> dict:
    return next(d for d in objs.of("Deployment") if d["metadata"]["name"].endswith("-history"))["spec"]["template"]


def test_off_by_default(render) -> None:
    objs = render()
    assert not [o for o in objs if o["metadata"]["name"].endswith("-history")]


def test_mirror_and_server_share_the_log_dir_and_read_the_listed_jobs(render) -> None:
    objs = render(historyServer=HS)
    pod = _pod(objs)
    sync, server = pod["spec"]["containers"]
    assert sync["command"] == ["sparkpoint", "history", "sync", "--store", "s3://sparkpoint/examples",
                               "--job", "default/windowed-aggregation", "--job", "team/clicks",
                               "--dest", "/var/lib/sparkpoint-history", "--interval", "30s"]
    assert sync["envFrom"] == [{"secretRef": {"name": "sparkpoint-storage"}}]
    assert server["command"][:5] == ["sparkpoint", "history", "server", "--log-dir", "/var/lib/sparkpoint-history"]
    assert server["ports"] == [{"name": "http", "containerPort": 18080, "protocol": "TCP"}]
    assert "envFrom" not in server  # the server never talks to the store
    mounts = {c["name"]: {m["name"]: m for m in c["volumeMounts"]} for c in (sync, server)}
    assert mounts["history-server"]["logs"]["readOnly"] is True and "readOnly" not in mounts["sync"]["logs"]
    assert {"name": "logs", "emptyDir": {}} in pod["spec"]["volumes"]
    assert pod["spec"]["automountServiceAccountToken"] is False
    for c in (sync, server):
        assert c["image"].startswith("sparkpoint/runtime:")  # Spark and sparkpoint, not the operator image
        assert c["securityContext"]["readOnlyRootFilesystem"] is True
        assert c["securityContext"]["capabilities"]["drop"] == ["ALL"]
    service = next(s for s in objs.of("Service") if s["metadata"]["name"].endswith("-history"))
    assert service["metadata"]["labels"]["app.kubernetes.io/component"] == "history-server"
    assert service["spec"]["ports"] == [{"name": "http", "port": 18080, "targetPort": "http", "protocol": "TCP"}]
    assert service["spec"]["selector"].items() <= pod["metadata"]["labels"].items()


def test_without_jobs_the_mirror_finds_every_job_of_the_store(render) -> None:
    sync = _pod(render(historyServer={**HS, "jobs": []}))["spec"]["containers"][0]
    assert sync["command"] == ["sparkpoint", "history", "sync", "--store", "s3://sparkpoint/examples",
                               "--dest", "/var/lib/sparkpoint-history", "--interval", "30s"]


def test_network_policy_admits_only_the_operators_pods(render) -> None:
    objs = render(historyServer=HS, networkPolicy={"enabled": True})
    policy = next(p for p in objs.of("NetworkPolicy", RELEASE_NS) if p["metadata"]["name"].endswith("-history"))
    assert policy["spec"]["podSelector"]["matchLabels"]["app.kubernetes.io/component"] == "history-server"
    (rule,) = policy["spec"]["ingress"]
    # by selector: never the whole release namespace, where jobs may run too (issue 41)
    assert rule == {"from": [{"namespaceSelector": {"matchLabels": {"kubernetes.io/metadata.name": RELEASE_NS}},
                              "podSelector": {"matchLabels": {"app.kubernetes.io/name": "sparkpoint",
                                                              "app.kubernetes.io/instance": "sp",
                                                              "app.kubernetes.io/component": "operator"}}}],
                    "ports": [{"protocol": "TCP", "port": 18080}]}


@pytest.mark.parametrize(("values", "message"), [
    ({"enabled": True, "jobs": ["default/a"]}, "historyServer.storeUrl"),
    ({**HS, "storeUrl": "file:///data"}, "storeUrl"),
    ({"enabled": True, "storeUrl": "s3://bucket/p", "jobs": ["default/a"]}, "historyServer.serviceAccountName"),
    ({**HS, "jobs": ["just-a-name"]}, "jobs"),
    ({**HS, "storeUrl": "s3a://bucket/p"}, "storeUrl"),
    ({**HS, "port": 80}, "port"),
])
def test_refuses_a_history_server_with_nothing_to_read(helm, values, message) -> None:
    out = helm_template(helm, {"historyServer": values})
    assert out.returncode != 0 and message in out.stderr, out.stderr


def test_a_cloud_identity_instead_of_a_secret(render) -> None:
    """No Secret: the mirror runs as the named account (its IRSA / Pod Identity role reads the store),
    with the endpoint and region as plain env and no static keys anywhere in the pod."""
    values = {**{k: v for k, v in HS.items() if k != "secretName"}, "serviceAccountName": "history-reader",
              "endpoint": "https://s3.eu-west-3.amazonaws.com", "region": "eu-west-3"}
    pod = _pod(render(historyServer=values))
    sync = pod["spec"]["containers"][0]
    assert pod["spec"]["serviceAccountName"] == "history-reader"
    assert pod["spec"]["automountServiceAccountToken"] is False
    assert "envFrom" not in sync
    env = {e["name"]: e.get("value") for e in sync["env"]}
    assert env["SPARKPOINT_S3_ENDPOINT"] == "https://s3.eu-west-3.amazonaws.com" and env["AWS_REGION"] == "eu-west-3"
    assert not {"AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY"} & env.keys()
    assert "serviceAccountName" not in _pod(render(historyServer=HS))["spec"]  # the namespace's default


def test_the_operator_lends_its_own_identity_only_when_asked(render) -> None:
    def args(objs) -> list[str]:
        deployment = next(d for d in objs.of("Deployment") if d["metadata"]["name"].endswith("-operator"))
        return deployment["spec"]["template"]["spec"]["containers"][0]["args"]

    assert "--store-own-identity" not in args(render())
    assert "--store-own-identity" in args(render(store={"ownIdentity": True}))
