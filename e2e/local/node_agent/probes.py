"""Readiness and liveness probes (httpGet, tcpSocket, exec) with the kubelet's thresholds."""

from __future__ import annotations

import socket
import subprocess
import time
import urllib.error
import urllib.request
from dataclasses import dataclass


def _port(port: int | str, container: dict) -> int:
    if isinstance(port, int) or str(port).isdigit():
        return int(port)
    for declared in container.get("ports") or []:
        if declared.get("name") == port:
            return int(declared["containerPort"])
    raise ValueError(f"container has no port named {port!r}")


def run_probe(probe: dict, container: dict, pod_ip: str, exec_argv_prefix: list[str] | None = None,
              env: dict[str, str] | None = None) -> bool:
    timeout = probe.get("timeoutSeconds", 1)
    try:
        if "httpGet" in probe:
            http = probe["httpGet"]
            scheme = http.get("scheme", "HTTP").lower()
            url = f"{scheme}://{http.get('host') or pod_ip}:{_port(http['port'], container)}{http.get('path', '/')}"
            with urllib.request.urlopen(url, timeout=timeout) as response:
                return 200 <= response.status < 400
        if "tcpSocket" in probe:
            tcp = probe["tcpSocket"]
            with socket.create_connection((tcp.get("host") or pod_ip, _port(tcp["port"], container)), timeout):
                return True
        if "exec" in probe:
            argv = [*(exec_argv_prefix or []), *probe["exec"]["command"]]
            return subprocess.run(argv, env=env, timeout=timeout, capture_output=True).returncode == 0
    except (OSError, urllib.error.URLError, subprocess.TimeoutExpired, ValueError):
        return False
    return False


@dataclass
class ProbeTracker:
    """Applies initialDelaySeconds, periodSeconds and the success/failure thresholds."""

    probe: dict
    started: float
    next_at: float = 0.0
    successes: int = 0
    failures: int = 0
    result: bool | None = None  # None until the threshold is first reached

    def __post_init__(self) -> None:
        self.next_at = self.started + self.probe.get("initialDelaySeconds", 0)

    def due(self, now: float) -> bool:
        return now >= self.next_at

    def record(self, ok: bool, now: float) -> None:
        self.next_at = now + self.probe.get("periodSeconds", 10)
        if ok:
            self.successes, self.failures = self.successes + 1, 0
            if self.successes >= self.probe.get("successThreshold", 1):
                self.result = True
        else:
            self.failures, self.successes = self.failures + 1, 0
            if self.failures >= self.probe.get("failureThreshold", 3):
                self.result = False


def monotonic() -> float:
    return time.monotonic()
