"""The operator's RBAC is least privilege: exactly the rules below, and every Kubernetes call the
operator code makes is covered by them (a new call without a rule fails here, not in a cluster)."""

from __future__ import annotations

import re

import pytest
from conftest import RELEASE_NS, ROOT, Rendered

# (apiGroup, resource) -> verbs: the whole grant in a namespace the operator manages.
NAMESPACED = {
    ("sparkpoint.dev", "streamingjobs"): {"get", "list", "watch", "patch"},
    ("sparkpoint.dev", "streamingjobsavepoints"): {"get", "list", "watch", "patch"},
    ("sparkpoint.dev", "streamingjobs/status"): {"patch"},
    ("sparkpoint.dev", "streamingjobsavepoints/status"): {"patch"},
    ("sparkpoint.dev", "streamingjobs/finalizers"): {"update"},
    ("", "pods"): {"get", "list", "watch", "create", "delete"},
    ("", "services"): {"create"},
    ("", "configmaps"): {"create", "update", "patch"},
    ("", "secrets"): {"get", "create"},
    ("", "events"): {"create"},
    ("networking.k8s.io", "networkpolicies"): {"create"},
    ("kopf.dev", "kopfpeerings"): {"get", "list", "watch", "patch", "create"},
}
CLUSTER_ONLY = {
    ("kopf.dev", "clusterkopfpeerings"): {"get", "list", "watch", "patch", "create"},
    ("apiextensions.k8s.io", "customresourcedefinitions"): {"list", "watch"},
    ("", "nodes"): {"get"},
}
DISCOVERY = {("apiextensions.k8s.io", "customresourcedefinitions"): {"list", "watch"},
             ("", "namespaces"): {"list", "watch"}, ("", "nodes"): {"get"}}


def operator_objects(objs: Rendered) -> Rendered:
    """Without the drivers' account and Role (tested on their own below)."""
    return Rendered(o for o in objs if o["metadata"]["name"] != "sparkpoint-driver")


def grants(role: dict) -> dict[tuple[str, str], set[str]]:
    out: dict[tuple[str, str], set[str]] = {}
    for rule in role["rules"]:
        for text in (*rule["apiGroups"], *rule["resources"], *rule["verbs"]):
            assert "*" not in text, f"wildcard in {role['kind']} {role['metadata']['name']}: {rule}"
        assert "resourceNames" not in rule and "nonResourceURLs" not in rule
        for group in rule["apiGroups"]:
            for resource in rule["resources"]:
                out.setdefault((group, resource), set()).update(rule["verbs"])
    return out


def test_cluster_wide_install_grants_exactly_the_operator_rules(render) -> None:
    objs = operator_objects(render())
    assert not objs.of("Role") and not objs.of("RoleBinding")
    role, binding = objs.one("ClusterRole"), objs.one("ClusterRoleBinding")
    assert grants(role) == NAMESPACED | CLUSTER_ONLY
    sa = objs.one("Deployment")["spec"]["template"]["spec"]["serviceAccountName"]
    assert sa in [o["metadata"]["name"] for o in objs.of("ServiceAccount", RELEASE_NS)]
    assert binding["roleRef"] == {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole",
                                  "name": role["metadata"]["name"]}
    assert binding["subjects"] == [{"kind": "ServiceAccount", "name": sa, "namespace": RELEASE_NS}]


@pytest.mark.parametrize("discovery", [True, False])
def test_namespaced_install_writes_only_in_the_watched_namespaces(render, discovery) -> None:
    objs = operator_objects(render(watchNamespaces=["team-a", "team-b"], rbac={"clusterDiscovery": discovery}))
    for ns in ("team-a", "team-b"):
        role, binding = objs.one("Role", ns), objs.one("RoleBinding", ns)
        assert grants(role) == NAMESPACED
        assert binding["roleRef"]["name"] == role["metadata"]["name"]
        assert binding["subjects"][0]["namespace"] == RELEASE_NS
    assert not objs.of("Role", RELEASE_NS)
    if discovery:  # cluster scope: read-only list/watch of CRDs and namespaces, get of Nodes, nothing else
        assert grants(objs.one("ClusterRole")) == DISCOVERY
    else:
        assert not objs.of("ClusterRole") and not objs.of("ClusterRoleBinding")


def test_no_rbac_objects_when_disabled(render) -> None:
    kinds = {o["kind"] for o in render(rbac={"create": False})}
    assert not kinds & {"Role", "RoleBinding", "ClusterRole", "ClusterRoleBinding"}


# kubernetes-client method prefixes -> RBAC verbs.
VERBS = {"read": "get", "list": "list", "create": "create", "delete": "delete", "patch": "patch",
         "replace": "update"}
