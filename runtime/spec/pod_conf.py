"""Spark settings that shape pods (issue 41): Spark's Kubernetes backend applies every
`spark.kubernetes.*` key with the driver's token, so a key could mount a Secret or a host path into
an executor, run it as another ServiceAccount, or relabel it as another job's pod. spec.spark.conf may
set none of them but ALLOWED_POD_CONF, keys that only size or pace the executors Sparkpoint shapes;
the pod template (spec.podTemplate) is the one way to shape pods. The runtime's own
spark.kubernetes.* settings (runtime/spark/executors.py) are not spec.spark.conf.
"""

from __future__ import annotations

from .rules import cel

POD_CONF_PREFIX = "spark.kubernetes."
MAX_CONF_KEYS = 256  # bounds the CEL rule's cost (the API server estimates it from the map's size)

# Each only sizes or paces executors: none names a volume, a secret, an account, a label, an image,
# a node or a scheduler. Sparkpoint's own e2e tests and benchmarks set request.cores.
ALLOWED_POD_CONF = (
    "spark.kubernetes.executor.request.cores",
    "spark.kubernetes.executor.limit.cores",
    "spark.kubernetes.memoryOverheadFactor",
    "spark.kubernetes.local.dirs.tmpfs",
    "spark.kubernetes.allocation.batch.size",
    "spark.kubernetes.allocation.batch.delay",
    "spark.kubernetes.allocation.executor.timeout",
    "spark.kubernetes.executor.apiPollingInterval",
    "spark.kubernetes.executor.eventProcessingInterval",
    "spark.kubernetes.executor.missingPodDetectDelta",
    "spark.kubernetes.executor.deleteOnTermination",
    "spark.kubernetes.dynamicAllocation.deleteGracePeriod",
)

POD_CONF_MESSAGE = (f"{POD_CONF_PREFIX}* keys shape pods and are set by Sparkpoint: shape pods with "
                    "spec.podTemplate (the keys allowed are listed in docs/security.md)")


def _allowed_map() -> str:
    # A map literal: `in` on it costs the same for any key (a list would cost a string compare per entry).
    return "{" + ", ".join(f"'{key}': true" for key in ALLOWED_POD_CONF) + "}"


def _pod_shaping(var: str) -> str:
    return f"{var}.startsWith('{POD_CONF_PREFIX}') && !({var} in {_allowed_map()})"


def pod_conf_rule() -> dict[str, str]:
    """The API server's rule, naming the first refused key (the static message when it cannot)."""
    rule = cel(f"!self.exists(k, {_pod_shaping('k')})", POD_CONF_MESSAGE)
    rule["messageExpression"] = (f"'{POD_CONF_MESSAGE}: ' + self.filter(k, {_pod_shaping('k')})[0]")
    return rule


def refused_pod_conf(conf: dict[str, str]) -> str | None:
    """The model's message for the first refused key (the rule's message, then the key), else None."""
    refused = sorted(k for k in conf if k.startswith(POD_CONF_PREFIX) and k not in ALLOWED_POD_CONF)
    return f"{POD_CONF_MESSAGE}: {refused[0]}" if refused else None
