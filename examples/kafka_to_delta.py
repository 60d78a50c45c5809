"""Kafka in, a Delta Lake table out: per-user totals in event-time windows (examples/kafka_to_delta.yaml).

The job is the Kafka example's aggregation (sparkpoint/examples/kafka_events.py: JSON events
{"user", "amount", "ts"} read from a topic, windows closed by the watermark, each (window, user) row
emitted once); the spec's `job.sink.kind: delta` makes its output a Delta table in the job's store,
at `<store>/<namespace>/<name>/outputs/<sink path>/`, one Delta commit per checkpoint. Any Delta
reader reads it; `python examples/kafka_to_delta.py <table>` prints it with polars:

    python examples/kafka_to_delta.py .work/default/kafka-to-delta/store/default/kafka-to-delta/outputs/user-totals

A broker that needs SASL: the credentials come from the pod's environment, which the manifest's
spec.podTemplate fills from a Secret (env valueFrom.secretKeyRef), never from job.args (those land in
the job's ConfigMap). KAFKA_SASL_USERNAME and KAFKA_SASL_PASSWORD, with KAFKA_SASL_MECHANISM (PLAIN,
SCRAM-SHA-256 or SCRAM-SHA-512; default PLAIN) and KAFKA_SECURITY_PROTOCOL (default SASL_SSL). Spark
redacts the JAAS option in its UI and logs (its value holds "password").
"""

from __future__ import annotations

import os
import sys
from collections.abc import Mapping
from typing import Any

from sparkpoint.examples.kafka_events import build as _aggregate

_LOGIN_MODULES = {"PLAIN": "org.apache.kafka.common.security.plain.PlainLoginModule",
                  "SCRAM-SHA-256": "org.apache.kafka.common.security.scram.ScramLoginModule",
                  "SCRAM-SHA-512": "org.apache.kafka.common.security.scram.ScramLoginModule"}


def sasl_options(env: Mapping[str, str]) -> dict[str, str]:
    """The Kafka source's SASL options from the environment; {} when KAFKA_SASL_USERNAME is not set."""
    user, password = env.get("KAFKA_SASL_USERNAME"), env.get("KAFKA_SASL_PASSWORD", "")
    if not user:
        return {}
    mechanism = env.get("KAFKA_SASL_MECHANISM") or "PLAIN"
    if mechanism not in _LOGIN_MODULES:
        raise ValueError(f"KAFKA_SASL_MECHANISM {mechanism!r}: use one of {', '.join(_LOGIN_MODULES)}")

    def quoted(text: str) -> str:
        return '"' + text.replace("\\", "\\\\").replace('"', '\\"') + '"'

    return {"kafka.security.protocol": env.get("KAFKA_SECURITY_PROTOCOL") or "SASL_SSL",
            "kafka.sasl.mechanism": mechanism,
            "kafka.sasl.jaas.config": f"{_LOGIN_MODULES[mechanism]} required username={quoted(user)} "
                                      f"password={quoted(password)};"}


def build(spark: Any, bootstrap: str, topic: str, window: str = "10 seconds", watermark: str = "30 seconds",
          max_offsets_per_trigger: int | None = None, options: dict[str, Any] | None = None) -> Any:
    """The job's streaming DataFrame (the runtime owns writeStream and the sink)."""
    return _aggregate(spark, bootstrap, topic, window, watermark, max_offsets_per_trigger,
                      sasl_options(os.environ) | (options or {}))


def read_table(uri: str, storage_options: dict[str, str] | None = None) -> Any:
    """The table's current version as a polars DataFrame, newest windows last (s3:// URIs need the
    store's endpoint and credentials in storage_options, e.g. AWS_ENDPOINT_URL)."""
    import polars as pl

    return pl.read_delta(uri, storage_options=storage_options).sort("window", "user")


if __name__ == "__main__":
    print(read_table(sys.argv[1]))
