"""Fuzz the control API of a real running job (issue 11): random, malformed, unauthenticated and
slow requests while Spark runs; afterwards the job still checkpoints on request and its committed
output equals the oracle, so no request disturbed it."""

from __future__ import annotations

import http.client
import json
import socket
import uuid

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from harness.runtime_job import RuntimeProcess, WindowedJob, canonical, wait_until
from sparkpoint.runtime.sink.transactional import read_committed
from sparkpoint.runtime.store import JobRef, open_store

pytestmark = [pytest.mark.spark, pytest.mark.timeout(900)]
TOKEN = uuid.uuid4().hex + uuid.uuid4().hex


def call(port: int, method: str, path: str, body: bytes | None = None, auth: str | None = None) -> tuple[int, str]:
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=60)
    try:
        conn.request(method, path, body=body, headers={"Authorization": auth} if auth else {})
        resp = conn.getresponse()
        return resp.status, resp.read().decode(errors="replace")
    finally:
        conn.close()


@pytest.fixture(scope="module")
def job_run(tmp_path_factory):
    base = tmp_path_factory.mktemp("fuzz")
    job = WindowedJob(name="fuzz", rows_per_batch=200, keys=50, total_batches=30, trigger="1s",
                      checkpoint_interval="4s")
    store_url = f"file://{base / 'store'}"
    proc = RuntimeProcess(job.write(base / "fuzz.yaml", store_url), base / "pod", base / "fuzz.log",
                          until_batch=job.until_batch, env={"SPARKPOINT_CONTROL_TOKEN": TOKEN}).start()
    try:
        wait_until(lambda: (base / "pod" / "api.json").exists(), 180, "control API", proc)
        port = json.loads((base / "pod" / "api.json").read_text())["port"]
        wait_until(lambda: call(port, "GET", "/readyz")[0] == 200, 240, "readiness", proc)
        yield {"proc": proc, "port": port, "job": job, "store_url": store_url}
    finally:
        proc.kill()


_json = st.recursive(st.none() | st.booleans() | st.integers() | st.floats() | st.text(max_size=30),
                     lambda kids: st.lists(kids, max_size=4) | st.dictionaries(st.text(max_size=12), kids, max_size=4),
                     max_leaves=12)
_fields = st.fixed_dictionaries({}, optional={"wait": st.text(max_size=10) | st.sampled_from(["none", "id"]),
                                              "timeout": st.floats() | st.integers(), "name": _json,
                                              "savepoint": _json, "checkpoint": _json, "extra": _json})


@settings(max_examples=120, deadline=None, suppress_health_check=list(HealthCheck))
@given(path=st.sampled_from(["/checkpoints", "/savepoints", "/stop", "/status", "/checkpoints/chk-000001"]),
       method=st.sampled_from(["GET", "POST"]),
       body=st.one_of(st.none(), st.binary(max_size=300), _json.map(lambda v: json.dumps(v).encode()),
                      _fields.map(lambda v: json.dumps(v).encode())),
       auth=st.sampled_from([None, "Bearer wrong-token", f"Bearer {TOKEN[:-1]}", f"Basic {TOKEN}"]))
def _fuzz_once(port, path, method, body, auth):
    code, text = call(port, method, path, body, auth)
    assert code in (401, 403, 405), (code, text)


def test_fuzzing_the_api_does_not_disturb_the_job(job_run):
    port, proc = job_run["port"], job_run["proc"]
    bearer = f"Bearer {TOKEN}"

    def committed() -> bool:
        code, text = call(port, "GET", "/status", auth=bearer)
        return code == 200 and json.loads(text)["latestCommittedBatch"] is not None
    wait_until(committed, 300, "a committed batch", proc)  # fuzz while batches run
    # Slow clients hold connections open (a header that never ends, a body that never comes).
    slow = [socket.create_connection(("127.0.0.1", port)) for _ in range(3)]
    slow[0].sendall(b"POST /stop HTTP/1.1\r\nHost: x\r\n")
    slow[1].sendall(f"POST /stop HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer {TOKEN}\r\n"
                    "Content-Length: 50\r\n\r\n{".encode())
    _fuzz_once(port=port)  # hypothesis draws the rest of the arguments
    # Authenticated but malformed: refused with a 4xx, the job keeps running.
    for body in (b"{", b'{"savepoint": 1}', b'{"checkpoint": "no"}', b'{"x": 1}', b"[]", b"\x00" * 70000):
        assert 400 <= call(port, "POST", "/stop", body, bearer)[0] < 500
    for s in slow:
        s.close()
    assert proc.alive()
    code, doc = call(port, "POST", "/checkpoints", b'{"wait": "complete", "timeout": 120}', bearer)
    assert code == 200 and json.loads(doc)["status"] == "completed", doc
    assert call(port, "GET", "/status", auth=bearer)[0] == 200
    assert proc.wait(600) == 0  # drains at until_batch
    job = job_run["job"]
    rows = read_committed(open_store(job_run["store_url"]), JobRef("default", "fuzz"))
    assert rows and canonical(rows) == job.expected_rows()
