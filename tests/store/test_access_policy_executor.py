"""The executor role (issue 42's credential, access_policy.py) against a real MinIO: an executor uploads
objects and staged sink parts and reads what a restore fetches; every other write, every delete,
every listing but objects/ and another job's keys are refused with AccessDenied (each refused key
exists, so a refusal is never a missing key). Not wired into any pod yet: this tests the policy alone."""

from __future__ import annotations

import io
import json
import secrets
import uuid
from collections.abc import Callable
from typing import Any

import pytest
from minio import Minio, MinioAdmin
from minio.credentials import StaticProvider
from minio.error import S3Error

from sparkpoint.runtime.sink.compaction import compactions_prefix
from sparkpoint.runtime.sink.gc_cursor import cursor_key
from sparkpoint.runtime.sink.history import snapshots_prefix
from sparkpoint.runtime.sink.keys import batch_dir_key, commit_key, sink_root
from sparkpoint.runtime.sink.output_gc import _AREAS
from sparkpoint.runtime.store import JobRef, open_store
from sparkpoint.runtime.store.access_policy import EXECUTOR_DENIED_AREAS, job_policy, main
from sparkpoint.runtime.store.layout import (
    attempt_claim_key,
    checkpoint_ids_key,
    checkpoint_key,
    fence_key,
    history_key,
    lineage_record_key,
    object_key,
    objects_prefix,
    pending_key,
    savepoint_manifest_key,
    savepoint_object_key,
)

TEST_BUCKET = "sparkpoint-test"  # the session bucket of tests/conftest.py
JOB, OTHER = JobRef("team-a", "clicks"), JobRef("team-b", "orders")
SIBLING = JobRef("team-a", "clicks-2")  # its root starts with JOB's name: `*` must not reach it
SHA = "ab" + "c" * 62
# Sink paths nested in a staging folder: with `*` matching '/', the staging grant would reach their areas.
NESTED = "a/staging/attempt-1/batch-000000002-r"
NESTED_UPSERT = "q/staging/attempt-1"  # its marker upserts/batch-… holds the grant's `/batch-`


def _part(job: JobRef, path: str, ext: str = ".parquet") -> str:
    return f"{batch_dir_key(job, path, 3, 1, 'r1')}part-00000{ext}"


def _upsert_marker(job: JobRef, path: str) -> str:
    return f"{sink_root(job, path)}/upserts/batch-000000003-a000001.json"


ALLOWED_PUTS = [
    object_key(JOB, SHA),
    _part(JOB, "default"), _part(JOB, "out/agg", ".json"),
    _part(JOB, "objects"), _part(JOB, "staging"),  # sink paths named like the folders of the grants
    _part(JOB, NESTED), _part(JOB, NESTED_UPSERT),  # the nested paths still stage their own parts
]
ALLOWED_READS = [object_key(JOB, SHA), savepoint_object_key(JOB, "sp1", SHA)]
REFUSED_PUTS = [
    checkpoint_key(JOB, "chk-000001"), pending_key(JOB, "chk-000001"), fence_key(JOB),
    attempt_claim_key(JOB, 2), checkpoint_ids_key(JOB), lineage_record_key(JOB, 1, "fresh:x"),
    savepoint_manifest_key(JOB, "sp1"), savepoint_object_key(JOB, "sp1", SHA),
    history_key(JOB, 1, 1, "eventlog_v2_x/events_1_x.zstd"), cursor_key(JOB),
    commit_key(JOB, "default", "chk-000001"), f"{snapshots_prefix(JOB, 'default')}chk-000001.json",
    f"{compactions_prefix(JOB, 'default')}cmp-3-1.json", f"{sink_root(JOB, 'default')}/_delta_log/" + "0" * 20 + ".json",
    _upsert_marker(JOB, "default"), f"{sink_root(JOB, 'default')}/upserts/batch-000000003-a000001-r1/part-00000.parquet",
    f"{sink_root(JOB, 'default')}/staging/attempt-3/compact-cmp-3-1/part-00000.parquet",
    # the wildcard edge cases: areas of sink paths nested in a staging folder
    commit_key(JOB, NESTED, "chk-000001"), f"{snapshots_prefix(JOB, NESTED)}chk-000001.json",
    f"{compactions_prefix(JOB, NESTED)}cmp-3-1.json", f"{sink_root(JOB, NESTED)}/_delta_log/" + "0" * 20 + ".json",
    _upsert_marker(JOB, NESTED), _upsert_marker(JOB, NESTED_UPSERT),
    f"{sink_root(JOB, NESTED_UPSERT)}/upserts/_restores/a000001.json", commit_key(JOB, "objects", "chk-000001"),
    commit_key(JOB, "staging", "chk-000001"), commit_key(JOB, "a/staging", "chk-000001"),
    # another job's keys
    object_key(OTHER, SHA), _part(OTHER, "default"), object_key(SIBLING, SHA), _part(SIBLING, "default"),
]
REFUSED_READS = [
    checkpoint_key(JOB, "chk-000001"), pending_key(JOB, "chk-000001"), fence_key(JOB), attempt_claim_key(JOB, 2),
    savepoint_manifest_key(JOB, "sp1"), savepoint_manifest_key(JOB, "objects"), commit_key(JOB, "default", "chk-000001"),
    _part(JOB, "default"), history_key(JOB, 1, 1, "eventlog_v2_x/events_1_x.zstd"),
    object_key(OTHER, SHA), object_key(SIBLING, SHA), savepoint_object_key(SIBLING, "sp1", SHA),
]
REFUSED_DELETES = [object_key(JOB, SHA), _part(JOB, "default"), pending_key(JOB, "chk-000001"),
                   savepoint_object_key(JOB, "sp1", SHA), object_key(OTHER, SHA)]