CORE_RESOURCES = {"pod": "pods", "service": "services", "config_map": "configmaps", "secret": "secrets"}
CORE_CALL = re.compile(r"\b(read|list|create|delete|patch|replace)_namespaced_(pod|service|config_map|secret)\b")
NODE_CALL = re.compile(r"\b(read|list|patch)_node\b")
NETWORKING_CALL = re.compile(r"\b(read|list|create|delete|patch|replace)_namespaced_network_policy\b")
CUSTOM_CALL = re.compile(r"\b(get|list|create|delete|patch|replace)_(namespaced|cluster)_custom_object(_status)?\b")


def test_every_kubernetes_call_of_the_operator_is_granted() -> None:
    """Scans operator/**/*.py for kubernetes-client calls. Core calls map to (resource, verb) directly;
    custom-object calls are checked against the resources the code names next to them."""
    needed: set[tuple[str, str, str]] = set()
    for path in sorted((ROOT / "operator").rglob("*.py")):
        text = path.read_text()
        for verb, kind in CORE_CALL.findall(text):
            needed.add(("", CORE_RESOURCES[kind], VERBS[verb]))
        for verb in NODE_CALL.findall(text):
            needed.add(("", "nodes", VERBS[verb]))
        for verb in NETWORKING_CALL.findall(text):
            needed.add(("networking.k8s.io", "networkpolicies", VERBS[verb]))
        for verb, scope, status in CUSTOM_CALL.findall(text):
            verb = VERBS.get(verb, verb)
            if scope == "cluster":
                assert "clusterkopfpeerings" in text, f"{path.name}: a cluster-scoped call on an unknown resource"
                needed.add(("kopf.dev", "clusterkopfpeerings", verb))
            elif "kopfpeerings" in text and verb == "create":
                needed.add(("kopf.dev", "kopfpeerings", verb))
            else:
                needed.add(("sparkpoint.dev", "streamingjobs" + status.replace("_", "/"), verb))
    assert ("", "pods", "create") in needed and ("sparkpoint.dev", "streamingjobs/status", "patch") in needed
    assert ("networking.k8s.io", "networkpolicies", "create") in needed and ("", "nodes", "get") in needed
    granted = NAMESPACED | CLUSTER_ONLY
    missing = sorted(n for n in needed if n[2] not in granted.get(n[:2], set()))
    assert not missing, f"operator calls without an RBAC rule in charts/sparkpoint/templates/rbac.yaml: {missing}"


# What Spark's Kubernetes backend calls from a client-mode driver (issue 26), and nothing else: no
# Secrets, Services or PersistentVolumeClaims (issue 41). patch: Spark labels its executor pods
# (the chart's admission policy allows no other change).
DRIVER = {
    ("", "pods"): {"get", "list", "watch", "create", "delete", "deletecollection", "patch"},
    ("", "configmaps"): {"get", "list", "create", "delete", "deletecollection"},
}


@pytest.mark.parametrize("values, namespaces", [
    ({"watchNamespaces": ["team-a", "team-b"]}, ["team-a", "team-b"]),
    ({"driverServiceAccount": {"create": True, "name": "sparkpoint-driver", "namespaces": ["team-c"]}}, ["team-c"]),
])
def test_the_driver_account_gets_exactly_what_sparks_backend_uses_in_each_job_namespace(render, values,
                                                                                        namespaces) -> None:
    objs = render(**values)
    for ns in namespaces:
        account = next(o for o in objs.of("ServiceAccount", ns) if o["metadata"]["name"] == "sparkpoint-driver")
        assert account.get("automountServiceAccountToken") is not False  # its pods need the token
        role = next(o for o in objs.of("Role", ns) if o["metadata"]["name"] == "sparkpoint-driver")
        assert grants(role) == DRIVER
        binding = next(o for o in objs.of("RoleBinding", ns) if o["metadata"]["name"] == "sparkpoint-driver")
        assert binding["roleRef"] == {"apiGroup": "rbac.authorization.k8s.io", "kind": "Role",
                                      "name": "sparkpoint-driver"}
        assert binding["subjects"] == [{"kind": "ServiceAccount", "name": "sparkpoint-driver", "namespace": ns}]
    args = objs.one("Deployment")["spec"]["template"]["spec"]["containers"][0]["args"]
    assert "--driver-service-account=sparkpoint-driver" in args


def test_no_driver_account_when_disabled(render) -> None:
    objs = render(driverServiceAccount={"create": False, "name": ""})
    assert not [o for o in objs if o["metadata"]["name"] == "sparkpoint-driver"]
    assert not any(a.startswith("--driver-service-account") for a in
                   objs.one("Deployment")["spec"]["template"]["spec"]["containers"][0]["args"])
