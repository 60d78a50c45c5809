"""Certificates and keys of the local cluster, made with the openssl command line.

One CA signs the API server's serving certificate and every client certificate; the API
server trusts client certificates by that CA (CN = user, O = groups). The service-account
signing key pair is separate. Existing files are kept, so `cluster-up` is idempotent.
"""

from __future__ import annotations

import subprocess
from dataclasses import dataclass
from pathlib import Path

CA_DAYS = 3650
CERT_DAYS = 825


@dataclass(frozen=True)
class ClientIdentity:
    """A client certificate: the file stem, the user name (CN) and its groups (O)."""

    stem: str
    user: str
    groups: tuple[str, ...] = ()


def _openssl(*args: str) -> None:
    result = subprocess.run(["openssl", *args], capture_output=True, text=True)
    if result.returncode != 0:
        raise RuntimeError(f"openssl {args[0]} failed: {result.stderr.strip()}")


def _subject(common_name: str, groups: tuple[str, ...] = ()) -> str:
    return "".join(f"/O={group}" for group in groups) + f"/CN={common_name}"


def ensure_ca(pki: Path) -> None:
    if (pki / "ca.crt").exists():
        return
    _openssl("genrsa", "-out", str(pki / "ca.key"), "2048")
    _openssl(
        "req", "-x509", "-new", "-nodes", "-key", str(pki / "ca.key"), "-sha256",
        "-days", str(CA_DAYS), "-subj", "/CN=sparkpoint-local-ca", "-out", str(pki / "ca.crt"),
        "-addext", "basicConstraints=critical,CA:TRUE",
        "-addext", "keyUsage=critical,keyCertSign,cRLSign,digitalSignature",
    )


def _sign(pki: Path, stem: str, subject: str, extensions: str) -> None:
    key, csr, crt, ext = (pki / f"{stem}.{suffix}" for suffix in ("key", "csr", "crt", "ext"))
    if crt.exists():
        return
    _openssl("genrsa", "-out", str(key), "2048")
    _openssl("req", "-new", "-key", str(key), "-subj", subject, "-out", str(csr))
    ext.write_text(extensions)
    _openssl(
        "x509", "-req", "-in", str(csr), "-CA", str(pki / "ca.crt"), "-CAkey", str(pki / "ca.key"),
        "-CAcreateserial", "-days", str(CERT_DAYS), "-sha256", "-extfile", str(ext), "-out", str(crt),
    )
    csr.unlink()
    ext.unlink()


def ensure_serving_cert(pki: Path, stem: str, common_name: str, extra_ips: tuple[str, ...] = (),
                        extra_dns: tuple[str, ...] = ()) -> None:
    """A serving certificate valid for the names and addresses clients use on this machine (plus the
    host's address and the node's name for the real node: real_node.ensure_certs)."""
    alt_names = ",".join([
        "DNS:localhost", "DNS:kubernetes", "DNS:kubernetes.default", "DNS:kubernetes.default.svc",
        "DNS:kubernetes.default.svc.cluster.local", "IP:127.0.0.1", "IP:10.96.0.1",
        *(f"DNS:{name}" for name in extra_dns), *(f"IP:{ip}" for ip in extra_ips),
    ])
    _sign(pki, stem, _subject(common_name), (
        "basicConstraints=CA:FALSE\nkeyUsage=critical,digitalSignature,keyEncipherment\n"
        f"extendedKeyUsage=serverAuth\nsubjectAltName={alt_names}\n"
    ))


def ensure_client_cert(pki: Path, identity: ClientIdentity) -> None:
    _sign(pki, identity.stem, _subject(identity.user, identity.groups), (
        "basicConstraints=CA:FALSE\nkeyUsage=critical,digitalSignature,keyEncipherment\n"
        "extendedKeyUsage=clientAuth\n"
    ))


def ensure_service_account_keys(pki: Path) -> None:
    if (pki / "sa.pub").exists():
        return
    _openssl("genrsa", "-out", str(pki / "sa.key"), "2048")
    _openssl("rsa", "-in", str(pki / "sa.key"), "-pubout", "-out", str(pki / "sa.pub"))


def ensure_all(pki: Path, clients: list[ClientIdentity]) -> None:
    pki.mkdir(parents=True, exist_ok=True)
    pki.chmod(0o700)
    ensure_ca(pki)
    ensure_serving_cert(pki, "apiserver", "kube-apiserver")
    ensure_serving_cert(pki, "node-serving", "sparkpoint-node")  # the node agent's log endpoint
    for identity in clients:
        ensure_client_cert(pki, identity)
    ensure_service_account_keys(pki)
