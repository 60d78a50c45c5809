"""Launch a throwaway single-node Kafka broker (KRaft, broker and controller in one JVM) on 127.0.0.1
for tests, `make demo-kafka` and the local cluster.

The jars are the pinned set `kafka` of jars.lock (scripts/fetch_jars.py, cached per version). Each
broker gets free ports and a temp data dir, formatted once; `halt()` ends the process but keeps both,
so `start()` brings the same broker back with its topics (an outage), and `stop()` also removes the
data. Topics are created on first use with `partitions` partitions.

    python -m harness.kafka_server          # prints the bootstrap address, runs until Ctrl-C
"""

from __future__ import annotations

import argparse
import base64
import contextlib
import os
import shutil
import signal
import socket
import struct
import subprocess
import sys
import tempfile
import threading
import time
import uuid
from collections.abc import Iterable
from pathlib import Path
from typing import Any

from .minio_server import free_port
from .polling import WaitTimeout, wait_until

REPO_ROOT = Path(__file__).resolve().parents[1]

# Console logging at WARN: the probe below, not a log line, says when the broker is up.
LOG4J2 = """status = error
appender.out.type = Console
appender.out.name = out
appender.out.layout.type = PatternLayout
appender.out.layout.pattern = [%d] %p %m (%c)%n
rootLogger.level = WARN
rootLogger.appenderRef.out.ref = out
"""


class KafkaError(Exception):
    """The broker could not be set up or did not answer."""


def jars_dir(name: str) -> Path:
    """A pinned jar set of jars.lock, fetched on first use (scripts/fetch_jars.py prints its dir)."""
    out = subprocess.run([sys.executable, str(REPO_ROOT / "scripts" / "fetch_jars.py"), name],
                         check=True, capture_output=True, text=True)
    return Path(out.stdout.strip().splitlines()[-1])


def java() -> str:
    home = os.environ.get("JAVA_HOME")
    return str(Path(home, "bin", "java")) if home else "java"


def cluster_id() -> str:
    """What `kafka-storage random-uuid` prints (a Uuid: 16 random bytes, base64url without padding,
    never starting with '-'), made here to save a JVM start."""
    while True:
        text = base64.urlsafe_b64encode(uuid.uuid4().bytes).decode().rstrip("=")
        if not text.startswith("-"):
            return text


def api_versions_ok(host: str, port: int, timeout: float = 1.0) -> bool:
    """One ApiVersions v0 request: the broker answers it with error code 0 once it serves clients."""
    client = b"sparkpoint-probe"
    body = struct.pack(">hhih", 18, 0, 7, len(client)) + client
    try:
        with socket.create_connection((host, port), timeout=timeout) as s:
            s.sendall(struct.pack(">i", len(body)) + body)
            head = _read(s, 4)
            reply = _read(s, struct.unpack(">i", head)[0])
    except OSError:
        return False
    correlation, error = struct.unpack(">ih", reply[:6])
    return correlation == 7 and error == 0


def _read(s: socket.socket, n: int) -> bytes:
    data = b""
    while len(data) < n:
        chunk = s.recv(n - len(data))
        if not chunk:
            raise OSError("connection closed")
        data += chunk
    return data


