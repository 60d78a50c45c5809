"""Per-job least-privilege storage (issue 11) against a real MinIO: users made with MinioAdmin and
the policies of access_policy.py. A job's credentials reach its own keys only; the runtime's
credential takes checkpoints (the real writer) but cannot delete checkpoint data; GC's can."""

from __future__ import annotations

import asyncio
import io
import json
import os
import secrets
import time
import uuid

import pytest
from minio import Minio, MinioAdmin
from minio.credentials import StaticProvider
from minio.error import S3Error

from sparkpoint.operator.decisions.finalize import DELETE_DATA_FOR
from sparkpoint.operator.deletion import Draining
from sparkpoint.operator.reconcile import Reconciler
from sparkpoint.runtime.checkpoint import CheckpointWriter, gc_pass, list_checkpoint_ids, write_fence
from sparkpoint.runtime.store import JobRef, open_store
from sparkpoint.runtime.store.access_policy import job_policy, main, split_url, store_history_policy
from sparkpoint.runtime.store.base import StoreAuthError
from sparkpoint.runtime.store.layout import objects_prefix, outputs_prefix

from .trees import change_files, write_tree

TEST_BUCKET = "sparkpoint-test"  # the session bucket of tests/conftest.py

pytestmark = [pytest.mark.minio]
JOB_A, JOB_B = JobRef("team-a", "clicks"), JobRef("team-b", "orders")
JOB_C = JobRef("team-c", "table")  # a delta sink


@pytest.fixture(scope="module")
def users(minio_server):
    """(access key, secret key) per (job, role), each with its own policy."""
    host = minio_server.endpoint.split("://", 1)[1]
    admin = MinioAdmin(endpoint=host, credentials=StaticProvider(minio_server.access_key, minio_server.secret_key),
                       secure=False)
    prefix = f"acl-{uuid.uuid4().hex[:8]}"
    made = {}
    for job, role in ((JOB_A, "runtime"), (JOB_A, "gc"), (JOB_B, "job"), (JOB_C, "runtime"), (JOB_C, "gc"),
                      (JOB_A, "history")):
        name = f"{prefix}-{job.name}-{role}"
        admin.policy_add(name, policy=job_policy(TEST_BUCKET, prefix, job, role))
        access, secret = f"{job.name}{role}{secrets.token_hex(4)}", secrets.token_urlsafe(24)
        admin.user_add(access, secret)
        admin.policy_set(name, user=access)
        made[(job, role)] = (access, secret)
    admin.policy_add(f"{prefix}-history-all", policy=store_history_policy(TEST_BUCKET, prefix))
    access, secret = f"historyall{secrets.token_hex(4)}", secrets.token_urlsafe(24)
    admin.user_add(access, secret)
    admin.policy_set(f"{prefix}-history-all", user=access)
    made[(None, "history-all")] = (access, secret)
    return {"prefix": prefix, "keys": made, "host": host, "endpoint": minio_server.endpoint}


def _env(users, job, role) -> dict[str, str]:
    access, secret = users["keys"][(job, role)]
    return {"SPARKPOINT_S3_ENDPOINT": users["endpoint"], "AWS_ACCESS_KEY_ID": access, "AWS_SECRET_ACCESS_KEY": secret}


def _store(users, job, role):
    return open_store(f"s3://{TEST_BUCKET}/{users['prefix']}", env=_env(users, job, role))


def _client(users, job, role) -> Minio:
    access, secret = users["keys"][(job, role)]
    return Minio(users["host"], access_key=access, secret_key=secret, secure=False, region="us-east-1")


def _denied(fn) -> bool:
    try:
        fn()
    except S3Error as err:
        return err.code == "AccessDenied"
    return False


