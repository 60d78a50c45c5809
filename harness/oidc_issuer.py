"""A tiny OpenID Connect issuer on 127.0.0.1 for tests: an RSA key made at start, the discovery
document and the JWKS served over HTTP, and RS256 ID tokens signed on demand.

It stands in for what trusts a pod's identity in a cluster (the API server's service-account issuer,
or an IdP), so MinIO's STS (AssumeRoleWithWebIdentity) can be tested for real without one:

    with OidcIssuer() as issuer:
        minio = MinioServer(extra_env=issuer.minio_env(client_id="sparkpoint", policy="readwrite"))
        token = issuer.token(subject="system:serviceaccount:ns:job", audience="sparkpoint")
"""

from __future__ import annotations

import base64
import hashlib
import json
import threading
import time
import uuid
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

from Crypto.Hash import SHA256
from Crypto.PublicKey import RSA
from Crypto.Signature import pkcs1_15


def _b64(data: bytes) -> str:
    return base64.urlsafe_b64encode(data).rstrip(b"=").decode()


def _int_b64(n: int) -> str:
    return _b64(n.to_bytes((n.bit_length() + 7) // 8, "big"))


def minio_role_arn(client_id: str) -> str:
    """The role ARN MinIO (no region set) gives an OpenID provider with a role policy: its id is the
    unpadded URL-safe base64 of SHA-1 of the client id (what its log prints as "IAM Roles")."""
    return "arn:minio:iam:::role/" + _b64(hashlib.sha1(client_id.encode()).digest())


class OidcIssuer:
    def __init__(self) -> None:
        self.key = RSA.generate(2048)
        self.kid = uuid.uuid4().hex[:16]
        self.requests: list[str] = []  # paths asked for (what MinIO fetched)
        self._server = ThreadingHTTPServer(("127.0.0.1", 0), self._handler())
        self._thread = threading.Thread(target=self._server.serve_forever, name="oidc-issuer", daemon=True)

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self._server.server_address[1]}"

    def discovery(self) -> dict[str, Any]:
        return {"issuer": self.url, "jwks_uri": f"{self.url}/keys", "response_types_supported": ["id_token"],
                "subject_types_supported": ["public"], "id_token_signing_alg_values_supported": ["RS256"],
                "authorization_endpoint": f"{self.url}/authorize", "token_endpoint": f"{self.url}/token",
                "claims_supported": ["sub", "aud", "exp", "iat", "iss"]}

    def jwks(self) -> dict[str, Any]:
        return {"keys": [{"kty": "RSA", "alg": "RS256", "use": "sig", "kid": self.kid,
                          "n": _int_b64(self.key.n), "e": _int_b64(self.key.e)}]}

    def token(self, *, subject: str, audience: str, lifetime: int = 3600, **claims: Any) -> str:
        """An RS256 JWT as a projected service-account token looks (iss, sub, aud, iat, exp)."""
        now = int(time.time())
        header = {"alg": "RS256", "typ": "JWT", "kid": self.kid}
        body = {"iss": self.url, "sub": subject, "aud": audience, "iat": now, "nbf": now,
                "exp": now + lifetime, **claims}
        signing_input = f"{_b64(json.dumps(header).encode())}.{_b64(json.dumps(body).encode())}"
        signature = pkcs1_15.new(self.key).sign(SHA256.new(signing_input.encode()))
        return f"{signing_input}.{_b64(signature)}"

    def minio_env(self, *, client_id: str, claim: str = "policy", role_policy: str | None = None) -> dict[str, str]:
        """MinIO's settings to trust this issuer: JWT claim `claim` names the policy, or (role_policy)
        every token of `client_id`'s audience gets that policy through a role ARN."""
        env = {"MINIO_IDENTITY_OPENID_CONFIG_URL": f"{self.url}/.well-known/openid-configuration",
               "MINIO_IDENTITY_OPENID_CLIENT_ID": client_id, "MINIO_IDENTITY_OPENID_CLAIM_NAME": claim}
        if role_policy:
            env["MINIO_IDENTITY_OPENID_ROLE_POLICY"] = role_policy
            del env["MINIO_IDENTITY_OPENID_CLAIM_NAME"]  # MinIO takes one of the two
        return env

    def _handler(self) -> type[BaseHTTPRequestHandler]:
        issuer = self

        class Handler(BaseHTTPRequestHandler):
            def do_GET(self) -> None:  # noqa: N802 - the http.server API
                issuer.requests.append(self.path)
                docs = {"/.well-known/openid-configuration": issuer.discovery, "/keys": issuer.jwks}
                if self.path not in docs:
                    self.send_error(404)
                    return
                body = json.dumps(docs[self.path]()).encode()
                self.send_response(200)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

            def log_message(self, *args: Any) -> None:
                pass

        return Handler

    def start(self) -> OidcIssuer:
        self._thread.start()
        return self

    def stop(self) -> None:
        self._server.shutdown()
        self._server.server_close()

    def __enter__(self) -> OidcIssuer:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()
