"""The kubelet's container-log endpoint, so `kubectl logs` (and the API's pods/log) work: the API
server proxies GET /containerLogs/<ns>/<pod>/<container> here over TLS with its kubelet-client
certificate, which this server requires (signed by the cluster CA).

Logs live in <state>/node/logs/<ns>_<pod>_<uid>/<container>/<restartCount>.log."""

from __future__ import annotations

import logging
import ssl
import threading
import time
import urllib.parse
from collections.abc import Callable
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

log = logging.getLogger("node-agent.logs")
FOLLOW_POLL_SECONDS = 0.2


def log_files(logs_dir: Path, namespace: str, pod: str, container: str, uid: str | None) -> list[Path]:
    """The container's log files, oldest run first, of the pod with `uid` (else the newest pod)."""
    pod_dirs = sorted(logs_dir.glob(f"{namespace}_{pod}_*"), key=lambda d: d.stat().st_mtime)
    if uid:
        pod_dirs = [d for d in pod_dirs if d.name.endswith(f"_{uid}")] or pod_dirs
    if not pod_dirs:
        return []
    runs = (pod_dirs[-1] / container).glob("*.log")
    return sorted(runs, key=lambda f: int(f.stem) if f.stem.isdigit() else -1)


def tail(data: bytes, lines: int | None) -> bytes:
    if lines is None:
        return data
    if lines <= 0:
        return b""
    parts = data.splitlines(keepends=True)
    return b"".join(parts[-lines:])


class LogsServer:
    def __init__(self, logs_dir: Path, cert: Path, key: Path, ca: Path,
                 current_uid: Callable[[str, str], str | None], is_running: Callable[[str, str, str], bool]):
        self.logs_dir, self.current_uid, self.is_running = logs_dir, current_uid, is_running
        handler = self._handler()
        self.httpd = ThreadingHTTPServer(("127.0.0.1", 0), handler)
        self.httpd.daemon_threads = True
        context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
        context.load_cert_chain(str(cert), str(key))
        context.load_verify_locations(str(ca))
        context.verify_mode = ssl.CERT_REQUIRED
        self.httpd.socket = context.wrap_socket(self.httpd.socket, server_side=True)

    @property
    def port(self) -> int:
        return self.httpd.server_address[1]

    def start(self) -> None:
        threading.Thread(target=self.httpd.serve_forever, name="logs-server", daemon=True).start()
        log.info("container logs served", extra={"port": self.port})

    def _handler(self) -> type[BaseHTTPRequestHandler]:
        server = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *args) -> None:  # quiet: the agent logs JSON lines
                pass

            def do_GET(self) -> None:  # noqa: N802 - http.server's naming
                url = urllib.parse.urlparse(self.path)
                parts = url.path.strip("/").split("/")
                if len(parts) != 4 or parts[0] != "containerLogs":
                    self.send_error(404, "only /containerLogs/<namespace>/<pod>/<container> is served")
                    return
                _, namespace, pod, container = parts
                query = {k: v[-1] for k, v in urllib.parse.parse_qs(url.query).items()}
                files = log_files(server.logs_dir, namespace, pod, container, server.current_uid(namespace, pod))
                previous = query.get("previous") in ("true", "1")
                if previous:
                    files = files[-2:-1]
                if not files:
                    self.send_error(404, f"no {'previous ' if previous else ''}logs for {namespace}/{pod}/{container}")
                    return
                lines = int(query["tailLines"]) if "tailLines" in query else None
                self.send_response(200)
                self.send_header("Content-Type", "text/plain")
                self.end_headers()
                with open(files[-1], "rb") as handle:
                    self.wfile.write(tail(handle.read(), lines))
                    self.wfile.flush()
                    follow = query.get("follow") in ("true", "1") and not previous
                    while follow and server.is_running(namespace, pod, container):
                        chunk = handle.read()
                        if chunk:
                            self.wfile.write(chunk)
                            self.wfile.flush()
                        else:
                            time.sleep(FOLLOW_POLL_SECONDS)
                    self.wfile.write(handle.read())

        return Handler