def test_runtime_checkpoints_and_gc_deletes_with_their_own_credentials(users, tmp_path):
    runtime, gc = _store(users, JOB_A, "runtime"), _store(users, JOB_A, "gc")
    runtime.check(writes=True)  # the runtime's start-up probe, including the conditional write
    paths = write_tree(tmp_path / "hot", 6)
    writer = CheckpointWriter(runtime, JOB_A, attempt=write_fence(runtime, JOB_A), job_uid="uid-a",
                              reuse_window_seconds=0)
    for batch in range(1, 5):  # each drops its own pending marker once committed
        writer.take_checkpoint(tmp_path / "hot", batch_id=batch)
        change_files(paths, 3, seed=batch)
    assert len(list_checkpoint_ids(runtime, JOB_A)) == 4
    gc.check()
    result = gc_pass(gc, JOB_A, retain=1, grace_seconds=0)
    assert len(list_checkpoint_ids(gc, JOB_A)) == 1, result


def test_the_runtime_credential_cannot_delete_checkpoint_data(users):
    client, prefix = _client(users, JOB_A, "runtime"), users["prefix"]
    key = f"{prefix}/{JOB_A.root}/objects/aa/{'a' * 64}"
    client.put_object(TEST_BUCKET, key, io.BytesIO(b"x"), 1)
    assert _denied(lambda: client.remove_object(TEST_BUCKET, key))
    assert _denied(lambda: client.remove_object(TEST_BUCKET, f"{prefix}/{JOB_A.root}/fence.json"))
    assert not _denied(lambda: client.remove_object(TEST_BUCKET, f"{prefix}/{JOB_A.root}/pending/x.json"))
    assert not _denied(lambda: _client(users, JOB_A, "gc").remove_object(TEST_BUCKET, key))
    assert _denied(lambda: _client(users, JOB_A, "gc").put_object(
        TEST_BUCKET, f"{prefix}/{JOB_A.root}/fence.json", io.BytesIO(b"{}"), 2))
    # GC writes only its output cursors: not a commit entry, not a data file beside them
    out = f"{prefix}/{JOB_A.root}/outputs"
    assert not _denied(lambda: _client(users, JOB_A, "gc").put_object(
        TEST_BUCKET, f"{out}/_gc-cursors.json", io.BytesIO(b"{}"), 2))
    for key in (f"{out}/default/_commits/chk-000001.json", f"{out}/default/_gc-cursors.json", f"{out}/_gc-cursors.jsonx"):
        assert _denied(lambda key=key: _client(users, JOB_A, "gc").put_object(TEST_BUCKET, key, io.BytesIO(b"{}"), 2))


def _checkpoints(store, tmp_path, count: int) -> list[str]:
    paths = write_tree(tmp_path / "hot", 4)
    writer = CheckpointWriter(store, JOB_A, attempt=write_fence(store, JOB_A), job_uid="uid-a",
                              reuse_window_seconds=0)
    for batch in range(1, count + 1):
        writer.take_checkpoint(tmp_path / "hot", batch_id=batch)
        change_files(paths, 2, seed=batch)
    return list_checkpoint_ids(store, JOB_A)


def test_a_gc_pass_with_the_runtime_credential_fails_clearly_and_deletes_nothing(users, tmp_path):
    runtime = _store(users, JOB_A, "runtime")
    before = _checkpoints(runtime, tmp_path, 3)
    with pytest.raises(StoreAuthError, match=r"credentials rejected by the store \(AccessDenied\) during delete"):
        gc_pass(runtime, JOB_A, retain=1, grace_seconds=0)
    assert list_checkpoint_ids(runtime, JOB_A) == before


class _JobGone:
    """What finalize asks of Kubernetes once the pods are gone: the job's Secrets, by name."""

    def __init__(self, secrets_by_name: dict[str, dict[str, str]]):
        self.secrets_by_name, self.read, self.patches, self.events = secrets_by_name, [], [], []

    async def job_pods(self, namespace, name):
        return []

    async def secret_data(self, namespace, name):
        self.read.append(name)
        return self.secrets_by_name[name]

    def job_phase(self, namespace, name, phase):  # OperatorMetrics' one call here
        pass

    async def patch_status(self, namespace, name, patch):  # finalize records when a data deletion began
        self.patches.append(patch)

    def event(self, body, type_, reason, message):  # the Reconciler's post_event
        self.events.append((type_, reason, message))


