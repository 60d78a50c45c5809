"""Control API authentication and strict bodies (issue 11), against the real aiohttp app served by
the real ControlServer; the runtime behind it is a stand-in that records what reached it."""

from __future__ import annotations

import http.client
import json
import socket
import time
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from sparkpoint.runtime.service import api_guard
from sparkpoint.runtime.service.api import ControlServer
from sparkpoint.runtime.service.control_token import TokenError, check_bind, is_loopback, resolve_token

TOKEN = "t0ken-for-tests-0123456789abcdef"


class Recorder:
    """What build_app reads of a JobRuntime; phase "stopped" so triggers answer 409 without a coordinator."""

    phase = "stopped"
    coordinator = None
    standby = None  # started as an attempt: POST /promote answers 409
    launch = None

    def __init__(self) -> None:
        self.stops: list[dict[str, Any]] = []
        self.status_calls = 0
        self.metrics = type("M", (), {"render": staticmethod(lambda: b"sparkpoint_up 1\n")})()

    def healthy(self) -> bool:
        return True

    def ready(self) -> bool:
        return True

    def status(self) -> dict[str, Any]:
        self.status_calls += 1
        return {"phase": self.phase}

    def request_stop(self, savepoint: Any = None, checkpoint: bool = True) -> None:
        self.stops.append({"savepoint": savepoint, "checkpoint": checkpoint})


@pytest.fixture(scope="module")
def served():
    rt = Recorder()
    server = ControlServer(rt, "127.0.0.1", 0, token=TOKEN, metrics_port=0)
    server.start()
    yield rt, server
    server.stop()


def call(port: int, method: str, path: str, body: bytes | None = None,
         headers: dict[str, str] | None = None) -> tuple[int, str]:
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=30)
    try:
        conn.request(method, path, body=body, headers=headers or {})
        resp = conn.getresponse()
        return resp.status, resp.read().decode(errors="replace")
    finally:
        conn.close()


BEARER = {"Authorization": f"Bearer {TOKEN}"}


# --- authentication -----------------------------------------------------------------------------------
@pytest.mark.parametrize("method,path", [("GET", "/status"), ("POST", "/checkpoints"), ("POST", "/savepoints"),
                                         ("POST", "/stop"), ("GET", "/checkpoints/chk-000001"),
                                         ("POST", "/promote")])
def test_protected_endpoints_answer_401_without_and_403_with_a_wrong_token(served, method, path):
    rt, server = served
    code, text = call(server.port, method, path)
    assert code == 401 and "bearer token" in json.loads(text)["error"]
    for header in (f"Bearer {TOKEN}x", f"Bearer {TOKEN[:-1]}", "Bearer ", f"bearer {TOKEN}", TOKEN):
        code, _ = call(server.port, method, path, headers={"Authorization": header})
        assert code in (401, 403), header
    assert call(server.port, method, path, headers={"Authorization": "Bearer nope"})[0] == 403
    assert rt.stops == [] and rt.status_calls == 0


def test_the_right_token_reaches_the_handlers(served):
    rt, server = served
    assert call(server.port, "GET", "/status", headers=BEARER) == (200, '{"phase": "stopped"}')
    assert call(server.port, "POST", "/checkpoints", b'{"wait": "none"}', BEARER)[0] == 409
    code, _ = call(server.port, "POST", "/stop", b'{"savepoint": "sp-1", "checkpoint": false}', BEARER)
    assert code == 202 and rt.stops[-1] == {"savepoint": "sp-1", "checkpoint": False}
    code, text = call(server.port, "POST", "/promote", b"{}", BEARER)
    assert code == 409 and "not a standby" in json.loads(text)["error"]
    rt.stops.clear()
    rt.status_calls = 0


def test_probes_and_metrics_stay_open_and_the_metrics_port_serves_only_metrics(served):
    _, server = served
    for path in ("/healthz", "/readyz", "/metrics"):
        assert call(server.port, "GET", path)[0] == 200
    assert call(server.metrics_port, "GET", "/metrics") == (200, "sparkpoint_up 1\n")
    for path in ("/status", "/healthz", "/stop"):
        assert call(server.metrics_port, "GET", path)[0] == 404
    assert call(server.metrics_port, "POST", "/stop", b"{}")[0] in (404, 405)


