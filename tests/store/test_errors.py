"""Bad inputs give one clear error naming the problem, never a credential, and a non-zero exit."""

from __future__ import annotations

import time

import pytest

from harness.minio_server import free_port
from sparkpoint.runtime.checkpoint import (
    CheckpointWriter,
    GcError,
    RestoreError,
    gc_pass,
    load_manifest,
    restore,
    write_fence,
)
from sparkpoint.runtime.store import (
    BucketNotFoundError,
    ManifestError,
    StoreAuthError,
    StoreError,
    StoreUnreachableError,
    open_store,
)
from sparkpoint.runtime.store.layout import checkpoint_key, objects_prefix
from sparkpoint.runtime.store.retry import with_retries

from .clirun import sparkpoint
from .trees import write_tree

pytestmark = pytest.mark.minio


def _cli_fails(env: dict[str, str], url: str, expect: str) -> None:
    proc = sparkpoint("checkpoints", "list", "--store", url, "--job", "ns/j", env=env, check=False)
    assert proc.returncode == 1
    errors = [line for line in proc.stderr.splitlines() if line.startswith("sparkpoint: error:")]
    assert len(errors) == 1 and expect in errors[0], proc.stderr
    assert env["AWS_SECRET_ACCESS_KEY"] not in proc.stderr + proc.stdout


def test_unreachable_store(minio_server) -> None:  # type: ignore[no-untyped-def]
    env = {**minio_server.env(), "SPARKPOINT_S3_ENDPOINT": f"http://127.0.0.1:{free_port()}"}
    started = time.monotonic()
    with pytest.raises(StoreUnreachableError, match="unreachable"):
        open_store("s3://sparkpoint-test/x", env=env).check()
    assert time.monotonic() - started < 15  # retried with backoff, but bounded
    _cli_fails(env, "s3://sparkpoint-test/x", "unreachable")


def test_wrong_credentials(minio_server) -> None:  # type: ignore[no-untyped-def]
    env = {**minio_server.env(), "AWS_SECRET_ACCESS_KEY": "not-the-secret-0123456789"}
    with pytest.raises(StoreAuthError, match="credentials rejected") as info:
        open_store("s3://sparkpoint-test/x", env=env).check()
    assert "not-the-secret" not in str(info.value)
    _cli_fails(env, "s3://sparkpoint-test/x", "credentials rejected")


def test_missing_bucket(minio_server) -> None:  # type: ignore[no-untyped-def]
    with pytest.raises(BucketNotFoundError, match="'no-such-bucket' does not exist"):
        open_store("s3://no-such-bucket/x", env=minio_server.env()).check()
    _cli_fails(minio_server.env(), "s3://no-such-bucket/x", "does not exist")


def test_missing_endpoint_or_credentials_configuration() -> None:
    with pytest.raises(StoreError, match="SPARKPOINT_S3_ENDPOINT is not set .* nor AWS_REGION or AWS_DEFAULT_REGION"):
        open_store("s3://b/p", env={})
    with pytest.raises(StoreError, match="AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY must be set together"):
        open_store("s3://b/p", env={"SPARKPOINT_S3_ENDPOINT": "http://127.0.0.1:9", "AWS_ACCESS_KEY_ID": "k"})
    with pytest.raises(StoreError, match="AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY must be set"):
        open_store("s3://b/p", env={"SPARKPOINT_S3_ENDPOINT": "http://127.0.0.1:9"}, ambient=False)


def test_corrupt_manifest(store, job, tmp_path) -> None:  # type: ignore[no-untyped-def]
    write_tree(tmp_path / "hot", 3)
    res = CheckpointWriter(store, job, attempt=write_fence(store, job), job_uid="u").take_checkpoint(tmp_path / "hot")
    store.put_bytes(checkpoint_key(job, res.id), b'{"id": "chk-000001", "files": [')
    with pytest.raises(ManifestError, match="corrupt manifest .*chk-000001"):
        load_manifest(store, job, res.id)
    with pytest.raises(RestoreError, match="corrupt manifest"):
        restore(store, job, tmp_path / "out")
    before = list(store.list(objects_prefix(job)))
    with pytest.raises(GcError, match="unreadable"):
        gc_pass(store, job, retain=1, grace_seconds=0)
    assert list(store.list(objects_prefix(job))) == before  # GC deleted nothing it could not account for
    proc = sparkpoint("checkpoints", "show", res.id, "--store", store.url.split(" ")[0], "--job", str(job),
                      check=False)
    assert proc.returncode == 1 and "corrupt manifest" in proc.stderr


def test_transient_errors_are_retried_with_backoff() -> None:
    calls: list[float] = []

    def flaky() -> str:
        calls.append(time.monotonic())
        if len(calls) < 3:
            raise ConnectionError("blip")
        return "ok"
    assert with_retries(flaky, is_transient=lambda e: isinstance(e, ConnectionError), base_delay=0.05) == "ok"
    assert len(calls) == 3
    assert calls[1] - calls[0] >= 0.035 and calls[2] - calls[1] >= 0.07  # exponential backoff
    with pytest.raises(ValueError):
        with_retries(lambda: (_ for _ in ()).throw(ValueError("no")), is_transient=lambda e: False)