def test_the_operator_deletes_a_jobs_checkpoints_with_the_gc_secret(users, tmp_path):
    """gc.onDelete=delete with a runtime-role storage Secret: the operator's deletion succeeds only
    because it uses spec.gc.secretRef (with the storage Secret it is refused: the first case)."""
    creds = {name: dict(zip(("AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY"), users["keys"][(JOB_A, role)],
                            strict=True)) for name, role in (("rt", "runtime"), ("gcs", "gc"))}
    storage = {"url": f"s3://{TEST_BUCKET}/{users['prefix']}", "endpoint": users["endpoint"],
               "secretRef": {"name": "rt"}}
    body = {"metadata": {"namespace": JOB_A.namespace, "name": JOB_A.name},
            "spec": {"job": {"entrypoint": "a:b"}, "checkpoint": {"storage": storage},
                     "gc": {"onDelete": "delete"}}}
    assert _checkpoints(_store(users, JOB_A, "runtime"), tmp_path, 2)
    entry = f"{outputs_prefix(JOB_A)}default/_commits/chk-000001.json"  # the sink's output goes too
    _store(users, JOB_A, "runtime").put_bytes(entry, b"{}")
    kube = _JobGone(creds)
    with pytest.raises(Draining, match="StoreAuthError"):  # refused: retried (the Secret may be fixed)...
        asyncio.run(Reconciler(kube, None, kube, kube.event).finalize(body))
    assert _store(users, JOB_A, "gc").exists(entry)
    (since,) = [p["tracking"]["deleteDataSince"] for p in kube.patches]
    body["status"] = {"tracking": {"deleteDataSince": since - DELETE_DATA_FOR - 1}}
    asyncio.run(Reconciler(kube, None, kube, kube.event).finalize(body))  # ...then given up, and said so
    assert [e[1] for e in kube.events] == ["DataNotDeleted"] and "left in s3://" in kube.events[0][2]
    assert _store(users, JOB_A, "gc").exists(entry)
    del body["status"]
    body["spec"]["gc"]["secretRef"] = {"name": "gcs"}
    kube = _JobGone(creds)
    asyncio.run(Reconciler(kube, None, kube, None).finalize(body))
    assert kube.read == ["gcs"]
    assert list_checkpoint_ids(_store(users, JOB_A, "gc"), JOB_A) == []
    assert not list(_store(users, JOB_A, "gc").list(outputs_prefix(JOB_A)))


def test_a_job_cannot_read_or_write_another_jobs_prefix(users, tmp_path):
    prefix = users["prefix"]
    b_store = _store(users, JOB_B, "job")
    b_store.check(writes=True)
    b_key = f"{prefix}/{JOB_B.root}/fence.json"
    write_fence(b_store, JOB_B)
    for role in ("runtime", "gc"):
        a = _client(users, JOB_A, role)
        assert _denied(lambda a=a: a.get_object(TEST_BUCKET, b_key))
        assert _denied(lambda a=a: a.stat_object(TEST_BUCKET, b_key))
        assert _denied(lambda a=a: a.put_object(TEST_BUCKET, f"{prefix}/{JOB_B.root}/x", io.BytesIO(b"x"), 1))
        assert _denied(lambda a=a: a.remove_object(TEST_BUCKET, b_key))
        assert _denied(lambda a=a: list(a.list_objects(TEST_BUCKET, prefix=f"{prefix}/{JOB_B.root}/",
                                                       recursive=True)))
        assert _denied(lambda a=a: list(a.list_objects(TEST_BUCKET, prefix=f"{prefix}/", recursive=True)))
        # nor anything outside the store's prefix
        assert _denied(lambda a=a: a.put_object(TEST_BUCKET, "elsewhere/x", io.BytesIO(b"x"), 1))
    # The job's own store API (what the runtime and the operator use) fails the same way.
    a_store = _store(users, JOB_A, "runtime")
    assert _denied(lambda: a_store.client.get_object(TEST_BUCKET, b_key))
    a_store.put_bytes(f"{objects_prefix(JOB_A)}aa/{'b' * 64}", b"x")
    assert list(a_store.list(objects_prefix(JOB_A)))  # its own keys are listed
    with pytest.raises(Exception, match="(?i)denied"):
        list(a_store.list(objects_prefix(JOB_B)))