REFUSED_LISTINGS = [f"{JOB.root}/", f"{JOB.root}/outputs/", f"{JOB.root}/checkpoints/", f"{JOB.root}/pending/",
                    f"{JOB.root}/savepoints/", objects_prefix(OTHER), objects_prefix(SIBLING), ""]


@pytest.fixture(scope="module")
def executor(minio_server) -> dict[str, Any]:
    """An executor-role user for JOB, and every key of the tables above made by the admin, so that a
    refused read or delete is refused by the policy, not for want of a key."""
    host = minio_server.endpoint.split("://", 1)[1]
    creds = StaticProvider(minio_server.access_key, minio_server.secret_key)
    prefix = f"acl-exec-{uuid.uuid4().hex[:8]}"
    admin = MinioAdmin(endpoint=host, credentials=creds, secure=False)
    admin.policy_add(prefix, policy=job_policy(TEST_BUCKET, prefix, JOB, "executor"))
    access, secret = f"executor{secrets.token_hex(4)}", secrets.token_urlsafe(24)
    admin.user_add(access, secret)
    admin.policy_set(prefix, user=access)
    root = Minio(host, access_key=minio_server.access_key, secret_key=minio_server.secret_key, secure=False)
    for key in {*ALLOWED_READS, *REFUSED_READS, *REFUSED_DELETES, *REFUSED_PUTS}:
        root.put_object(TEST_BUCKET, f"{prefix}/{key}", io.BytesIO(b"seed"), 4)
    return {"prefix": prefix, "root": root, "endpoint": minio_server.endpoint, "access": access, "secret": secret,
            "client": Minio(host, access_key=access, secret_key=secret, secure=False, region="us-east-1")}


def _code(fn: Callable[[], object]) -> str:
    try:
        fn()
    except S3Error as err:
        return err.code
    return "ok"


def _actions(executor: dict[str, Any]) -> dict[str, Callable[[str], Callable[[], object]]]:
    client, prefix = executor["client"], executor["prefix"]
    return {
        "put": lambda key: lambda: client.put_object(TEST_BUCKET, f"{prefix}/{key}", io.BytesIO(b"new"), 3),
        "get": lambda key: lambda: client.get_object(TEST_BUCKET, f"{prefix}/{key}").read(),
        "stat": lambda key: lambda: client.stat_object(TEST_BUCKET, f"{prefix}/{key}"),
        "delete": lambda key: lambda: client.remove_object(TEST_BUCKET, f"{prefix}/{key}"),
        "list": lambda key: lambda: list(client.list_objects(TEST_BUCKET, prefix=f"{prefix}/{key}", recursive=True)),
    }


CASES = [*(("put", k, "ok") for k in ALLOWED_PUTS), *(("get", k, "ok") for k in ALLOWED_READS),
         *(("stat", k, "ok") for k in ALLOWED_READS), ("list", objects_prefix(JOB), "ok"),
         *(("put", k, "AccessDenied") for k in REFUSED_PUTS), *(("get", k, "AccessDenied") for k in REFUSED_READS),
         *(("stat", k, "AccessDenied") for k in REFUSED_READS),
         *(("delete", k, "AccessDenied") for k in REFUSED_DELETES),
         *(("list", k, "AccessDenied") for k in REFUSED_LISTINGS)]


@pytest.mark.minio
def test_the_executor_role_allows_exactly_its_uploads_and_restore_reads(executor):
    actions = _actions(executor)
    expected = {(action, key): code for action, key, code in CASES}
    got = {case: _code(actions[case[0]](case[1])) for case in expected}
    assert {case: code for case, code in got.items() if code != expected[case]} == {}
    for key in REFUSED_PUTS:  # refused puts left the seeded bytes alone
        assert executor["root"].get_object(TEST_BUCKET, f"{executor['prefix']}/{key}").read() == b"seed"


@pytest.mark.minio
def test_the_executor_store_passes_the_writers_check_and_uploads_through_the_store_api(executor, tmp_path):
    env = {"SPARKPOINT_S3_ENDPOINT": executor["endpoint"], "AWS_ACCESS_KEY_ID": executor["access"],
           "AWS_SECRET_ACCESS_KEY": executor["secret"]}
    store = open_store(f"s3://{TEST_BUCKET}/{executor['prefix']}", env=env)
    store.check(writes=True)  # the top-level listing and the conditional-write probe
    digest = "ef" + "0" * 62
    source = tmp_path / "part"
    source.write_bytes(b"state")
    store.put_file(object_key(JOB, digest), str(source))
    store.put_file(_part(JOB, "default", ".json"), str(source))
    assert object_key(JOB, digest) in {info.key for info in store.list(objects_prefix(JOB))}
    assert store.get_bytes(object_key(JOB, digest)) == b"state"


def test_the_executor_policy_document_and_cli(capsys):
    assert main(["s3://ckpt/prod", "team-a/clicks", "--role", "executor"]) == 0
    doc = json.loads(capsys.readouterr().out)
    allowed = [s for s in doc["Statement"] if s["Effect"] == "Allow"]
    assert not [s for s in allowed if "s3:DeleteObject" in s["Action"]]
    assert sorted(r for s in allowed if "s3:PutObject" in s["Action"] for r in s["Resource"]) == [
        "arn:aws:s3:::ckpt/prod/.sparkpoint-check/*", "arn:aws:s3:::ckpt/prod/team-a/clicks/objects/*",
        "arn:aws:s3:::ckpt/prod/team-a/clicks/outputs/*/staging/attempt-*/batch-*"]
    # every area a sink path holds besides staging (output GC's list) is denied below a staging folder
    assert set(EXECUTOR_DENIED_AREAS) == _AREAS - {"staging"}
