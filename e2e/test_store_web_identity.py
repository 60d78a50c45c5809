"""Issue 40 on the cluster: the store's own cloud identity, with no static key anywhere.

A MinIO started by the test trusts the cluster's service-account issuer as its OpenID provider: it
fetches the API server's discovery document and JWKS itself (anonymously, through a binding of
`system:service-account-issuer-discovery` to `system:unauthenticated` the test makes, over TLS with
the cluster's CA in MinIO's certs), as an S3 on a managed cluster trusts the cluster's OIDC issuer
(IRSA). The job names no storage Secret: it runs as a ServiceAccount of its namespace
(`spec.serviceAccountName`) and its pod template projects a token for MinIO's audience into the
runtime and GC containers with `AWS_WEB_IDENTITY_TOKEN_FILE`, `AWS_ROLE_ARN` and
`AWS_ENDPOINT_URL_STS` (what the IRSA webhook sets on EKS; docs/design.md §9). Every store request is
signed with keys from MinIO's AssumeRoleWithWebIdentity. The job checkpoints, its pod is deleted and
the next attempt restores remotely and checkpoints again, and no key is in the pod's env, its
ConfigMap or the StreamingJob.

The slow test runs past the refresh point of the shortest STS keys (stsDuration 15m: new keys after
10 min) and past the first keys' expiry, and past the kubelet's rotation of the 10-minute token.
Skipped on the node agent (its pods are host processes: the MinIO would have to listen on loopback,
which the real node's pods cannot reach) and on kind (the API server's address is the container's).
"""

from __future__ import annotations

import json
import ssl
import time
import urllib.parse
import urllib.request
import uuid
from pathlib import Path

import pytest
from kube_helpers import GROUP, MINIO_INFO, PLURAL, VERSION, real_node, wait_for
from kubernetes import client
from operator_jobs import Jobs, job_spec

from harness.minio_server import MinioServer
from harness.oidc_issuer import minio_role_arn
from sparkpoint.runtime.store import StoreAuthError, open_store

AUDIENCE = "sparkpoint-store"  # MinIO's client id: the projected token's audience
ACCOUNT = "store-writer"  # the job's ServiceAccount, its identity for the store
BUCKET = "sts-e2e"
TOKEN_DIR = "/var/run/secrets/sts"
STATIC_KEYS = ("AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY", "AWS_SESSION_TOKEN")


@pytest.fixture(autouse=True)
def needs_real_node(core):
    import os

    if not real_node(core):
        pytest.skip("needs the real node: its pods reach a MinIO on the host's address")
    if os.environ.get("SPARKPOINT_E2E_CLUSTER") == "kind":
        pytest.skip("on kind the API server's address is inside its container (not done there)")


def _ca_context(api_client) -> ssl.SSLContext:
    return ssl.create_default_context(cafile=api_client.configuration.ssl_ca_cert)


def _anonymous_get(api_client, url: str) -> dict | None:
    try:
        with urllib.request.urlopen(url, timeout=5, context=_ca_context(api_client)) as resp:
            return json.loads(resp.read())
    except OSError:
        return None


@pytest.fixture
def issuer_discovery(api_client):
    """The API server's discovery document and JWKS readable without credentials, as a cloud's
    OIDC trust needs them (the binding a user makes for an STS outside the cluster)."""
    rbac = client.RbacAuthorizationV1Api(api_client)
    name = f"e2e-sa-issuer-discovery-{uuid.uuid4().hex[:5]}"
    rbac.create_cluster_role_binding(client.V1ClusterRoleBinding(
        metadata=client.V1ObjectMeta(name=name),
        role_ref=client.V1RoleRef(api_group="rbac.authorization.k8s.io", kind="ClusterRole",
                                  name="system:service-account-issuer-discovery"),
        subjects=[client.RbacV1Subject(api_group="rbac.authorization.k8s.io", kind="Group",
                                       name="system:unauthenticated")]))
    server = api_client.configuration.host
    try:
        discovery = wait_for("the issuer's discovery document, anonymously", lambda: _anonymous_get(
            api_client, f"{server}/.well-known/openid-configuration"), timeout=60)
        keys = wait_for("the issuer's JWKS at its jwks_uri, anonymously",
                        lambda: _anonymous_get(api_client, discovery["jwks_uri"]), timeout=60)
        assert keys["keys"] and all(k["kty"] == "RSA" for k in keys["keys"]), keys
        yield f"{server}/.well-known/openid-configuration", discovery
    finally:
        rbac.delete_cluster_role_binding(name)


