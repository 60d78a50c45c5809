"""The store side of StreamingJobSavepoint against the real MinIO server: credentials as a Secret
holds them, read/copy/delete of a savepoint's data, and errors that never show a credential."""

from __future__ import annotations

import os
import uuid

import pytest

from sparkpoint.operator.savepoint import store as sps
from sparkpoint.operator.savepoint.model import StorageRef
from sparkpoint.operator.store.view import StoreAccessError, open_job_store, storage_of, store_env
from sparkpoint.runtime.checkpoint import CheckpointWriter, create_savepoint, write_fence
from sparkpoint.runtime.checkpoint.savepoint import list_savepoints
from sparkpoint.runtime.spec import parse_spec
from sparkpoint.runtime.store import CREDENTIAL_KEYS, JobRef
from sparkpoint.runtime.store.layout import objects_prefix, savepoint_root

pytestmark = pytest.mark.minio
BUCKET = "sparkpoint-test"


@pytest.fixture
def storage(minio_server) -> StorageRef:
    """No endpoint in the spec: the Secret's SPARKPOINT_S3_ENDPOINT is used, as in the job's pod."""
    return StorageRef(url=f"s3://{BUCKET}/sp-{uuid.uuid4().hex[:10]}", secret_name="creds")


@pytest.fixture
def job() -> JobRef:
    return JobRef("team-a", f"orders-{uuid.uuid4().hex[:6]}")


def take_checkpoint(store, job: JobRef, tmp_path, files: int = 6) -> None:
    hot = tmp_path / "hot"
    for i in range(files):
        (hot / "state").mkdir(parents=True, exist_ok=True)
        (hot / "state" / f"f{i}.sst").write_bytes(os.urandom(2048 + i))
    CheckpointWriter(store, job, attempt=write_fence(store, job), job_uid="uid-1").take_checkpoint(hot, batch_id=7)


def test_copy_read_delete_round_trip(minio_server, storage, job, tmp_path) -> None:
    store = open_job_store(storage, minio_server.env())  # the Secret as Kube.secret_data decodes it
    take_checkpoint(store, job, tmp_path)
    assert sps.read_stored(store, job, "nightly") is None

    made = sps.copy_latest(store, job, "nightly")
    create_savepoint(store, job, "keep-me")  # another savepoint of the same job must survive
    seen = sps.read_stored(store, job, "nightly")
    assert seen == made and seen.checkpoint == "chk-000001" and seen.size_bytes == sum(2048 + i for i in range(6))

    checkpoint_objects = {i.key for i in store.list(objects_prefix(job))}
    deleted = sps.delete_data(store, job, "nightly")
    assert deleted == 1 + 6  # the manifest and its own copy of each object
    assert sps.read_stored(store, job, "nightly") is None
    assert not list(store.list(savepoint_root(job, "nightly") + "/"))
    assert [m.id for m in list_savepoints(store, job)] == ["keep-me"]
    assert {i.key for i in store.list(objects_prefix(job))} == checkpoint_objects
    assert sps.delete_data(store, job, "nightly") == 1  # idempotent: a retried finalizer is harmless


def test_the_specs_endpoint_wins_over_the_secrets_as_in_the_pod(minio_server, job, tmp_path) -> None:
    """builders gives the pod the spec's endpoint when it has one: the operator must read the same store."""
    env = minio_server.env()
    storage = StorageRef(url=f"s3://{BUCKET}/sp-{uuid.uuid4().hex[:10]}", endpoint=env["SPARKPOINT_S3_ENDPOINT"])
    secret = {k: env[k] for k in CREDENTIAL_KEYS} | {"SPARKPOINT_S3_ENDPOINT": "http://wrong.invalid:1"}
    store = open_job_store(storage, secret)
    take_checkpoint(store, job, tmp_path, files=2)
    assert sps.copy_latest(store, job, "sp").checkpoint == "chk-000001"


def test_the_secrets_keys_are_one_list() -> None:
    """Credentials, endpoint and region: what the pod gets from the Secret, the operator reads too;
    nothing else of the Secret goes anywhere."""
    storage = StorageRef(url="s3://b/p", secret_name="s")
    secret = {"AWS_ACCESS_KEY_ID": "a", "AWS_SECRET_ACCESS_KEY": "b", "AWS_REGION": "eu-west-3",
              "SPARKPOINT_S3_ENDPOINT": "http://e:9000", "unrelated": "x"}
    assert store_env(storage, secret) == {k: v for k, v in secret.items() if k != "unrelated"}


def test_wrong_credentials_fail_clearly_without_showing_them(minio_server, storage, job) -> None:
    store = open_job_store(storage, minio_server.env() | {"AWS_SECRET_ACCESS_KEY": "not-the-password-42"})
    with pytest.raises(StoreAccessError) as err:
        sps.read_stored(store, job, "nightly")
    text = str(err.value)
    assert "savepoints/nightly/manifest.json" in text
    assert "not-the-password-42" not in text and minio_server.env()["AWS_SECRET_ACCESS_KEY"] not in text


def test_missing_credentials_name_the_keys() -> None:
    storage = StorageRef(url="s3://bucket/p", endpoint="http://127.0.0.1:1", secret_name="creds")
    with pytest.raises(StoreAccessError, match="AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY"):
        open_job_store(storage, {})


def test_a_savepoint_remembers_the_jobs_gc_secret_for_deleting_its_data() -> None:
    storage = {"url": "s3://bucket/p", "secretRef": {"name": "rt"}}
    plain = parse_spec({"job": {"entrypoint": "a:b"}, "checkpoint": {"storage": storage}})
    assert storage_of(plain) == StorageRef(url="s3://bucket/p", secret_name="rt")
    split = parse_spec({"job": {"entrypoint": "a:b"}, "checkpoint": {"storage": storage},
                        "gc": {"secretRef": {"name": "gcs"}}})
    assert storage_of(split) == StorageRef(url="s3://bucket/p", secret_name="rt", gc_secret_name="gcs")
