"""Which credentials the S3 store signs with, and when temporary ones are fetched again (pure: the
sources are fakes here; tests/store/test_web_identity.py runs the web identity source against a
real STS)."""

from __future__ import annotations

from datetime import datetime, timedelta

import pytest
from minio.credentials import Credentials, StaticProvider

from sparkpoint.runtime.sink.delta_table import delta_location
from sparkpoint.runtime.store import StoreAuthError, StoreError, open_store
from sparkpoint.runtime.store.credentials import RefreshingProvider, _sts_endpoint, credential_source

T0 = datetime(2026, 1, 1, 12, 0, 0)
ENDPOINT = {"SPARKPOINT_S3_ENDPOINT": "http://127.0.0.1:9"}


@pytest.mark.parametrize(("env", "source"), [
    ({"AWS_ACCESS_KEY_ID": "k", "AWS_SECRET_ACCESS_KEY": "s", "AWS_WEB_IDENTITY_TOKEN_FILE": "/t"}, "keys"),
    ({"AWS_WEB_IDENTITY_TOKEN_FILE": "/t", "AWS_ROLE_ARN": "arn:aws:iam::1:role/r",
      "AWS_CONTAINER_CREDENTIALS_FULL_URI": "http://127.0.0.1/c"}, "web-identity"),
    ({"AWS_CONTAINER_CREDENTIALS_FULL_URI": "http://127.0.0.1/c"}, "container"),
    ({"AWS_CONTAINER_CREDENTIALS_RELATIVE_URI": "/v2/credentials/x"}, "container"),
    ({}, "instance"),
])
def test_the_sources_are_tried_in_the_aws_order(env: dict[str, str], source: str) -> None:
    assert credential_source(env) == source


def test_static_keys_carry_their_session_token_and_half_keys_are_refused() -> None:
    store = open_store("s3://bucket/p", env={**ENDPOINT, "AWS_ACCESS_KEY_ID": "k", "AWS_SECRET_ACCESS_KEY": "s",
                                             "AWS_SESSION_TOKEN": "tok"})
    assert isinstance(store.credentials, StaticProvider)  # type: ignore[attr-defined]
    assert store.credentials.retrieve().session_token == "tok"  # type: ignore[attr-defined]
    with pytest.raises(StoreError, match="set together"):
        open_store("s3://bucket/p", env={**ENDPOINT, "AWS_SECRET_ACCESS_KEY": "s"})


@pytest.mark.parametrize("duration", ["60", "50000", "15m"])
def test_an_sts_duration_outside_the_sts_range_is_refused_at_open(duration: str) -> None:
    with pytest.raises(StoreError, match="SPARKPOINT_STS_DURATION_SECONDS must be a number of seconds from 900"):
        open_store("s3://bucket/p", env={**ENDPOINT, "AWS_WEB_IDENTITY_TOKEN_FILE": "/t",
                                         "SPARKPOINT_STS_DURATION_SECONDS": duration})


def test_no_keys_means_the_clouds_own_identity_unless_refused() -> None:
    store = open_store("s3://bucket/p", env={**ENDPOINT, "AWS_WEB_IDENTITY_TOKEN_FILE": "/var/run/t"})
    assert isinstance(store.credentials, RefreshingProvider)  # type: ignore[attr-defined]
    assert store.credentials.source == "web-identity"  # type: ignore[attr-defined]
    with pytest.raises(StoreError, match="the cloud's own identity is not used here"):
        open_store("s3://bucket/p", env={**ENDPOINT, "AWS_WEB_IDENTITY_TOKEN_FILE": "/t"}, ambient=False)


@pytest.mark.parametrize(("env", "endpoint"), [
    ({"AWS_REGION": "eu-west-3"}, "https://s3.eu-west-3.amazonaws.com"),
    ({"AWS_DEFAULT_REGION": "us-west-2"}, "https://s3.us-west-2.amazonaws.com"),
    ({"AWS_REGION": "eu-west-3", "AWS_DEFAULT_REGION": "us-west-2"}, "https://s3.eu-west-3.amazonaws.com"),
    ({"AWS_REGION": "cn-north-1"}, "https://s3.cn-north-1.amazonaws.com.cn"),
    ({"AWS_REGION": "eu-west-3", "SPARKPOINT_S3_ENDPOINT": "http://minio:9000"}, "http://minio:9000"),
])
def test_the_endpoint_defaults_to_aws_s3_in_the_region(env: dict[str, str], endpoint: str) -> None:
    store = open_store("s3://bucket/p", env={**env, "AWS_ACCESS_KEY_ID": "k", "AWS_SECRET_ACCESS_KEY": "s"})
    assert store.endpoint == endpoint  # type: ignore[attr-defined]
    assert store.client._base_url.host == endpoint.split("://")[1]  # type: ignore[attr-defined]


