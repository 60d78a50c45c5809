"""Per-job objects that keep a `spark.master: k8s` job's Spark to itself (issue 41; docs/security.md):
its spark.authenticate secret (a Secret owned by the job, mounted only into its driver, which mounts
it into its executors; never in a ConfigMap or an env value) and NetworkPolicies that admit only the
job's own executors to its driver's Spark ports and only its driver and executors to its executors.
Pure, like builders.py: reconcile creates them once per job (an existing one is kept).
"""

from __future__ import annotations

import secrets
from typing import Any

from sparkpoint.runtime.spec import API_GROUP, JobSpec

from .builders import BLOCK_MANAGER_PORT, DRIVER_PORT, JobRef, labels

# The runtime reads these (runtime/spark/executors.py, which the operator may not import; a test
# keeps them equal).
SPARK_AUTH_SECRET_ENV = "SPARKPOINT_SPARK_AUTH_SECRET"
SPARK_AUTH_DIR = "/var/run/sparkpoint/spark-auth"
SPARK_AUTH_KEY = "secret"


def spark_auth_secret_name(job: JobRef) -> str:
    return f"{job.name}-spark-auth"


def new_spark_secret() -> str:
    return secrets.token_urlsafe(32)


def _meta(job: JobRef, name: str, component: str) -> dict[str, Any]:
    return {"name": name, "namespace": job.namespace, "labels": labels(job, component),
            "ownerReferences": [job.owner_reference]}


def build_spark_auth_secret(job: JobRef, secret: str) -> dict[str, Any]:
    return {"apiVersion": "v1", "kind": "Secret", "type": "Opaque",
            "metadata": _meta(job, spark_auth_secret_name(job), "runtime"), "stringData": {SPARK_AUTH_KEY: secret}}


def with_spark_auth(pod: dict[str, Any], job: JobRef) -> dict[str, Any]:
    """The driver pod with the job's spark.authenticate Secret mounted in its runtime container only
    (the GC sidecar needs none) and its name in the env, for the executors' pod template."""
    spec = pod["spec"]
    spec["volumes"].append({"name": "spark-auth", "secret": {"secretName": spark_auth_secret_name(job),
                                                             "defaultMode": 0o440}})
    runtime = next(c for c in spec["containers"] if c["name"] == "runtime")
    runtime["volumeMounts"].append({"name": "spark-auth", "mountPath": SPARK_AUTH_DIR, "readOnly": True})
    runtime["env"].append({"name": SPARK_AUTH_SECRET_ENV, "value": spark_auth_secret_name(job)})
    return pod


def _job_pods(job: JobRef, component: str) -> dict[str, Any]:
    return {"matchLabels": {"app.kubernetes.io/name": "sparkpoint", f"{API_GROUP}/job": job.name,
                            "app.kubernetes.io/component": component}}


def build_network_policies(job: JobRef) -> list[dict[str, Any]]:
    """Two policies, added to the chart's (policies only add what they admit): the driver's Spark
    ports admit this job's executors, and the executors (every port: Spark picks their RPC and
    shuffle ports) admit only this job's driver and executors. A pod in the namespace could still
    copy the job's labels; spark.authenticate refuses it."""
    executors, driver = _job_pods(job, "executor"), _job_pods(job, "runtime")
    return [
        {"apiVersion": "networking.k8s.io/v1", "kind": "NetworkPolicy",
         "metadata": _meta(job, f"{job.name}-spark-driver", "runtime"),
         "spec": {"podSelector": driver, "policyTypes": ["Ingress"],
                  "ingress": [{"from": [{"podSelector": executors}],
                               "ports": [{"protocol": "TCP", "port": DRIVER_PORT},
                                         {"protocol": "TCP", "port": BLOCK_MANAGER_PORT}]}]}},
        {"apiVersion": "networking.k8s.io/v1", "kind": "NetworkPolicy",
         "metadata": _meta(job, f"{job.name}-spark-executors", "executor"),
         "spec": {"podSelector": executors, "policyTypes": ["Ingress"],
                  "ingress": [{"from": [{"podSelector": driver}, {"podSelector": executors}]}]}},
    ]


def driver_objects(job: JobRef, spec: JobSpec) -> list[dict[str, Any]]:
    """What a spark.master k8s job needs before its driver pod: its Spark secret and its policies."""
    if spec.spark.master != "k8s":
        return []
    return [build_spark_auth_secret(job, new_spark_secret()), *build_network_policies(job)]
