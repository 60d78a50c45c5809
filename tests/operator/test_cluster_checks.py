"""The operator's startup warnings where the cluster cannot enforce a tenant-isolation promise (issue 41)."""

from __future__ import annotations

from sparkpoint.operator.kube import cluster_checks


def test_a_cluster_without_validating_admission_policies_is_warned_about() -> None:
    for served in (None, {"validatingwebhookconfigurations", "mutatingwebhookconfigurations"}):
        found = cluster_checks.warnings(served)
        assert cluster_checks.NO_VAP in found and "ValidatingAdmissionPolicy" in found[0]
    assert cluster_checks.NO_VAP not in cluster_checks.warnings({"validatingadmissionpolicies",
                                                                 "validatingadmissionpolicybindings"})


def test_network_policy_enforcement_is_always_named_since_discovery_cannot_tell() -> None:
    assert cluster_checks.warnings({"validatingadmissionpolicies"}) == [cluster_checks.POLICY_ENGINE]