def test_the_history_credential_mirrors_event_logs_and_reads_nothing_else(users, tmp_path):
    """The chart's History Server sidecar (`sparkpoint history sync`) with the `history` role."""
    from sparkpoint.runtime.service.history_sync import HistoryMirror
    from sparkpoint.runtime.store.layout import history_key

    prefix = users["prefix"]
    runtime = _store(users, JOB_A, "runtime")
    log_key = history_key(JOB_A, 1, 1, "eventlog_v2_local-1/events_1_local-1.zstd")
    runtime.put_bytes(log_key, b"events")
    runtime.put_bytes(history_key(JOB_A, 1, 1, "eventlog_v2_local-1/appstatus_local-1"), b"")
    result = HistoryMirror(_store(users, JOB_A, "history"), [JOB_A], tmp_path / "logs").sync()
    assert result.applications == 1 and result.downloaded == 2 and not result.errors
    reader = _client(users, JOB_A, "history")
    assert _denied(lambda: reader.get_object(TEST_BUCKET, f"{prefix}/{JOB_A.root}/fence.json"))
    assert _denied(lambda: list(reader.list_objects(TEST_BUCKET, prefix=f"{prefix}/{JOB_A.root}/objects/",
                                                    recursive=True)))
    assert _denied(lambda: reader.put_object(TEST_BUCKET, f"{prefix}/{log_key}", io.BytesIO(b"x"), 1))
    assert _denied(lambda: reader.remove_object(TEST_BUCKET, f"{prefix}/{log_key}"))
    assert _denied(lambda: list(reader.list_objects(TEST_BUCKET, prefix=f"{prefix}/{JOB_B.root}/history/",
                                                    recursive=True)))
    # Another job's logs are named in the result, not raised: the mirror goes on with the others.
    other = HistoryMirror(_store(users, JOB_A, "history"), [JOB_B, JOB_A], tmp_path / "logs2").sync()
    assert other.applications == 1 and len(other.errors) == 1 and "team-b/orders" in other.errors[0]


def test_the_store_wide_history_credential_finds_every_jobs_logs_and_reads_nothing_else(users, tmp_path):
    """`sparkpoint history sync` without --job (the chart's historyServer.jobs empty) with the
    credential of store_history_policy: it discovers the jobs by delimiter listings."""
    from sparkpoint.runtime.service.history_sync import HistoryMirror
    from sparkpoint.runtime.store.layout import history_key

    prefix = users["prefix"]
    for job in (JOB_A, JOB_B):
        writer = _store(users, job, "runtime" if job == JOB_A else "job")
        writer.put_bytes(history_key(job, 1, 1, "eventlog_v2_local-1/events_1_local-1.zstd"), b"events")
        writer.put_bytes(f"{job.root}/fence.json", b"{}")
    reader_store = _store(users, None, "history-all")
    result = HistoryMirror(reader_store, None, tmp_path / "logs").sync()
    assert not result.errors and result.applications == 2  # (the other test may have put JOB_A's marker too)
    assert {p.name.split("_")[3] for p in (tmp_path / "logs").iterdir()} == {JOB_A.name, JOB_B.name}
    assert {JOB_A.namespace, JOB_B.namespace} <= set(reader_store.list_children(""))
    reader = _client(users, None, "history-all")
    assert _denied(lambda: reader.get_object(TEST_BUCKET, f"{prefix}/{JOB_A.root}/fence.json"))
    assert _denied(lambda: list(reader.list_objects(TEST_BUCKET, prefix=f"{prefix}/{JOB_A.root}/",
                                                    recursive=True)))
    assert _denied(lambda: list(reader.list_objects(TEST_BUCKET, prefix=f"{prefix}/{JOB_B.root}/objects/",
                                                    recursive=True)))
    log_key = history_key(JOB_B, 1, 1, "eventlog_v2_local-1/events_1_local-1.zstd")
    assert _denied(lambda: reader.put_object(TEST_BUCKET, f"{prefix}/{log_key}", io.BytesIO(b"x"), 1))
    assert _denied(lambda: reader.remove_object(TEST_BUCKET, f"{prefix}/{log_key}"))


