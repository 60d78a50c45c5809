"""`cluster.py up` keeps what examples/streamingjob.yaml needs in place: the bucket and the storage
Secret come back when removed, a stale Secret is corrected, and no credential reaches the output."""

from __future__ import annotations

import base64
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from minio import Minio

LOCAL = Path(__file__).resolve().parents[1]
STATE = Path(os.environ.get("SPARKPOINT_E2E_STATE", LOCAL / ".state"))
sys.path.insert(0, str(LOCAL))
import provision  # noqa: E402


@pytest.fixture(autouse=True)
def only_on_the_local_cluster():
    if Path(os.environ.get("KUBECONFIG", "")).resolve() != (STATE / "kubeconfig").resolve():
        raise RuntimeError(f"these tests need KUBECONFIG={STATE / 'kubeconfig'} (make e2e sets it)")


def cluster_up() -> str:
    result = subprocess.run([sys.executable, str(LOCAL / "cluster.py"), "up"], capture_output=True, text=True,
                            timeout=120, check=True)
    return result.stdout + result.stderr


def test_up_restores_the_bucket_and_the_secret_and_never_prints_credentials(core):
    minio = json.loads((STATE / "minio.json").read_text())
    s3 = Minio(minio["endpoint"].removeprefix("http://"), minio["access_key"], minio["secret_key"], secure=False)
    for obj in s3.list_objects(provision.BUCKET, recursive=True):
        s3.remove_object(provision.BUCKET, obj.object_name)
    s3.remove_bucket(provision.BUCKET)
    core.delete_namespaced_secret(provision.STORAGE_SECRET, provision.NAMESPACE)
    outputs = [cluster_up()]
    assert s3.bucket_exists(provision.BUCKET)
    # MinIO's port can move on a cold start: a stale endpoint is corrected.
    core.patch_namespaced_secret(provision.STORAGE_SECRET, provision.NAMESPACE,
                                 {"stringData": {"SPARKPOINT_S3_ENDPOINT": "http://127.0.0.1:1"}})
    outputs.append(cluster_up())
    secret = core.read_namespaced_secret(provision.STORAGE_SECRET, provision.NAMESPACE)
    assert {k: base64.b64decode(v).decode() for k, v in secret.data.items()} == provision.secret_data(minio)
    outputs.append(cluster_up())  # and nothing changes when nothing needs to
    outcomes = ["created", "updated", "unchanged"]
    assert [next(o for o in outcomes if f'"outcome": "{o}"' in out) for out in outputs] == outcomes
    for out in outputs:
        assert minio["access_key"] not in out and minio["secret_key"] not in out