@pytest.mark.parametrize(("env", "sts"), [
    ({"AWS_ENDPOINT_URL_STS": "http://minio:9000", "AWS_REGION": "eu-west-3"}, "http://minio:9000"),
    ({"AWS_REGION": "eu-west-3"}, "https://sts.eu-west-3.amazonaws.com"),
    ({"AWS_DEFAULT_REGION": "cn-north-1"}, "https://sts.cn-north-1.amazonaws.com.cn"),
    ({}, "https://sts.amazonaws.com"),
])
def test_the_sts_endpoint(env: dict[str, str], sts: str) -> None:
    assert _sts_endpoint(env) == sts


class Clock:
    def __init__(self) -> None:
        self.now = T0

    def __call__(self) -> datetime:
        return self.now


class Source:
    """Hands out keys that live `life`, numbered; fails while `failing`, with a text that must not leak."""

    def __init__(self, life: timedelta, clock: Clock) -> None:
        self.life, self.clock, self.calls, self.failing = life, clock, 0, False

    def __call__(self) -> Credentials:
        self.calls += 1
        if self.failing:
            raise ValueError("http://sts/?WebIdentityToken=secret-token-xyz failed with HTTP status code 503")
        return Credentials(f"key-{self.calls}", "secret", "session", self.clock.now + self.life)


def _provider(life: timedelta = timedelta(minutes=15)) -> tuple[RefreshingProvider, Source, Clock]:
    clock = Clock()
    source = Source(life, clock)
    return RefreshingProvider(source, "web-identity", margin=timedelta(minutes=5), clock=clock), source, clock


def test_temporary_keys_are_fetched_again_margin_before_expiry() -> None:
    provider, source, clock = _provider()
    assert provider.retrieve().access_key == "key-1"
    clock.now = T0 + timedelta(minutes=10) - timedelta(seconds=1)  # expiry 12:15, refresh point 12:10
    assert provider.retrieve().access_key == "key-1" and source.calls == 1
    clock.now = T0 + timedelta(minutes=10)
    assert provider.retrieve().access_key == "key-2" and source.calls == 2
    assert provider.retrieve().access_key == "key-2" and source.calls == 2


def test_a_failed_refresh_keeps_valid_keys_and_never_shows_the_token() -> None:
    provider, source, clock = _provider()
    provider.retrieve()
    source.failing = True
    clock.now = T0 + timedelta(minutes=12)  # past the refresh point, before expiry
    assert provider.retrieve().access_key == "key-1"
    clock.now = T0 + timedelta(minutes=14, seconds=30)
    assert provider.retrieve().access_key == "key-1" and source.calls == 3  # tried again each time
    clock.now = T0 + timedelta(minutes=15)  # expired: an error naming the source, not the token
    with pytest.raises(StoreAuthError, match=r"web-identity source \(ValueError\)") as err:
        provider.retrieve()
    assert "secret-token-xyz" not in str(err.value) and err.value.__cause__ is None
    source.failing = False
    assert provider.retrieve().access_key == "key-5"


def test_the_delta_sink_asks_the_store_for_current_keys_on_every_use() -> None:
    provider, source, clock = _provider()
    store = open_store("s3://bucket/pre", env={**ENDPOINT, "AWS_REGION": "eu-west-3",
                                              "AWS_WEB_IDENTITY_TOKEN_FILE": "/t"})
    store.credentials = provider  # type: ignore[attr-defined]
    loc = delta_location(store, "ns/job/outputs/default")
    first = loc.storage_options
    assert first["AWS_ACCESS_KEY_ID"] == "key-1" and first["AWS_SESSION_TOKEN"] == "session"
    assert first["AWS_ENDPOINT_URL"] == "http://127.0.0.1:9" and first["AWS_REGION"] == "eu-west-3"
    clock.now = T0 + timedelta(minutes=11)
    assert loc.storage_options["AWS_ACCESS_KEY_ID"] == "key-2"
    assert "key-" not in repr(loc) and "session" not in repr(loc)
