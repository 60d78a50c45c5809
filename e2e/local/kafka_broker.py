"""The local cluster's Kafka broker: started by `KAFKA=1 cluster.py up` or `cluster.py kafka`, stopped
by `down` with the rest.

One broker (KRaft, harness/kafka_server.py's command line and format) beside MinIO, as a component
of the cluster: its pid in `<state>/pids/kafka.pid`, its log in `<state>/logs/kafka.log`, its data in
`<state>/kafka-data/` (topics survive a `down`/`up`), and its address in `<state>/kafka.json`
(`{"bootstrap": "host:port"}`). It listens on the address pods reach MinIO at: loopback on the node
agent (pods are host processes), the host's address on the real node (pods have their own network
namespace, whose loopback is their own).

Opt-in, not always: a broker is a JVM (512 MiB heap) that every cluster would carry, and the CI tier
has no Kafka test; the e2e Kafka test starts it on demand (`cluster.py kafka` is idempotent).
"""

from __future__ import annotations

import json
import logging
import shutil
from collections.abc import Callable
from pathlib import Path

import components as c

from harness.kafka_server import KafkaServer

log = logging.getLogger("cluster")
NAME = "kafka"


def info_path(state: Path) -> Path:
    return state / "kafka.json"


def broker(layout: c.Layout) -> KafkaServer:
    """The cluster's broker (not started): the data dir in the state dir, the pods' address."""
    return KafkaServer(data_dir=str(layout.state / "kafka-data"), host=layout.host_ip)


def stale(server: KafkaServer, port_is_free: Callable[[int], bool], host: str) -> bool:
    """A data dir formatted for another address, or whose kept ports something else now holds: it is
    formatted again (its topics are test data). The controller's port is part of the formatted quorum,
    so a port cannot simply be replaced in the config."""
    config = server.data_dir / "server.properties"
    if not config.exists():
        return False
    server.read_listeners(config)
    return server.host != host or not (port_is_free(server.port) and port_is_free(server.controller_port))


def start(layout: c.Layout, start_process: Callable[..., None], wait_for: Callable[..., None],
          running: Callable[[str], bool], port_is_free: Callable[[int], bool]) -> str:
    """Starts the broker unless it runs; returns its bootstrap address (also written to kafka.json)."""
    server = broker(layout)
    if not running(NAME) and stale(server, port_is_free, layout.host_ip):
        log.info("kafka data dir formatted again", extra={"data_dir": str(server.data_dir)})
        shutil.rmtree(server.data_dir)
        server = broker(layout)
    argv = server.command()
    start_process(layout, NAME, argv)
    wait_for(f"Kafka to answer at {server.bootstrap}", server.answers, 120, layout, NAME)
    info_path(layout.state).write_text(json.dumps({"bootstrap": server.bootstrap}))
    log.info("kafka ready", extra={"bootstrap": server.bootstrap})
    return server.bootstrap