# --- malformed bodies ------------------------------------------------------------------------------------
@pytest.mark.parametrize("path,body,needle", [
    ("/checkpoints", b"{not json", "not JSON"),
    ("/checkpoints", b"\xff\xfe", "not JSON"),
    ("/checkpoints", b"[1, 2]", "JSON object"),
    ("/checkpoints", b'{"wait": "forever"}', "'wait'"),
    ("/checkpoints", b'{"timeout": NaN}', "not JSON"),
    ("/checkpoints", b'{"timeout": -1}', "'timeout'"),
    ("/checkpoints", b'{"timeout": true}', "'timeout'"),
    ("/checkpoints", b'{"name": "x"}', "unknown field 'name'"),
    ("/savepoints", b'{"name": 7}', "'name'"),
    ("/stop", b'{"checkpoint": "yes"}', "'checkpoint'"),
    ("/stop", b'{"savepoint": 3}', "'savepoint'"),
    ("/stop", b'{"drain": true}', "unknown field 'drain'"),
    ("/promote", b'{"attempt": "3"}', "'attempt'"),
    ("/promote", b'{"attempt": 0}', "'attempt'"),
])
def test_malformed_bodies_get_a_400_naming_the_problem(served, path, body, needle):
    rt, server = served
    code, text = call(server.port, "POST", path, body, {**BEARER, "Content-Type": "application/json"})
    assert code == 400 and needle in json.loads(text)["error"]
    assert rt.stops == []


def test_a_huge_body_gets_413(served):
    rt, server = served
    body = b'{"wait": "' + b"x" * (api_guard.MAX_BODY_BYTES + 10) + b'"}'
    code, _ = call(server.port, "POST", "/stop", body, BEARER)
    assert code == 413 and rt.stops == []


def test_a_slow_client_gets_408_and_does_not_block_others(served, monkeypatch):
    rt, server = served
    monkeypatch.setattr(api_guard, "BODY_TIMEOUT", 1.0)
    with socket.create_connection(("127.0.0.1", server.port), timeout=30) as slow:
        slow.sendall(f"POST /stop HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer {TOKEN}\r\n"
                     "Content-Length: 100\r\n\r\n{".encode())
        t0 = time.monotonic()
        assert call(server.port, "GET", "/healthz")[0] == 200  # served while the slow body trickles
        answer = slow.recv(4096).decode()
    assert answer.startswith("HTTP/1.1 408") and time.monotonic() - t0 < 20
    assert rt.stops == []


_json = st.recursive(st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False) | st.text(max_size=20),
                     lambda kids: st.lists(kids, max_size=4) | st.dictionaries(st.text(max_size=10), kids, max_size=4),
                     max_leaves=10)


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(path=st.sampled_from(["/checkpoints", "/savepoints", "/stop", "/promote", "/status", "/checkpoints/x",
                             "/nope"]),
       method=st.sampled_from(["GET", "POST", "PUT", "DELETE"]),
       body=st.one_of(st.none(), st.binary(max_size=200), _json.map(lambda v: json.dumps(v).encode())),
       auth=st.sampled_from([None, "Bearer wrong", "Basic abc", "Bearer " + "x" * 40]))
def test_fuzz_never_a_5xx_and_never_an_unauthenticated_effect(served, path, method, body, auth):
    rt, server = served
    code, _ = call(server.port, method, path, body, {"Authorization": auth} if auth else {})
    assert 400 <= code < 500
    assert rt.stops == [] and rt.status_calls == 0


def raw_status(port: int, auth: bytes) -> int:
    """The status code for GET /status with the Authorization header's raw bytes (http.client would
    refuse to send what an attacker's socket sends)."""
    with socket.create_connection(("127.0.0.1", port), timeout=30) as conn:
        conn.sendall(b"GET /status HTTP/1.1\r\nHost: x\r\nConnection: close\r\nAuthorization: " + auth + b"\r\n\r\n")
        answer = b""
        while chunk := conn.recv(4096):
            answer += chunk
    return int(answer.split(b" ", 2)[1])


@pytest.mark.parametrize("auth", [b"Bearer \xff\xfe", b"Bearer \xc3(", b"Bearer \xed\xa0\x80",
                                  b"Bearer t0ken\x80", b"Bearer \xe9\xe9"])
def test_a_malformed_bearer_token_is_a_403_not_a_500(served, auth):
    rt, server = served
    assert raw_status(server.port, auth) == 403
    assert rt.status_calls == 0


# --- pure parts --------------------------------------------------------------------------------------------
def test_token_matches():
    assert api_guard.token_matches(None, TOKEN) is None
    assert api_guard.token_matches("Basic x", TOKEN) is None
    assert api_guard.token_matches(f"Bearer {TOKEN}", TOKEN) is True
    assert api_guard.token_matches("Bearer é", TOKEN) is False
    assert api_guard.token_matches("Bearer \udcff", TOKEN) is False  # aiohttp's surrogate for a non-UTF-8 byte


