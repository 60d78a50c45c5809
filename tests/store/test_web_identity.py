"""The store with no static keys, as a pod with a projected service-account token runs it (IRSA's
AWS_WEB_IDENTITY_TOKEN_FILE + AWS_ROLE_ARN): credentials from a real STS, MinIO's
AssumeRoleWithWebIdentity, trusting an OpenID issuer the test runs (harness/oidc_issuer.py).

Nothing is mocked: MinIO fetches the issuer's discovery document and keys, checks the token's
signature and audience, and hands out temporary keys that expire. STS's shortest life (900 s) is
too long to wait for, so the refresh test moves the provider's clock past its refresh point instead:
a new AssumeRoleWithWebIdentity call must then happen, with new keys that keep the store working.
"""

from __future__ import annotations

from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest

from harness.minio_server import MinioServer
from harness.oidc_issuer import OidcIssuer, minio_role_arn
from harness.polling import wait_until
from sparkpoint.runtime.checkpoint import CheckpointWriter, restore, write_fence
from sparkpoint.runtime.store import JobRef, StoreAuthError, open_store
from sparkpoint.runtime.store.credentials import RefreshingProvider

from .trees import tree_digest, write_tree

pytestmark = pytest.mark.minio
CLIENT_ID = "sparkpoint-store"  # the token's audience, as a projected token's `audience` names it
BUCKET = "web-identity"


@pytest.fixture(scope="module")
def sts(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[OidcIssuer, MinioServer]]:
    with OidcIssuer() as issuer:
        server = MinioServer(extra_env=issuer.minio_env(client_id=CLIENT_ID, role_policy="readwrite"))
        with server:
            server.make_bucket(BUCKET)  # with the root keys: the job's role may only read and write
            # MinIO answers "ready" before its IAM has loaded the role ("RoleARN ... is not defined").
            wait_until(lambda: _sts_answers(issuer, server, tmp_path_factory.mktemp("probe")), 30,
                       "MinIO's STS to know the OpenID role", interval=0.2)
            yield issuer, server


def _sts_answers(issuer: OidcIssuer, server: MinioServer, tmp_path: Path) -> bool:
    try:
        open_store(f"s3://{BUCKET}", env=_pod_env(issuer, server, tmp_path)).credentials.retrieve()  # type: ignore[attr-defined]
        return True
    except StoreAuthError:
        return False


def _pod_env(issuer: OidcIssuer, server: MinioServer, tmp_path: Path, audience: str = CLIENT_ID) -> dict[str, str]:
    """What a pod with a projected token and no storage Secret has in its environment."""
    token_file = tmp_path / "token"
    token_file.write_text(issuer.token(subject="system:serviceaccount:team-a:job", audience=audience))
    return {"SPARKPOINT_S3_ENDPOINT": server.endpoint, "AWS_REGION": "us-east-1",
            "AWS_WEB_IDENTITY_TOKEN_FILE": str(token_file), "AWS_ROLE_ARN": minio_role_arn(CLIENT_ID),
            "AWS_ENDPOINT_URL_STS": server.endpoint}


def test_a_checkpoint_is_written_and_restored_with_web_identity_only(sts, tmp_path, job: JobRef) -> None:
    issuer, server = sts
    env = _pod_env(issuer, server, tmp_path)
    store = open_store(f"s3://{BUCKET}/irsa", env=env)
    store.check(writes=True)
    write_tree(tmp_path / "hot", 6)
    CheckpointWriter(store, job, attempt=write_fence(store, job), job_uid="u",
                     reuse_window_seconds=0).take_checkpoint(tmp_path / "hot", batch_id=1)
    restore(store, job, tmp_path / "restored")
    assert tree_digest(tmp_path / "restored") == tree_digest(tmp_path / "hot")
    creds = store.credentials.retrieve()  # type: ignore[attr-defined]
    assert creds.session_token and creds.expiration is not None  # temporary keys, not the root's
    assert creds.access_key != server.access_key


def test_temporary_keys_are_refreshed_before_they_expire(sts, tmp_path, job: JobRef) -> None:
    issuer, server = sts
    env = {**_pod_env(issuer, server, tmp_path), "SPARKPOINT_STS_DURATION_SECONDS": "900"}  # STS's minimum
    store = open_store(f"s3://{BUCKET}/refresh", env=env)
    provider = store.credentials  # type: ignore[attr-defined]
    assert isinstance(provider, RefreshingProvider)
    store.put_bytes("a", b"first")
    first = provider.retrieve()
    assert provider.fetches == 1  # the puts above reused the keys
    life = (first.expiration - datetime.now(UTC).replace(tzinfo=None)).total_seconds()
    assert 800 < life <= 900  # the STS honoured the duration asked for
    real_clock = provider.clock
    # Time moves to just before the refresh point: the same keys; then just past it: one new
    # AssumeRoleWithWebIdentity call, whose keys (an hour long, from STS's own clock) then serve.
    provider.clock = lambda: first.expiration - provider.margin - timedelta(seconds=1)
    store.put_bytes("b", b"second")
    assert provider.fetches == 1
    provider.clock = lambda: first.expiration - provider.margin + timedelta(seconds=1)
    store.put_bytes("c", b"third")  # one request: one retrieve
    assert provider.fetches == 2
    provider.clock = real_clock
    second = provider.retrieve()
    assert provider.fetches == 2 and second.access_key != first.access_key and second.session_token
    assert [store.get_bytes(k) for k in ("a", "b", "c")] == [b"first", b"second", b"third"]


def test_a_token_for_another_audience_is_refused_without_showing_it(sts, tmp_path) -> None:
    issuer, server = sts
    env = _pod_env(issuer, server, tmp_path, audience="someone-else")
    store = open_store(f"s3://{BUCKET}/refused", env=env)
    with pytest.raises(StoreAuthError, match="web-identity") as err:
        store.check()
    token = Path(env["AWS_WEB_IDENTITY_TOKEN_FILE"]).read_text()
    assert token not in str(err.value) and token[:40] not in str(err.value)


def test_the_delta_sink_gets_the_temporary_keys_with_their_session_token(sts, tmp_path) -> None:
    import pyarrow as pa
    from deltalake import DeltaTable, write_deltalake

    from sparkpoint.runtime.sink.delta_table import delta_location

    issuer, server = sts
    store = open_store(f"s3://{BUCKET}/delta", env=_pod_env(issuer, server, tmp_path))
    loc = delta_location(store, "ns/job/outputs/default")
    assert "AWS_SESSION_TOKEN" in loc.storage_options
    write_deltalake(loc.uri, pa.table({"x": [1, 2, 3]}), storage_options=loc.storage_options)
    provider = store.credentials  # type: ignore[attr-defined]
    first = provider.retrieve()
    provider.clock = lambda: first.expiration  # past the refresh point: delta-rs gets new keys
    options = loc.storage_options
    provider.clock = lambda: first.expiration - provider.margin - timedelta(seconds=1)
    assert options["AWS_ACCESS_KEY_ID"] != first.access_key
    assert sorted(DeltaTable(loc.uri, storage_options=options).to_pyarrow_table().column("x").to_pylist()) == [1, 2, 3]
