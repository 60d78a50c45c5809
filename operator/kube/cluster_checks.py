"""What the cluster must have for the tenant-isolation promises (docs/security.md) that Kubernetes
itself enforces, checked once at startup through API discovery; the operator warns where it lacks
them (it runs on, as before). Pure but for `discover`.

A NetworkPolicy is accepted by every API server but enforced only by a network plugin that
implements it, which discovery cannot tell: that warning is logged whenever jobs use policies
and says what to check.
"""

from __future__ import annotations

import asyncio
from typing import Any

VAP_RESOURCE = "validatingadmissionpolicies"

NO_VAP = ("the API server serves no admissionregistration.k8s.io/v1 ValidatingAdmissionPolicy (Kubernetes "
          "1.30+): the chart's driver admission policy is not installed, so a spark.master k8s driver's account "
          "may create any pod its Role allows in its namespace (docs/security.md, 'What a cluster must have')")
POLICY_ENGINE = ("NetworkPolicies (the chart's and each spark.master k8s job's) hold only where the cluster's "
                 "network plugin enforces them; discovery cannot tell (docs/security.md)")


def warnings(admission_resources: set[str] | None) -> list[str]:
    """admission_resources: the resource names admissionregistration.k8s.io/v1 serves; None when
    the group version is not served at all."""
    found = [] if admission_resources is None or VAP_RESOURCE not in admission_resources else [VAP_RESOURCE]
    return ([] if found else [NO_VAP]) + [POLICY_ENGINE]


async def discover(api: Any) -> set[str] | None:
    """The resources of admissionregistration.k8s.io/v1 (discovery is open to every account)."""
    from kubernetes import client
    from kubernetes.client.rest import ApiException

    def call() -> set[str] | None:
        try:
            answer = client.AdmissionregistrationV1Api(api).get_api_resources()
        except ApiException as exc:
            if exc.status == 404:
                return None
            raise
        return {r.name for r in answer.resources or []}
    return await asyncio.to_thread(call)