@pytest.mark.parametrize("model,doc,message", [
    (api_guard.CheckpointBody, {"wait": "forever"}, "field 'wait' must be one of ['none', 'id', 'complete']"),
    (api_guard.CheckpointBody, {"timeout": None}, "field 'timeout' must be a number of seconds between 0 and 3600"),
    (api_guard.CheckpointBody, {"timeout": float("inf")}, "field 'timeout' must be a number"),  # JSON's 1e400
    (api_guard.CheckpointBody, {"timeout": "5"}, "field 'timeout' must be a number"),  # strict: no coercion
    (api_guard.CheckpointBody, {"name": "x"}, "unknown field 'name'; allowed: ['timeout', 'wait']"),
    (api_guard.SavepointBody, {"name": ""}, "field 'name' must be a string of 1 to 253 characters"),
    (api_guard.StopBody, {"savepoint": 0}, "field 'savepoint' must be a boolean or a savepoint name"),
    (api_guard.StopBody, {"checkpoint": 1}, "field 'checkpoint' must be a boolean"),
    (api_guard.StopBody, [], "body must be a JSON object"),
])
def test_body_models_refuse_with_a_message_naming_the_field(model, doc, message):
    with pytest.raises(api_guard.web.HTTPBadRequest) as refused:
        api_guard.validate(doc, model)
    assert json.loads(refused.value.text)["error"].startswith(message)


def test_body_models_defaults_and_the_wait_by_mode():
    assert api_guard.validate({}, api_guard.CheckpointBody).wait_seconds == 10.0
    assert api_guard.validate({"wait": "complete"}, api_guard.SavepointBody).wait_seconds == 600.0
    body = api_guard.validate({"wait": "complete", "timeout": 0, "name": "sp-1"}, api_guard.SavepointBody)
    assert (body.wait, body.wait_seconds, body.name) == ("complete", 0.0, "sp-1")
    stop = api_guard.validate({}, api_guard.StopBody)
    assert (stop.savepoint, stop.checkpoint) == (None, True)
    assert api_guard.validate({"savepoint": True}, api_guard.StopBody).savepoint is True


def test_resolve_token(tmp_path):
    f = tmp_path / "token"
    f.write_text(TOKEN + "\n")
    assert resolve_token(str(f), {}) == TOKEN
    assert resolve_token(None, {"SPARKPOINT_CONTROL_TOKEN_FILE": str(f), "SPARKPOINT_CONTROL_TOKEN": "y" * 20}) == TOKEN
    assert resolve_token(None, {"SPARKPOINT_CONTROL_TOKEN": "y" * 20}) == "y" * 20
    assert resolve_token(None, {}) is None
    with pytest.raises(TokenError, match="no-such"):
        resolve_token(str(tmp_path / "no-such"), {})
    f.write_text("short")
    with pytest.raises(TokenError, match="at least 16"):
        resolve_token(str(f), {})
    with pytest.raises(TokenError, match="at least 16"):
        resolve_token(None, {"SPARKPOINT_CONTROL_TOKEN": ""})


def test_bind_rules():
    assert is_loopback("127.0.0.1") and is_loopback("::1") and is_loopback("localhost") and is_loopback("127.3.0.9")
    assert not is_loopback("0.0.0.0") and not is_loopback("10.0.0.5") and not is_loopback("example.com")
    check_bind("127.0.0.1", None, False)
    check_bind("10.0.0.5", TOKEN, False)
    check_bind("10.0.0.5", None, True)
    with pytest.raises(TokenError, match="--insecure-no-auth"):
        check_bind("0.0.0.0", None, False)


def test_run_refuses_a_non_loopback_address_without_a_token(tmp_path):
    import subprocess
    import sys

    job = tmp_path / "job.yaml"
    job.write_text("job:\n  entrypoint: sparkpoint.examples.windowed_aggregation:build\n")
    r = subprocess.run([sys.executable, "-m", "sparkpoint.runtime.cli", "run", str(job), "--host", "0.0.0.0",
                        "--work-dir", str(tmp_path / "w")], capture_output=True, text=True, timeout=120,
                       env={"PATH": "/usr/bin:/bin"})
    assert r.returncode == 2 and "--insecure-no-auth" in r.stderr and "without a token" in r.stderr
