"""The cluster's Kafka broker: when a kept data dir is formatted again (kafka.stale)."""

from pathlib import Path

import kafka_broker as kafka

from harness.kafka_server import KafkaServer


def formatted(tmp_path: Path, host: str, port: int, controller: int) -> KafkaServer:
    data = tmp_path / "kafka-data"
    data.mkdir()
    (data / "server.properties").write_text(
        f"node.id=1\nlisteners=PLAINTEXT://{host}:{port},CONTROLLER://127.0.0.1:{controller}\n")
    return KafkaServer(data_dir=str(data), host=host)


def test_a_kept_data_dir_is_reused_when_its_address_and_ports_are_free(tmp_path):
    server = formatted(tmp_path, "127.0.0.1", 41001, 41002)
    assert not kafka.stale(server, lambda port: True, "127.0.0.1")
    assert (server.host, server.port, server.controller_port) == ("127.0.0.1", 41001, 41002)


def test_a_taken_port_or_another_address_formats_it_again(tmp_path):
    server = formatted(tmp_path, "127.0.0.1", 41001, 41002)
    assert kafka.stale(server, lambda port: port != 41002, "127.0.0.1")  # the controller's port is taken
    assert kafka.stale(server, lambda port: port != 41001, "127.0.0.1")
    assert kafka.stale(server, lambda port: True, "10.0.0.7")  # the cluster now runs the real node


def test_no_data_dir_is_not_stale(tmp_path):
    assert not kafka.stale(KafkaServer(data_dir=str(tmp_path / "none")), lambda port: True, "127.0.0.1")