class KafkaServer:
    def __init__(self, data_dir: str | None = None, partitions: int = 2, startup_timeout: float = 90.0,
                 heap: str = "512m", host: str = "127.0.0.1"):
        """`host`: the address it listens on and advertises (the local cluster's real node: the host's
        address, which pods reach; loopback is the pod's own there)."""
        self._own_data = data_dir is None
        self.data_dir = Path(data_dir or tempfile.mkdtemp(prefix="sparkpoint-kafka-"))
        self.partitions, self.startup_timeout, self.heap, self.host = partitions, startup_timeout, heap, host
        self.port = self.controller_port = 0
        self.proc: subprocess.Popen[bytes] | None = None
        self.log_path = Path(str(self.data_dir).rstrip("/") + ".log")
        self.start_seconds = 0.0  # the last start, process to first answer (reported by the tests)

    @property
    def bootstrap(self) -> str:
        return f"{self.host}:{self.port}"

    def command(self) -> list[str]:
        """The broker's command line, after formatting the data dir on first use; a data dir formatted
        earlier keeps its ports (read back from its config). The local cluster starts it itself."""
        libs = jars_dir("kafka")
        config = self.data_dir / "server.properties"
        if not config.exists():
            self._format(libs, config)
        elif not self.port:
            self.read_listeners(config)
        return [java(), f"-Xmx{self.heap}", "-Xms64m",
                f"-Dlog4j2.configurationFile={self.data_dir / 'log4j2.properties'}",
                "-cp", f"{libs}/*", "kafka.Kafka", str(config)]

    def answers(self) -> bool:
        return api_versions_ok(self.host, self.port)

    def start(self) -> KafkaServer:
        """Format on the first start; later starts reuse the data and ports (a broker coming back)."""
        argv = self.command()
        with open(self.log_path, "ab") as out:
            started = time.monotonic()
            self.proc = subprocess.Popen(argv, stdout=out, stderr=subprocess.STDOUT, start_new_session=True)

        def exited() -> None:
            if self.proc is None or self.proc.poll() is not None:
                raise KafkaError(f"kafka exited while starting; log tail:\n{self._log_tail()}")
        try:
            wait_until(self.answers, self.startup_timeout,
                       "Kafka to answer", interval=0.2, give_up=exited)
        except WaitTimeout:
            self.halt()
            raise KafkaError(f"kafka did not answer in {self.startup_timeout:.0f} s; log tail:\n"
                             f"{self._log_tail()}") from None
        self.start_seconds = time.monotonic() - started
        return self

    def _format(self, libs: Path, config: Path) -> None:
        self.port, self.controller_port = free_port(), free_port()
        props = {
            "process.roles": "broker,controller", "node.id": "1",
            # the controller stays on loopback: only the broker itself talks to it
            "listeners": f"PLAINTEXT://{self.host}:{self.port},CONTROLLER://127.0.0.1:{self.controller_port}",
            "advertised.listeners": f"PLAINTEXT://{self.host}:{self.port}",
            "controller.listener.names": "CONTROLLER",
            "listener.security.protocol.map": "PLAINTEXT:PLAINTEXT,CONTROLLER:PLAINTEXT",
            "controller.quorum.bootstrap.servers": f"127.0.0.1:{self.controller_port}",
            "log.dirs": str(self.data_dir / "data"), "num.partitions": str(self.partitions),
            # one node: internal topics cannot have more replicas than that
            "offsets.topic.replication.factor": "1", "transaction.state.log.replication.factor": "1",
            "transaction.state.log.min.isr": "1", "share.coordinator.state.topic.replication.factor": "1",
            "share.coordinator.state.topic.min.isr": "1", "group.initial.rebalance.delay.ms": "0",
        }
        self.data_dir.mkdir(parents=True, exist_ok=True)
        config.write_text("".join(f"{k}={v}\n" for k, v in props.items()))
        (self.data_dir / "log4j2.properties").write_text(LOG4J2)
        # --standalone: a single-node dynamic quorum (controller.quorum.bootstrap.servers, no voters)
        run = subprocess.run([java(), "-cp", f"{libs}/*", "kafka.tools.StorageTool", "format", "--standalone",
                              "--config", str(config), "--cluster-id", cluster_id()],
                             capture_output=True, text=True)
        if run.returncode != 0:
            config.unlink()
            raise KafkaError(f"kafka storage format failed: {run.stdout[-2000:]}{run.stderr[-2000:]}")

    def read_listeners(self, config: Path) -> None:
        """The host and ports a data dir was formatted with (its config)."""
        props = dict(line.split("=", 1) for line in config.read_text().splitlines() if "=" in line)
        ports = dict(item.split("://") for item in props["listeners"].split(","))
        self.host, port = ports["PLAINTEXT"].rsplit(":", 1)
        self.port = int(port)
        self.controller_port = int(ports["CONTROLLER"].rsplit(":", 1)[1])

    def _log_tail(self) -> str:
        with contextlib.suppress(OSError):
            return self.log_path.read_text(errors="replace")[-3000:]
        return ""

    def alive(self) -> bool:
        return self.proc is not None and self.proc.poll() is None

    def halt(self, hard: bool = False) -> None:
        """End the broker (SIGKILL with `hard`), keeping its data and ports for the next start()."""
        if self.proc and self.proc.poll() is None:
            self.proc.send_signal(signal.SIGKILL if hard else signal.SIGTERM)
            try:
                self.proc.wait(30)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        self.proc = None

    def stop(self) -> None:
        self.halt(hard=self._own_data)  # data about to be removed needs no clean shutdown (which is slow)
        if self._own_data:
            shutil.rmtree(self.data_dir, ignore_errors=True)
            self.log_path.unlink(missing_ok=True)

    def __enter__(self) -> KafkaServer:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()


def produce(spark: Any, bootstrap: str, topic: str, values: Iterable[str]) -> int:
    """Write `values` to `topic` in their order (key = the value's position) through Spark's Kafka
    writer: no Python Kafka client needed, and its producer retries while a new topic gets its leader.
    One task writes them all: tasks writing side by side would interleave a partition's records, and
    a consumer would meet event times out of order (late events for a watermark)."""
    rows = [(str(i), v) for i, v in enumerate(values)]
    if rows:
        (spark.createDataFrame(rows, "key string, value string").coalesce(1).write.format("kafka")
         .option("kafka.bootstrap.servers", bootstrap).option("topic", topic).save())
    return len(rows)


def main() -> None:
    parser = argparse.ArgumentParser(description="Run a throwaway Kafka broker until interrupted.")
    parser.add_argument("--data-dir", help="keep data here instead of a temp dir")
    parser.add_argument("--partitions", type=int, default=2, help="partitions of auto-created topics")
    args = parser.parse_args()
    stop = threading.Event()  # SIGTERM cleans up like Ctrl-C (the broker runs in its own session)
    for sig in (signal.SIGINT, signal.SIGTERM):
        signal.signal(sig, lambda *_: stop.set())
    with KafkaServer(data_dir=args.data_dir, partitions=args.partitions) as server:
        print(f"kafka ready at {server.bootstrap} (started in {server.start_seconds:.1f} s)", flush=True)
        while not stop.wait(0.5):
            if not server.alive():
                raise SystemExit("kafka exited unexpectedly")


if __name__ == "__main__":
    main()
