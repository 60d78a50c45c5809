"""What examples/streamingjob.yaml needs on the local cluster, provisioned by `cluster.py up`:
the bucket on the cluster's MinIO and, in the default namespace, the Secret that holds MinIO's
credentials and endpoint. Idempotent: an existing bucket is kept, a Secret that differs (MinIO's
port may move on a cold start) is replaced. Credentials are never logged or printed.
"""

from __future__ import annotations

import base64
import logging

from kubernetes import client, config
from kubernetes.client.rest import ApiException

from sparkpoint.runtime.store.s3 import S3Store

log = logging.getLogger("cluster")
BUCKET = "sparkpoint"
STORAGE_SECRET = "sparkpoint-storage"
NAMESPACE = "default"


def secret_data(minio: dict[str, str]) -> dict[str, str]:
    """The storage Secret's keys, as operator/builders.py passes them to a job's containers."""
    return {"AWS_ACCESS_KEY_ID": minio["access_key"], "AWS_SECRET_ACCESS_KEY": minio["secret_key"],
            "SPARKPOINT_S3_ENDPOINT": minio["endpoint"]}


def ensure_bucket(minio: dict[str, str], bucket: str = BUCKET) -> None:
    S3Store(minio["endpoint"], bucket, "", minio["access_key"], minio["secret_key"]).create_bucket()
    log.info("bucket ready", extra={"bucket": bucket})


def ensure_secret(core: client.CoreV1Api, data: dict[str, str], name: str = STORAGE_SECRET,
                  namespace: str = NAMESPACE) -> str:
    """Creates or updates the Secret; returns what it did (created, updated, unchanged)."""
    body = client.V1Secret(
        metadata=client.V1ObjectMeta(name=name, labels={"app.kubernetes.io/managed-by": "sparkpoint-cluster-up"}),
        type="Opaque", string_data=data)
    try:
        existing = core.read_namespaced_secret(name, namespace)
    except ApiException as error:
        if error.status != 404:
            raise
        core.create_namespaced_secret(namespace, body)
        return "created"
    current = {k: base64.b64decode(v).decode() for k, v in (existing.data or {}).items()}
    if current == data:
        return "unchanged"
    body.metadata.resource_version = existing.metadata.resource_version
    core.replace_namespaced_secret(name, namespace, body)
    return "updated"


def provision(kubeconfig: str, minio: dict[str, str]) -> None:
    ensure_bucket(minio)
    core = client.CoreV1Api(config.new_client_from_config(config_file=kubeconfig))
    outcome = ensure_secret(core, secret_data(minio))
    log.info("storage secret ready", extra={"secret": f"{NAMESPACE}/{STORAGE_SECRET}", "outcome": outcome})
