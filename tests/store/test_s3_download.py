"""Downloads from real MinIO whose response bodies are broken off mid-transfer by a TCP proxy: a
body cut short must be retried or reported, never left as a short file. (http.client alone ends a
short body without an error; urllib3 2 checks the length, which these tests hold it to.)"""

from __future__ import annotations

import contextlib
import hashlib
import os
import socket
import threading
from pathlib import Path

import pytest

from harness.minio_server import MinioServer
from sparkpoint.runtime.store import StoreError
from sparkpoint.runtime.store.s3 import S3Store

pytestmark = pytest.mark.minio
MIB = 1024 * 1024


class CuttingProxy:
    """Forwards TCP to `upstream`; the first `cuts` connections are closed after `limit` bytes of
    the server's answers (a reset mid-body), later ones pass everything."""

    def __init__(self, upstream: tuple[str, int], *, cuts: int, limit: int):
        self.upstream, self.cuts, self.limit = upstream, cuts, limit
        self.connections = 0
        self.listener = socket.create_server(("127.0.0.1", 0))
        self.port = self.listener.getsockname()[1]
        threading.Thread(target=self._accept, daemon=True).start()

    def _accept(self) -> None:
        while True:
            try:
                client, _ = self.listener.accept()
            except OSError:
                return
            self.connections += 1
            limit = self.limit if self.connections <= self.cuts else None
            server = socket.create_connection(self.upstream)
            threading.Thread(target=self._pipe, args=(client, server, None), daemon=True).start()
            threading.Thread(target=self._pipe, args=(server, client, limit), daemon=True).start()

    @staticmethod
    def _pipe(src: socket.socket, dst: socket.socket, limit: int | None) -> None:
        sent = 0
        try:
            while data := src.recv(65536):
                if limit is not None and sent + len(data) > limit:
                    dst.sendall(data[: limit - sent])
                    break
                dst.sendall(data)
                sent += len(data)
        except OSError:
            pass
        for s in (src, dst):
            with contextlib.suppress(OSError):
                s.shutdown(socket.SHUT_RDWR)
            s.close()

    def close(self) -> None:
        self.listener.close()


def _store(server: MinioServer, port: int, prefix: str, attempts: int) -> S3Store:
    return S3Store(f"http://127.0.0.1:{port}", "sparkpoint-test", prefix, server.access_key,
                   server.secret_key, attempts=attempts, read_timeout=5.0)


@pytest.fixture
def big_object(minio_server: MinioServer, tmp_path: Path) -> tuple[str, str, bytes]:
    prefix = f"dl-{os.urandom(4).hex()}"
    data = os.urandom(6 * MIB + 123)  # not a multiple of the read buffer
    src = tmp_path / "src"
    src.write_bytes(data)
    _store(minio_server, minio_server.port, prefix, 1).put_file("objects/big", str(src))
    return prefix, "objects/big", data


def test_a_body_broken_off_mid_download_is_fetched_again_whole(minio_server, big_object, tmp_path) -> None:  # type: ignore[no-untyped-def]
    prefix, key, data = big_object
    proxy = CuttingProxy(("127.0.0.1", minio_server.port), cuts=2, limit=2 * MIB)
    try:
        dst = tmp_path / "dst"
        digest = _store(minio_server, proxy.port, prefix, 4).get_file(key, str(dst), digests=["sha256"])["sha256"]
    finally:
        proxy.close()
    assert proxy.connections >= 3  # two broken bodies, then a whole one
    assert digest == hashlib.sha256(data).hexdigest()
    assert dst.read_bytes() == data


def test_a_body_broken_off_every_time_is_an_error_not_a_short_file(minio_server, big_object, tmp_path) -> None:  # type: ignore[no-untyped-def]
    prefix, key, _ = big_object
    proxy = CuttingProxy(("127.0.0.1", minio_server.port), cuts=10**6, limit=2 * MIB)
    try:
        with pytest.raises(StoreError, match="unreachable after 2 attempts"):
            _store(minio_server, proxy.port, prefix, 2).get_file(key, str(tmp_path / "dst"), digests=["sha256"])
    finally:
        proxy.close()

