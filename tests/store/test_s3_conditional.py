"""S3 conditional writes against a real MinIO (issue 8 item 8), and the throwaway MinIO launcher.

Faults are injected at the client's request seam: the real server still does the work.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
import uuid
from pathlib import Path

import pytest
import urllib3

from sparkpoint.runtime.store import StoreError
from sparkpoint.runtime.store.s3 import CONDITIONAL_PROBE_KEY
from tests.conftest import TEST_BUCKET

pytestmark = pytest.mark.minio


def _store(minio_server):  # type: ignore[no-untyped-def]
    return minio_server.open(TEST_BUCKET, f"cond-{uuid.uuid4().hex[:10]}")


def test_retry_after_a_lost_response_is_not_reported_as_someone_elses_write(minio_server) -> None:  # type: ignore[no-untyped-def]
    store = _store(minio_server)
    real, lost = store.client._put_object, [0]

    def put_then_lose_response(*args, **kwargs):  # type: ignore[no-untyped-def]
        result = real(*args, **kwargs)  # the server stored the object ...
        if lost[0] == 0:
            lost[0] += 1  # ... but the response never reached us
            raise urllib3.exceptions.ProtocolError("Connection aborted.", ConnectionResetError())
        return result
    store.client._put_object = put_then_lose_response
    assert store.put_if_absent("a/claim.json", b'{"mine": 1}') is True
    assert lost[0] == 1
    assert store.put_if_absent("a/claim.json", b'{"mine": 1}') is False  # a second, separate call
    store.client._put_object = real
    assert store.put_if_absent("a/other.json", b"x") is True
    assert store.put_if_absent("a/other.json", b"y") is False


def test_check_refuses_a_server_that_ignores_if_none_match(minio_server) -> None:  # type: ignore[no-untyped-def]
    store = _store(minio_server)
    store.check(writes=True)  # the real MinIO honours it (first check ever: creates the probe key)
    store.check(writes=True)  # and again, now that the probe key exists
    real = store.client._put_object

    def drop_condition(bucket, name, data, headers=None, **kwargs):  # type: ignore[no-untyped-def]
        headers = {k: v for k, v in (headers or {}).items() if k.lower() != "if-none-match"}
        return real(bucket, name, data, headers=headers, **kwargs)
    store.client._put_object = drop_condition  # a gateway or server that drops the condition
    with pytest.raises(StoreError, match="If-None-Match"):
        store.check(writes=True)
    probes = [i.key for i in store.list("") if "check" in i.key]
    assert probes == [CONDITIONAL_PROBE_KEY], f"one probe key per store, no deletes needed: {probes}"


def test_readers_check_writes_nothing(minio_server) -> None:  # type: ignore[no-untyped-def]
    """list/verify/restore/GC may run with credentials that cannot write: their check() must not."""
    store = _store(minio_server)
    real, writes = store.client._put_object, []

    def record(*args, **kwargs):  # type: ignore[no-untyped-def]
        writes.append(args[1])
        return real(*args, **kwargs)
    store.client._put_object = record
    store.check()
    assert writes == [] and list(store.list("")) == []
    store.check(writes=True)
    assert writes, "a writer's check proves conditional creates"


def test_launcher_stops_minio_and_removes_its_data_on_sigterm(tmp_path: Path) -> None:
    env = {**os.environ, "TMPDIR": str(tmp_path)}
    proc = subprocess.Popen([sys.executable, "-m", "harness.minio_server"],
                            stdout=subprocess.PIPE, text=True, env=env)
    try:
        assert proc.stdout is not None
        line = proc.stdout.readline()
        assert "minio ready" in line, line
        children = Path(f"/proc/{proc.pid}/task/{proc.pid}/children").read_text().split()
        assert children, "no MinIO child process"
        assert any(p.name.startswith("sparkpoint-minio-") for p in tmp_path.iterdir())
        proc.send_signal(signal.SIGTERM)
        proc.wait(30)
        deadline = time.monotonic() + 10
        while any(Path(f"/proc/{c}").exists() for c in children) and time.monotonic() < deadline:
            time.sleep(0.1)
        alive = [c for c in children if Path(f"/proc/{c}").exists()
                 and "zombie" not in Path(f"/proc/{c}/status").read_text().lower()]
        assert not alive, f"MinIO server {alive} outlived its launcher"
        assert not list(tmp_path.iterdir()), f"left behind: {list(tmp_path.iterdir())}"
    finally:
        if proc.poll() is None:
            proc.kill()
        for c in locals().get("children", []):
            if Path(f"/proc/{c}").exists():
                os.kill(int(c), signal.SIGKILL)
