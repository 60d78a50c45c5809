"""Where the S3 store's credentials come from (docs/design.md §9, "The store's identity").

Static keys when the environment has them (a storage Secret's AWS_ACCESS_KEY_ID and
AWS_SECRET_ACCESS_KEY, with AWS_SESSION_TOKEN if they are temporary); otherwise the cloud's own
identity, tried in the standard AWS order:

  web identity   AWS_WEB_IDENTITY_TOKEN_FILE (+ AWS_ROLE_ARN): IRSA, Pod Identity webhooks, any OIDC
                 issuer an STS trusts; STS at AWS_ENDPOINT_URL_STS, else the region's AWS STS
  container      AWS_CONTAINER_CREDENTIALS_FULL_URI / _RELATIVE_URI (ECS, EKS Pod Identity agent)
  instance       the instance profile (IMDSv2)

Temporary credentials are fetched again REFRESH_MARGIN before they expire, so a request never
carries credentials about to lapse; the token file is read on every fetch (the kubelet rotates it).
Nothing here logs or raises a credential, a token or a URL carrying one.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable, Mapping
from datetime import UTC, datetime, timedelta

import urllib3
from minio.credentials import Credentials, IamAwsProvider, Provider, StaticProvider, WebIdentityProvider

from . import STS_DURATION_ENV, aws_host, region_of
from .base import StoreAuthError, StoreError

log = logging.getLogger("sparkpoint.store")

KEY_ENV = ("AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY")
SESSION_TOKEN_ENV = "AWS_SESSION_TOKEN"
TOKEN_FILE_ENV = "AWS_WEB_IDENTITY_TOKEN_FILE"
ROLE_ARN_ENV = "AWS_ROLE_ARN"
ROLE_SESSION_ENV = "AWS_ROLE_SESSION_NAME"
STS_ENDPOINT_ENV = "AWS_ENDPOINT_URL_STS"
CONTAINER_ENV = ("AWS_CONTAINER_CREDENTIALS_FULL_URI", "AWS_CONTAINER_CREDENTIALS_RELATIVE_URI")
REFRESH_MARGIN = timedelta(minutes=5)  # AWS SDKs refresh 5-15 minutes ahead; STS's minimum life is 15
STS_TIMEOUT = urllib3.Timeout(connect=5.0, read=30.0)


def credential_source(env: Mapping[str, str]) -> str:
    """Which source the store's credentials come from: keys, web-identity, container or instance."""
    access, secret = (env.get(k) for k in KEY_ENV)
    if access and secret:
        return "keys"
    if access or secret:
        raise StoreError("AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY must be set together "
                         "(or neither, for the cloud's own identity)")
    if env.get(TOKEN_FILE_ENV):
        return "web-identity"
    if any(env.get(k) for k in CONTAINER_ENV):
        return "container"
    return "instance"


def _utcnow() -> datetime:
    return datetime.now(UTC).replace(tzinfo=None)  # minio's Credentials hold naive UTC


class RefreshingProvider(Provider):
    """Temporary credentials from `fetch`, fetched again `margin` before they expire.

    Thread-safe (the store's transfer threads share one). If a refresh fails while the credentials
    held are still valid, they are used and the next call tries again."""

    def __init__(self, fetch: Callable[[], Credentials], source: str, *,
                 margin: timedelta = REFRESH_MARGIN, clock: Callable[[], datetime] = _utcnow):
        self._fetch = fetch
        self.source = source
        self.margin = margin
        self.clock = clock
        self.fetches = 0  # how many times credentials were fetched (metrics and tests)
        self._held: Credentials | None = None
        self._lock = threading.Lock()

    def _fresh(self, creds: Credentials | None) -> bool:
        return creds is not None and (creds.expiration is None or self.clock() < creds.expiration - self.margin)

    def retrieve(self) -> Credentials:
        with self._lock:
            held = self._held
            if self._fresh(held):
                return held  # type: ignore[return-value]
            try:
                self._held = self._fetch()
                self.fetches += 1
                return self._held
            except Exception as exc:  # noqa: BLE001 - any failure of the source, reported without its text
                # The text may carry the STS URL with the token in its query: only the type is reported.
                if held is not None and held.expiration is not None and self.clock() < held.expiration:
                    log.warning("store credentials refresh failed; using the current ones until they expire",
                                extra={"source": self.source, "error": type(exc).__name__})
                    return held
                if isinstance(exc, StoreError):
                    raise
                raise StoreAuthError(f"no store credentials from the {self.source} source "
                                     f"({type(exc).__name__}); see docs/design.md §9") from None


def _sts_endpoint(env: Mapping[str, str]) -> str:
    if env.get(STS_ENDPOINT_ENV):
        return env[STS_ENDPOINT_ENV]
    region = region_of(env)
    return aws_host("sts", region) if region else "https://sts.amazonaws.com"


def _sts_duration(env: Mapping[str, str]) -> int:
    raw = env.get(STS_DURATION_ENV) or "0"
    if not raw.isdigit() or not (int(raw) == 0 or 900 <= int(raw) <= 43200):
        raise StoreError(f"{STS_DURATION_ENV} must be a number of seconds from 900 to 43200 (got {raw!r})")
    return int(raw)


def _read_token(path: str) -> dict[str, str]:
    try:
        with open(path, encoding="utf-8") as f:
            return {"access_token": f.read().strip(), "expires_in": "0"}
    except OSError as exc:
        raise StoreAuthError(f"cannot read {TOKEN_FILE_ENV} ({exc.strerror})") from None


def _http() -> urllib3.PoolManager:
    return urllib3.PoolManager(timeout=STS_TIMEOUT, retries=urllib3.Retry(
        total=3, backoff_factor=0.5, status_forcelist=[500, 502, 503, 504], allowed_methods=None))


def chain_fetch(env: Mapping[str, str], source: str) -> Callable[[], Credentials]:
    """One fetch of temporary credentials from `source` (a new provider each time, so minio's own
    cache, which refreshes only 10 s before expiry, never answers for ours)."""
    if source == "web-identity":
        token_file = env[TOKEN_FILE_ENV]
        duration = _sts_duration(env)

        def web_identity() -> Credentials:
            return WebIdentityProvider(
                jwt_provider_func=lambda: _read_token(token_file), sts_endpoint=_sts_endpoint(env),
                duration_seconds=duration,
                role_arn=env.get(ROLE_ARN_ENV) or None,
                role_session_name=env.get(ROLE_SESSION_ENV) or "sparkpoint", http_client=_http()).retrieve()
        return web_identity
    full, relative = (env.get(k) for k in CONTAINER_ENV)
    # IamAwsProvider prefers the process environment over its arguments; the two agree in a pod.
    return lambda: IamAwsProvider(full_uri=full, relative_uri=relative, region=region_of(env),
                                  http_client=_http()).retrieve()


def store_credentials(env: Mapping[str, str], *, ambient: bool = True) -> Provider:
    """The provider a store client signs with. `ambient=False` refuses every source but static keys
    (the operator reads a job's store only with the keys the job's Secret names)."""
    source = credential_source(env)
    if source == "keys":
        return StaticProvider(env[KEY_ENV[0]], env[KEY_ENV[1]], env.get(SESSION_TOKEN_ENV) or None)
    if not ambient:
        raise StoreError("AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY must be set for this store "
                         "(the cloud's own identity is not used here)")
    return RefreshingProvider(chain_fetch(env, source), source)
