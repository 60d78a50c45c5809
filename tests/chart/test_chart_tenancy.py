"""The chart's side of tenant isolation (issue 41): drivers' accounts never beside a cluster-wide
operator, the admission policy bound to them, selectors instead of whole namespaces in the UI and
History Server policies, and hostPath hot volumes off unless a prefix is given."""

from __future__ import annotations

import pytest
import yaml
from conftest import RELEASE_NS, Rendered, helm_template, operator_container

VAP = "admissionregistration.k8s.io/v1/ValidatingAdmissionPolicy"


def render_with_vap(helm: str, **values) -> Rendered:
    out = helm_template(helm, values, "--api-versions", VAP)
    assert out.returncode == 0, out.stderr
    return Rendered(doc for doc in yaml.safe_load_all(out.stdout) if doc)


def test_a_cluster_wide_install_puts_no_driver_account_in_its_own_namespace(render, helm) -> None:
    objs = render()
    assert not [o for o in objs if o["metadata"]["name"] == "sparkpoint-driver"]
    out = helm_template(helm, {"driverServiceAccount": {"create": True, "name": "sparkpoint-driver",
                                                        "namespaces": [RELEASE_NS]}})
    assert out.returncode != 0 and "must not list the release namespace" in out.stderr


def test_the_admission_policy_is_bound_to_the_drivers_account_where_the_cluster_has_it(render, helm) -> None:
    assert not render(watchNamespaces=["team-a"]).of("ValidatingAdmissionPolicy")  # API server without it
    objs = render_with_vap(helm, watchNamespaces=["team-a"], hotVolume={"allowedHostPathPrefix": "/srv/hot/"})
    policy, binding = objs.one("ValidatingAdmissionPolicy"), objs.one("ValidatingAdmissionPolicyBinding")
    assert binding["spec"] == {"policyName": policy["metadata"]["name"], "validationActions": ["Deny"]}
    spec = policy["spec"]
    assert spec["failurePolicy"] == "Fail"
    assert spec["matchConstraints"]["resourceRules"] == [{"apiGroups": [""], "apiVersions": ["v1"],
                                                          "operations": ["CREATE", "UPDATE", "DELETE"],
                                                          "resources": ["pods"]}]
    (condition,) = spec["matchConditions"]
    assert "endsWith(':sparkpoint-driver')" in condition["expression"]
    rules = " ".join(v["expression"] for v in spec["validations"])
    for needle in ("'spark-role'", "r.kind == 'Pod'", "automountServiceAccountToken", "secretKeyRef", "secretRef",
                   "'-spark-auth'", "!has(v.projected)", "startsWith('/srv/hot/')", "variables.jobDir",
                   "object.spec == oldObject.spec", "initContainers"):
        assert needle in rules, needle
    assert not render_with_vap(helm, watchNamespaces=["team-a"], driverAdmissionPolicy={"enabled": False}).of(
        "ValidatingAdmissionPolicy")
    no_prefix = " ".join(v["expression"] for v in render_with_vap(helm, watchNamespaces=["team-a"]).one(
        "ValidatingAdmissionPolicy")["spec"]["validations"])
    assert "(!has(v.hostPath) || false)" in no_prefix  # no prefix: no hostPath at all


def test_ui_and_history_policies_admit_the_operator_and_history_server_by_selector(render) -> None:
    objs = render(watchNamespaces=["team-a"], networkPolicy={"enabled": True, "prometheusNamespaces": ["prom"]},
                  historyServer={"enabled": True, "storeUrl": "s3://ckpt/prod", "secretName": "hs-creds",
                                 "jobs": ["team-a/clicks"]})
    runtime = next(p for p in objs.of("NetworkPolicy", "team-a"))["spec"]
    (ui,) = [rule for rule in runtime["ingress"] if [p["port"] for p in rule["ports"]] == [4040]]
    components = sorted(peer["podSelector"]["matchLabels"]["app.kubernetes.io/component"] for peer in ui["from"])
    assert components == ["history-server", "operator"]
    assert all(peer["namespaceSelector"]["matchLabels"] == {"kubernetes.io/metadata.name": RELEASE_NS}
               for peer in ui["from"])
    history = next(p for p in objs.of("NetworkPolicy", RELEASE_NS) if p["metadata"]["name"].endswith("-history"))
    (peer,) = history["spec"]["ingress"][0]["from"]
    assert peer["podSelector"]["matchLabels"]["app.kubernetes.io/component"] == "operator"


@pytest.mark.parametrize("prefix, arg", [("", None), ("/var/tmp", "--hot-volume-host-path-prefix=/var/tmp")])
def test_host_path_hot_volumes_are_off_unless_a_prefix_is_given(render, prefix, arg) -> None:
    args = operator_container(render(hotVolume={"allowedHostPathPrefix": prefix}))["args"]
    assert [a for a in args if a.startswith("--hot-volume-host-path-prefix")] == ([arg] if arg else [])
