"""What examples/streamingjob.yaml needs on the local cluster, provisioned by `cluster.py up`:
the bucket on the cluster's MinIO and, in the default namespace, the Secret that holds MinIO's
credentials and endpoint. Idempotent: an existing bucket is kept, a Secret that differs (MinIO's
port may move on a cold start) is replaced. Credentials are never logged or printed.
Talks to the API server with the admin certificate over urllib, as cluster.py does (no client
library to import on every `up`).
"""

from __future__ import annotations

import base64
import json
import logging
import ssl
import urllib.error
import urllib.request
from collections.abc import Callable
from urllib.parse import urlparse

log = logging.getLogger("cluster")
BUCKET = "sparkpoint"
STORAGE_SECRET = "sparkpoint-storage"
NAMESPACE = "default"
Api = Callable[[str, str, dict | None], tuple[int, dict]]


def secret_data(minio: dict[str, str]) -> dict[str, str]:
    """The storage Secret's keys, as operator/kube/builders.py passes them to a job's containers."""
    return {"AWS_ACCESS_KEY_ID": minio["access_key"], "AWS_SECRET_ACCESS_KEY": minio["secret_key"],
            "SPARKPOINT_S3_ENDPOINT": minio["endpoint"]}


def ensure_bucket(minio: dict[str, str], bucket: str = BUCKET) -> None:
    from minio import Minio  # imported here: only `up` needs it

    endpoint = urlparse(minio["endpoint"])
    s3 = Minio(endpoint.netloc, minio["access_key"], minio["secret_key"], secure=endpoint.scheme == "https")
    if not s3.bucket_exists(bucket):
        s3.make_bucket(bucket)
    log.info("bucket ready", extra={"bucket": bucket})


def ensure_secret(api: Api, data: dict[str, str], name: str = STORAGE_SECRET, namespace: str = NAMESPACE) -> str:
    """Creates or replaces the Secret; returns what it did (created, updated, unchanged)."""
    path = f"/api/v1/namespaces/{namespace}/secrets"
    body = {"apiVersion": "v1", "kind": "Secret", "type": "Opaque",
            "metadata": {"name": name, "labels": {"app.kubernetes.io/managed-by": "sparkpoint-cluster-up"}},
            "data": {k: base64.b64encode(v.encode()).decode() for k, v in data.items()}}
    status, existing = api("GET", f"{path}/{name}", None)
    if status == 404:
        outcome, (status, reply) = "created", api("POST", path, body)
    elif status == 200 and existing.get("data") == body["data"]:
        return "unchanged"
    elif status == 200:
        body["metadata"]["resourceVersion"] = existing["metadata"]["resourceVersion"]
        outcome, (status, reply) = "updated", api("PUT", f"{path}/{name}", body)
    else:
        outcome, reply = "read", existing
    if status not in (200, 201):
        # The API server's Status message (never the body we sent, which holds the credentials).
        raise SystemExit(f"could not provision Secret {namespace}/{name} ({outcome}): HTTP {status} "
                         f"{reply.get('message', '')}")
    return outcome


def admin_api(server_url: str, pki_dir) -> Api:
    context = ssl.create_default_context(cafile=str(pki_dir / "ca.crt"))
    context.load_cert_chain(str(pki_dir / "admin.crt"), str(pki_dir / "admin.key"))

    def call(method: str, path: str, body: dict | None) -> tuple[int, dict]:
        request = urllib.request.Request(server_url + path, method=method,
                                         data=json.dumps(body).encode() if body is not None else None,
                                         headers={"Content-Type": "application/json"})
        try:
            with urllib.request.urlopen(request, context=context, timeout=10) as response:
                return response.status, json.loads(response.read() or b"{}")
        except urllib.error.HTTPError as error:
            return error.code, json.loads(error.read() or b"{}")
    return call


def provision(api: Api, minio: dict[str, str]) -> None:
    ensure_bucket(minio)
    outcome = ensure_secret(api, secret_data(minio))
    log.info("storage secret ready", extra={"secret": f"{NAMESPACE}/{STORAGE_SECRET}", "outcome": outcome})