def test_policy_document_shape_and_cli(capsys):
    with pytest.raises(ValueError, match="role"):
        job_policy("b", "p", JOB_A, "admin")
    assert split_url("s3://bucket/a/b/") == ("bucket", "a/b")
    assert main(["s3://ckpt/prod", "team-a/clicks", "--role", "gc"]) == 0
    doc = json.loads(capsys.readouterr().out)
    resources = {r for s in doc["Statement"] for r in s["Resource"]}
    assert "arn:aws:s3:::ckpt/prod/team-a/clicks/*" in resources
    # its only writes: output GC's cursors
    assert [r for s in doc["Statement"] if "s3:PutObject" in s["Action"] for r in s["Resource"]] == [
        "arn:aws:s3:::ckpt/prod/team-a/clicks/outputs/_gc-cursors.json"]


def test_the_gc_credential_vacuums_a_delta_table_which_delta_rs_vacuum_cannot(users, tmp_path, monkeypatch):
    """The sidecar's pass reads the table and deletes with GC's credential; delta-rs's own vacuum
    would also have to write its VACUUM commits to the log, which that credential may not."""
    from deltalake import DeltaTable

    from sparkpoint.runtime.sink.delta import DeltaSink
    from sparkpoint.runtime.sink.journal import SinkJournal
    from sparkpoint.runtime.sink.output_gc import output_gc_pass
    from tests.runtime.test_sink import FakeBatch, fake_write_files

    runtime, gc = _store(users, JOB_C, "runtime"), _store(users, JOB_C, "gc")

    def attempt(pod: str) -> DeltaSink:
        return DeltaSink(runtime, JOB_C, attempt=write_fence(runtime, JOB_C), path="default", incarnation="uid-c",
                         journal=SinkJournal(tmp_path / pod), write_files=fake_write_files)

    sink = attempt("pod-1")
    sink.resume(None, None)
    extras = []
    for batch, cid in enumerate(["chk-000001", "chk-000002"]):
        sink.write_batch(FakeBatch([{"v": batch}]), batch)
        extras.append(sink.manifest_extra(batch))
        sink.upload_staged(extras[-1])
        sink.publish(cid, extras[-1])
    attempt("pod-2").resume("chk-000001", extras[0])  # the table drops chk-2's file
    for key, value in _env(users, JOB_C, "gc").items():
        monkeypatch.setenv(key, value)  # the sidecar's environment
    later = lambda: time.time() + 5  # noqa: E731
    kept = output_gc_pass(gc, JOB_C, grace_seconds=0, clock=later, delta_retention_seconds=3600)
    assert kept.kept_for_table == 1 and kept.deleted_files == 0 and not kept.skipped_paths
    table = DeltaTable(sink.location.uri, storage_options={**sink.location.storage_options,
                                                           "AWS_ACCESS_KEY_ID": os.environ["AWS_ACCESS_KEY_ID"],
                                                           "AWS_SECRET_ACCESS_KEY": os.environ["AWS_SECRET_ACCESS_KEY"]})
    # delta-rs's error types vary by version; the write refused is its VACUUM START commit
    with pytest.raises(Exception, match=r"privileges .*_delta_log/0+3\.json"):  # noqa: B017
        table.vacuum(retention_hours=0, enforce_retention_duration=False, dry_run=False)
    gone = output_gc_pass(gc, JOB_C, grace_seconds=0, clock=later, delta_retention_seconds=0)
    assert gone.deleted_files == 1  # chk-2's file: still there after the refused vacuum, collected now
    current = DeltaTable(sink.location.uri, storage_options=sink.location.storage_options)
    assert current.to_pyarrow_table().column("v").to_pylist() == [0]
