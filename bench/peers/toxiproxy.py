"""A toxiproxy server on loopback between the jobs and MinIO, to inject round-trip latency."""

from __future__ import annotations

import contextlib
import json
import socket
import subprocess
import tempfile
import time
import urllib.request
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class Toxiproxy:
    def __init__(self) -> None:
        self.binary = subprocess.run([str(REPO / "scripts" / "ensure-toxiproxy.sh")], check=True,
                                     capture_output=True, text=True).stdout.strip()
        self.api_port = _free_port()
        self.proc: subprocess.Popen[bytes] | None = None

    def start(self) -> Toxiproxy:
        log = open(tempfile.mktemp(prefix="toxiproxy-", suffix=".log"), "wb")  # noqa: SIM115
        self.proc = subprocess.Popen([self.binary, "-host", "127.0.0.1", "-port", str(self.api_port)],
                                     stdout=log, stderr=subprocess.STDOUT, start_new_session=True)
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline:
            try:
                self._call("GET", "/version")
                return self
            except OSError:
                time.sleep(0.1)
        raise RuntimeError("toxiproxy did not start")

    def _call(self, method: str, path: str, body: dict | None = None) -> str:
        req = urllib.request.Request(f"http://127.0.0.1:{self.api_port}{path}", method=method,
                                     data=json.dumps(body).encode() if body is not None else None,
                                     headers={"Content-Type": "application/json"})
        with urllib.request.urlopen(req, timeout=10) as resp:
            return resp.read().decode()

    def proxy(self, name: str, upstream: str) -> str:
        """Create a proxy to `upstream` (host:port); returns the proxy's host:port."""
        listen = f"127.0.0.1:{_free_port()}"
        self._call("POST", "/proxies", {"name": name, "listen": listen, "upstream": upstream, "enabled": True})
        return listen

    def set_latency(self, name: str, round_trip_ms: int) -> None:
        """Half the round trip on each direction, so a request/response pair pays `round_trip_ms`."""
        for stream in ("upstream", "downstream"):
            toxic = f"latency_{stream}"
            with contextlib.suppress(OSError):  # not there yet
                self._call("DELETE", f"/proxies/{name}/toxics/{toxic}")
            if round_trip_ms:
                self._call("POST", f"/proxies/{name}/toxics", {
                    "name": toxic, "type": "latency", "stream": stream, "toxicity": 1.0,
                    "attributes": {"latency": round_trip_ms // 2, "jitter": 0}})

    def stop(self) -> None:
        if self.proc and self.proc.poll() is None:
            self.proc.terminate()
            self.proc.wait(10)