@pytest.fixture
def sts_minio(api_client, issuer_discovery, tmp_path):
    """A MinIO on the host's address (where the real node's pods reach the cluster's own MinIO)
    whose STS trusts the cluster's service-account issuer; its readwrite policy for every token of
    AUDIENCE through a role ARN."""
    config_url, discovery = issuer_discovery
    host = urllib.parse.urlsplit(json.loads(MINIO_INFO.read_text())["endpoint"]).hostname
    home = tmp_path / "minio-home"  # MinIO trusts the CAs in ~/.minio/certs/CAs/
    (home / ".minio" / "certs" / "CAs").mkdir(parents=True)
    ca = Path(api_client.configuration.ssl_ca_cert)
    (home / ".minio" / "certs" / "CAs" / "cluster-ca.crt").write_bytes(ca.read_bytes())
    env = {"HOME": str(home), "MINIO_IDENTITY_OPENID_CONFIG_URL": config_url,
           "MINIO_IDENTITY_OPENID_CLIENT_ID": AUDIENCE, "MINIO_IDENTITY_OPENID_ROLE_POLICY": "readwrite"}
    with MinioServer(extra_env=env, host=host, data_dir=str(tmp_path / "minio-data")) as server:
        server.make_bucket(BUCKET)
        yield server, discovery


def _token(core: client.CoreV1Api, namespace: str) -> str:
    return core.create_namespaced_service_account_token(ACCOUNT, namespace, client.AuthenticationV1TokenRequest(
        spec=client.V1TokenRequestSpec(audiences=[AUDIENCE], expiration_seconds=600))).status.token


def _web_identity_env(server: MinioServer, token_file: str) -> dict[str, str]:
    return {"AWS_WEB_IDENTITY_TOKEN_FILE": token_file, "AWS_ROLE_ARN": minio_role_arn(AUDIENCE),
            "AWS_ENDPOINT_URL_STS": server.endpoint}  # AWS_REGION is the operator's (from a storage Secret)


def _sts_trusts_the_cluster(core, namespace: str, server: MinioServer, tmp_path: Path) -> bool:
    """AssumeRoleWithWebIdentity with a token the API server issued for the job's account."""
    token_file = tmp_path / "token"
    token_file.write_text(_token(core, namespace))
    env = {"SPARKPOINT_S3_ENDPOINT": server.endpoint, **_web_identity_env(server, str(token_file))}
    try:
        creds = open_store(f"s3://{BUCKET}", env=env).credentials.retrieve()  # type: ignore[attr-defined]
    except StoreAuthError:
        return False
    return bool(creds.session_token) and creds.access_key != server.access_key


def _template(server: MinioServer) -> dict:
    env = [{"name": k, "value": v} for k, v in _web_identity_env(server, f"{TOKEN_DIR}/token").items()]
    mount = {"name": "sts-token", "mountPath": TOKEN_DIR, "readOnly": True}
    return {"spec": {
        "containers": [{"name": "runtime", "env": env, "volumeMounts": [mount]},
                       {"name": "gc", "env": env, "volumeMounts": [mount]}],
        # The kubelet's shortest token (10 min), rotated at 80% of its life; the runtime reads the
        # file again at every AssumeRoleWithWebIdentity.
        "volumes": [{"name": "sts-token", "projected": {"sources": [{"serviceAccountToken": {
            "audience": AUDIENCE, "expirationSeconds": 600, "path": "token"}}]}}]}}


def _create_job(jobs: Jobs, server: MinioServer, name: str, **over) -> None:
    spec = job_spec(jobs.namespace, **over)
    spec["checkpoint"]["storage"] = {"url": f"s3://{BUCKET}/{jobs.namespace}", "endpoint": server.endpoint,
                                     "stsDuration": "15m"}  # no secretRef: no static key
    spec["serviceAccountName"] = ACCOUNT
    spec["podTemplate"] = _template(server)
    jobs.custom.create_namespaced_custom_object(GROUP, VERSION, jobs.namespace, PLURAL, {
        "apiVersion": f"{GROUP}/{VERSION}", "kind": "StreamingJob", "metadata": {"name": name}, "spec": spec})


def _prepared(core, namespace: str, server: MinioServer, tmp_path: Path) -> float:
    core.create_namespaced_service_account(namespace, client.V1ServiceAccount(
        metadata=client.V1ObjectMeta(name=ACCOUNT)))
    t0 = time.monotonic()
    # MinIO answers "ready" before its IAM has the OpenID role: wait for its STS to accept a token.
    wait_for("MinIO's STS to accept a token the cluster issued", lambda: _sts_trusts_the_cluster(
        core, namespace, server, tmp_path), timeout=60, interval=1.0)
    return time.monotonic() - t0


