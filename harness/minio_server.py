"""Launch a throwaway MinIO server on 127.0.0.1 for tests, benchmarks and the local cluster.

The binary comes from $SPARKPOINT_MINIO_BIN or `scripts/ensure-minio.sh` (pinned, cached build).
Each server gets a random free port, a temp data dir and generated credentials, and is stopped
(and its data removed) on exit. Credentials are available to the caller, never logged.

    python -m harness.minio_server --env-file /tmp/minio.env   # run until Ctrl-C
"""

from __future__ import annotations

import argparse
import contextlib
import logging
import os
import secrets
import shutil
import signal
import socket
import subprocess
import tempfile
import threading
import urllib.error
import urllib.request
from pathlib import Path

from sparkpoint.runtime.store import ObjectStore, StoreError, open_store
from sparkpoint.runtime.store.s3 import S3Store

from .polling import WaitTimeout, wait_until

log = logging.getLogger("sparkpoint.minio")
REPO_ROOT = Path(__file__).resolve().parents[1]


class _Exited(Exception):
    """The server process ended while starting."""


def find_minio_binary() -> str:
    explicit = os.environ.get("SPARKPOINT_MINIO_BIN")
    if explicit:
        if not os.access(explicit, os.X_OK):
            raise StoreError(f"SPARKPOINT_MINIO_BIN={explicit} is not an executable file")
        return explicit
    script = REPO_ROOT / "scripts" / "ensure-minio.sh"
    if not script.exists():
        found = shutil.which("minio")
        if found:
            return found
        raise StoreError("no MinIO server binary: set SPARKPOINT_MINIO_BIN or run scripts/ensure-minio.sh")
    out = subprocess.run([str(script)], check=True, capture_output=True, text=True)
    return out.stdout.strip().splitlines()[-1]


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class MinioServer:
    def __init__(self, binary: str | None = None, data_dir: str | None = None, startup_timeout: float = 60.0,
                 extra_env: dict[str, str] | None = None, host: str = "127.0.0.1"):
        self.extra_env = dict(extra_env or {})  # more server settings (e.g. an OpenID provider for STS)
        self.host = host  # another address than loopback: pods of the local cluster's real node reach it
        self.binary = binary or find_minio_binary()
        self._own_data = data_dir is None
        self.data_dir = data_dir or tempfile.mkdtemp(prefix="sparkpoint-minio-")
        self.access_key = "sp" + secrets.token_hex(8)
        self.secret_key = secrets.token_urlsafe(24)
        self.startup_timeout = startup_timeout
        self.proc: subprocess.Popen[bytes] | None = None
        self.port = 0
        os.makedirs(self.data_dir, exist_ok=True)
        self._log_path = Path(self.data_dir.rstrip("/") + ".log")

    @property
    def endpoint(self) -> str:
        return f"http://{self.host}:{self.port}"

    def env(self) -> dict[str, str]:
        """Environment for open_store("s3://…") and the CLI."""
        return {"SPARKPOINT_S3_ENDPOINT": self.endpoint, "AWS_ACCESS_KEY_ID": self.access_key,
                "AWS_SECRET_ACCESS_KEY": self.secret_key, "AWS_REGION": "us-east-1"}

    def start(self) -> MinioServer:
        last_error = ""
        for _ in range(3):  # a port grabbed by someone else between probe and bind: try another
            self.port = free_port()
            self._launch(console_port=free_port())
            if self._wait_ready():
                log.info("minio started", extra={"endpoint": self.endpoint, "pid": self.proc.pid})
                return self
            last_error = self._log_path.read_text(errors="replace")[-2000:]
            self._kill()
        raise StoreError(f"MinIO server did not become ready; log tail:\n{last_error}")

    def _launch(self, console_port: int) -> None:
        """Start the server on self.port over self.data_dir, without waiting for it to be ready."""
        env = {**os.environ, "MINIO_ROOT_USER": self.access_key, "MINIO_ROOT_PASSWORD": self.secret_key,
               "MINIO_BROWSER": "off", "MINIO_UPDATE": "off", **self.extra_env}
        with open(self._log_path, "ab") as out:
            self.proc = subprocess.Popen(
                [self.binary, "server", "--quiet", "--address", f"{self.host}:{self.port}",
                 "--console-address", f"127.0.0.1:{console_port}", self.data_dir],
                env=env, stdout=out, stderr=subprocess.STDOUT, start_new_session=True)

    def _wait_ready(self) -> bool:
        def exited() -> None:
            if self.proc is None or self.proc.poll() is not None:
                raise _Exited

        try:
            wait_until(self._ready, self.startup_timeout, "MinIO to be ready", interval=0.1, give_up=exited)
            return True
        except (WaitTimeout, _Exited):
            return False

    def _ready(self) -> bool:
        with contextlib.suppress(OSError, urllib.error.URLError), \
                urllib.request.urlopen(f"{self.endpoint}/minio/health/ready", timeout=1) as resp:
            return resp.status == 200
        return False

    def _kill(self) -> None:
        if self.proc and self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(10)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        self.proc = None

    def stop(self) -> None:
        self._kill()
        if self._own_data:
            shutil.rmtree(self.data_dir, ignore_errors=True)
            self._log_path.unlink(missing_ok=True)

    def make_bucket(self, name: str) -> None:
        S3Store(self.endpoint, name, "", self.access_key, self.secret_key).create_bucket()

    def store_url(self, bucket: str, prefix: str = "") -> str:
        return f"s3://{bucket}/{prefix}".rstrip("/")

    def open(self, bucket: str, prefix: str = "") -> ObjectStore:
        return open_store(self.store_url(bucket, prefix), env=self.env())

    def __enter__(self) -> MinioServer:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()


def main() -> None:
    parser = argparse.ArgumentParser(description="Run a throwaway MinIO server until interrupted.")
    parser.add_argument("--env-file", help="write SPARKPOINT_S3_ENDPOINT and credentials here (mode 600)")
    parser.add_argument("--bucket", action="append", default=[], help="create this bucket (repeatable)")
    parser.add_argument("--data-dir", help="keep data here instead of a temp dir")
    args = parser.parse_args()
    # SIGTERM must clean up like Ctrl-C: its default action would kill us and orphan the server
    # (it runs in its own session) and its temp data dir. Installed before the start, so a signal
    # during startup also ends in stop().
    stop = threading.Event()
    for sig in (signal.SIGINT, signal.SIGTERM):
        signal.signal(sig, lambda *_: stop.set())
    with MinioServer(data_dir=args.data_dir) as server:
        for bucket in args.bucket:
            server.make_bucket(bucket)
        if args.env_file:
            fd = os.open(args.env_file, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
            with os.fdopen(fd, "w") as f:
                f.writelines(f"export {k}={v}\n" for k, v in server.env().items())
        print(f"minio ready at {server.endpoint}", flush=True)
        while not stop.wait(0.5):
            if server.proc is None or server.proc.poll() is not None:
                raise SystemExit("minio server exited unexpectedly")


if __name__ == "__main__":
    main()
