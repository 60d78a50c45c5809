"""The benchmark's StreamingJobs and what they need in their namespace (pure builders)."""

from __future__ import annotations

import base64
from typing import Any

from sparkpoint.runtime.spec import API_GROUP, API_VERSION, KIND, parse_spec

SECRET = "load-store"
BUCKET = "sparkpoint-load"
JOBS_PATH = f"/apis/{API_GROUP}/{API_VERSION}/namespaces/{{namespace}}/streamingjobs"


def job_name(index: int) -> str:
    return f"load-{index:04d}"


def job_spec(interval: str, backoff: str) -> dict[str, Any]:
    """A valid spec whose pod asks for nearly nothing; the GC sidecar is off (there is no runtime to
    collect after). Checkpoints go to the cluster's MinIO (each job under its own prefix), so the
    operator's store reads are real S3 listings."""
    spec = {
        "job": {"entrypoint": "load_bench:build"},
        "spark": {"resources": {"cpu": "1m", "memory": "1Gi"}},  # the spec minimum; the fake node has room
        "checkpoint": {"interval": interval, "storage": {"url": f"s3://{BUCKET}/jobs", "secretRef": {"name": SECRET}}},
        "restart": {"backoff": backoff, "maxBackoff": backoff, "maxRestarts": 1000},
        "gc": {"enabled": False},
    }
    parse_spec(spec)  # fail here, naming the field, rather than as a Failed job
    return spec


def streaming_job(namespace: str, index: int, spec: dict[str, Any]) -> dict[str, Any]:
    return {"apiVersion": f"{API_GROUP}/{API_VERSION}", "kind": KIND,
            "metadata": {"name": job_name(index), "namespace": namespace}, "spec": spec}


def store_secret(namespace: str, endpoint: str, access_key: str, secret_key: str) -> dict[str, Any]:
    def b64(text: str) -> str:
        return base64.b64encode(text.encode()).decode()
    return {"apiVersion": "v1", "kind": "Secret", "metadata": {"name": SECRET, "namespace": namespace},
            "data": {"AWS_ACCESS_KEY_ID": b64(access_key), "AWS_SECRET_ACCESS_KEY": b64(secret_key),
                     "SPARKPOINT_S3_ENDPOINT": b64(endpoint)}}


def namespace_body(name: str) -> dict[str, Any]:
    return {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": name}}