def _no_static_key(jobs: Jobs, name: str, secrets: list[str]) -> None:
    """No key in any container's env (by value or by Secret), no envFrom, no Secret volume but the
    control token; no key's value in the job's ConfigMap or the StreamingJob."""
    for pod in jobs.pods(name):
        for container in pod.spec.containers:
            names = {e.name for e in container.env or []}
            assert not names & set(STATIC_KEYS), (pod.metadata.name, container.name, sorted(names))
            assert not [e for e in container.env or [] if e.value_from and e.value_from.secret_key_ref], \
                (pod.metadata.name, container.name)
            assert not container.env_from, (pod.metadata.name, container.name)
        secret_volumes = [v.secret.secret_name for v in pod.spec.volumes or [] if v.secret]
        assert secret_volumes == [f"{name}-control-token"], secret_volumes
        assert pod.spec.service_account_name == ACCOUNT and pod.spec.automount_service_account_token is False
    shown = json.dumps(jobs.core.read_namespaced_config_map(f"{name}-job", jobs.namespace).data) + \
        json.dumps(jobs.get(name))
    for secret in secrets:
        assert secret not in shown
    assert not [k for k in STATIC_KEYS if k in shown], shown[:2000]


@pytest.mark.timeout(900)
def test_a_job_with_no_static_keys_checkpoints_and_restores_through_web_identity(
        api_client, core, namespace, operator, sts_minio, tmp_path):
    server, discovery = sts_minio
    trusted_s = _prepared(core, namespace, server, tmp_path)
    jobs = Jobs(api_client, namespace, {})
    t0 = time.monotonic()
    _create_job(jobs, server, "keyless")
    st = jobs.wait_status("keyless", "Running with a checkpoint", lambda s: s.get("phase") == "Running"
                          and s.get("latestCheckpoint"), timeout=420, operator=operator)
    first_s = time.monotonic() - t0
    pod = jobs.core.read_namespaced_pod(st["pod"], namespace)
    runtime = next(c for c in pod.spec.containers if c.name == "runtime")
    assert {e.name: e.value for e in runtime.env}["AWS_ROLE_ARN"] == minio_role_arn(AUDIENCE)
    token_volume = next(v for v in pod.spec.volumes if v.name == "sts-token")
    assert token_volume.projected.sources[0].service_account_token.audience == AUDIENCE

    # The checkpoint is in MinIO (read with its root keys: the job's own are temporary).
    store = server.open(BUCKET, namespace)
    keys = [o.key for o in store.list(f"{namespace}/keyless/")]
    assert any(st["latestCheckpoint"]["id"] in k for k in keys), keys[:20]

    # The pod goes: the next attempt, with a new token, restores the latest checkpoint from the store.
    before = st["latestCheckpoint"]["batch"]
    core.delete_namespaced_pod(st["pod"], namespace)
    t1 = time.monotonic()
    st = jobs.wait_status("keyless", "attempt 2 Running with a newer checkpoint", lambda s: s.get("attempt") == 2
                          and s.get("phase") == "Running" and (s.get("latestCheckpoint") or {}).get("batch", -1)
                          > before, timeout=420, operator=operator)
    restored_s = time.monotonic() - t1
    assert st["restore"]["source"] == "remote", st["restore"]
    _no_static_key(jobs, "keyless", [server.access_key, server.secret_key,
                                     *json.loads(MINIO_INFO.read_text()).values()])
    print(f"\nweb identity: STS trusting the cluster issuer ({discovery['issuer']}) after {trusted_s:.0f}s, "
          f"first checkpoint {first_s:.0f}s after create, attempt 2 checkpointing {restored_s:.0f}s after the "
          f"pod deletion")


@pytest.mark.slow
@pytest.mark.timeout(1800)
def test_a_keyless_job_keeps_checkpointing_past_its_first_keys_expiry(api_client, core, namespace, operator,
                                                                       sts_minio, tmp_path):
    """stsDuration 15m: the runtime fetches new keys 5 min before they expire (at ~10 min), with the
    token file the kubelet has rotated by then (10-minute token, renewed at 8 min). Checkpoints
    after the first keys' expiry show the refresh worked with no restart."""
    server, _ = sts_minio
    _prepared(core, namespace, server, tmp_path)
    jobs = Jobs(api_client, namespace, {})
    _create_job(jobs, server, "long-keys")
    st = jobs.wait_status("long-keys", "Running with a checkpoint", lambda s: s.get("phase") == "Running"
                          and s.get("latestCheckpoint"), timeout=420, operator=operator)
    started = time.monotonic()
    expired_at = started + 16 * 60  # the first keys were fetched before the first checkpoint
    time.sleep(max(0.0, expired_at - time.monotonic()))
    for nth in ("a", "another"):
        batch = jobs.status("long-keys")["latestCheckpoint"]["batch"]
        st = jobs.wait_status("long-keys", f"{nth} checkpoint after the first keys expired",
                              lambda s, b=batch: (s.get("latestCheckpoint") or {}).get("batch", -1) > b,
                              timeout=180, operator=operator)
    assert st["attempt"] == 1 and st["phase"] == "Running", st  # no restart was needed
    assert not st.get("lastFailure"), st["lastFailure"]
