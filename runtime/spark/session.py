"""Build the SparkSession from the job spec's `spark` section."""

from __future__ import annotations

import os
from pathlib import Path

from sparkpoint.runtime.spec import (
    DRIVER_MEMORY_ENV,
    SPARK_UI_PORT_ENV,
    SPARK_UI_PROXY_BASE_ENV,
    SparkSection,
    StandbySection,
)

from .identity import ensure_user_identity

ROCKSDB_PROVIDER = "org.apache.spark.sql.execution.streaming.state.RocksDBStateStoreProvider"
HDFS_PROVIDER = "org.apache.spark.sql.execution.streaming.state.HDFSBackedStateStoreProvider"


# How many state versions a RocksDB store keeps as changelogs before the next snapshot (Spark's
# minDeltasForSnapshot). A restore loads the newest snapshot and replays every changelog after it, so
# the first batch after any restore pays up to this many replays per partition: 4-7 us of CPU per
# replayed row here, ~4-8 of the 8-12 s of CPU a promoted standby's first batch spent in its state stage at
# 25 changelogs of a job whose batches rewrite all of its 50,000 keys (docs/benchmarks.md, "The
# promoted first batch"). A job whose standby warms up (spec.standby.warmup) asked for a fast promotion.
DELTAS_PER_SNAPSHOT = 50
DELTAS_PER_SNAPSHOT_FAST_RESTORE = 10


def wants_fast_restore(standby: StandbySection | None) -> bool:
    """A job whose standby warms up (spec.standby.warmup, on) snapshots every DELTAS_PER_SNAPSHOT_FAST_RESTORE."""
    return standby is not None and standby.enabled and standby.warmup


def session_conf(spark: SparkSection, event_log: dict[str, str] | None = None,
                 fast_restore: bool = False) -> dict[str, str]:
    """Defaults that keep a local driver lean, then the state store choice, then the user's conf.
    event_log: the runtime's event log settings (service/event_log.py), which the user's conf may tune.
    fast_restore: snapshot the state stores every DELTAS_PER_SNAPSHOT_FAST_RESTORE versions."""
    conf = {
        **ui_conf(spark),
        **(event_log or {}),
        "spark.ui.showConsoleProgress": "false",
        "spark.sql.shuffle.partitions": str(spark.shuffle_partitions),
        "spark.sql.streaming.stateStore.providerClass":
            ROCKSDB_PROVIDER if spark.state_store == "rocksdb" else HDFS_PROVIDER,
        "spark.sql.streaming.stateStore.rocksdb.changelogCheckpointing.enabled":
            "true" if spark.changelog_checkpointing else "false",
        # A RocksDB snapshot flushes the memtable into a new SST, and every few flushes L0 compacts,
        # rewriting SSTs a checkpoint must upload again: at 5 (two flushes per 10 s checkpoint at 1 s
        # batches) checkpoints uploaded 2.7-6.3x the changed bytes, at 50 0.55x (docs/benchmarks.md).
        # The price is a longer changelog replay on restore (at most 50 changelogs per partition), which
        # fast_restore trades back for 5-9% more bytes per checkpoint in the promotion bench's job.
        "spark.sql.streaming.stateStore.minDeltasForSnapshot":
            str(DELTAS_PER_SNAPSHOT_FAST_RESTORE if fast_restore else DELTAS_PER_SNAPSHOT),
        "spark.sql.streaming.stateStore.maintenanceInterval": "15s",
        # In a pod the operator sizes the heap from the container's limit (spec_rules.driver_memory).
        "spark.driver.memory": os.environ.get(DRIVER_MEMORY_ENV, "1g"),
        "spark.sql.adaptive.enabled": "false",  # AQE is disabled for streaming anyway; avoid the warning
    }
    conf.update(spark.conf)
    jars = extra_jars()
    if jars:  # the user's spark.jars stay; the runtime's connectors come after them
        conf["spark.jars"] = ",".join(filter(None, [conf.get("spark.jars", ""), *jars]))
    return conf


def ui_conf(spark: SparkSection) -> dict[str, str]:
    """The live UI when the spec wants it and the pod names its port (the operator sets the env var);
    a local run without the var keeps it off. Jetty binds 0.0.0.0 (no SPARK_LOCAL_IP is set), so the
    Service and a port-forward reach it."""
    port = os.environ.get(SPARK_UI_PORT_ENV)
    if not (spark.ui.enabled and port):
        return {"spark.ui.enabled": "false"}
    # Read-only: Spark's kill links would let whoever reaches the UI fail a batch (docs/security.md).
    conf = {"spark.ui.enabled": "true", "spark.ui.port": port, "spark.ui.killEnabled": "false"}
    base = os.environ.get(SPARK_UI_PROXY_BASE_ENV)
    if base:  # behind the chart's Ingress: the UI's links carry its path (docs/design.md §9), and
        # the runtime's front (service/ui_front.py) takes the pod's UI port and strips the path
        conf.update({"spark.ui.proxyBase": base, "spark.ui.port": "0"})
    return conf


def extra_jars() -> list[str]:
    """The jars in $SPARKPOINT_SPARK_JARS_DIR: connectors pyspark does not ship (Kafka's), baked into
    the runtime image there and fetched locally by `scripts/fetch_jars.py spark-kafka`. A missing dir
    is an error, not a job that later fails to find its source."""
    folder = os.environ.get("SPARKPOINT_SPARK_JARS_DIR")
    if not folder:
        return []
    path = Path(folder)
    if not path.is_dir():
        raise ValueError(f"SPARKPOINT_SPARK_JARS_DIR={folder} is not a directory")
    return sorted(str(jar) for jar in path.glob("*.jar"))


def build_session(spark: SparkSection, app_name: str, cluster_conf: dict[str, str] | None = None,
                  event_log: dict[str, str] | None = None,
                  fast_restore: bool = False):  # -> pyspark.sql.SparkSession
    """cluster_conf: the driver's settings for master k8s (executors.prepare_driver), its master
    URL included. fast_restore: session_conf's."""
    from pyspark.sql import SparkSession  # imported lazily: the CLI validates specs without a JVM

    ensure_user_identity()  # before the JVM starts: it needs a user name for this uid
    conf = {**session_conf(spark, event_log, fast_restore), **(cluster_conf or {})}
    builder = SparkSession.builder.master(conf.pop("spark.master", spark.master)).appName(app_name)
    for key, value in conf.items():
        builder = builder.config(key, value)
    session = builder.getOrCreate()
    session.sparkContext.setLogLevel(os.environ.get("SPARKPOINT_SPARK_LOG_LEVEL", "ERROR"))
    return session


# What spark-submit must know when it launches the driver's JVM (its heap, options and classpath),
# and what Spark reads from the JVM's system properties rather than the SparkContext's conf: the UI's
# links read spark.ui.proxyBase there (UIUtils.uiRoot), so a JVM launched without it serves links
# outside the Ingress path. Everything else is read by the SparkContext, which comes later.
_LAUNCH_PREFIXES = ("spark.driver.", "spark.jars", "spark.ui.proxyBase")


def launch_jvm(spark: SparkSection) -> None:
    """Start the driver's JVM (the Py4J gateway) now, with the settings it needs at launch, so that it
    boots while the runtime still claims its attempt and restores; build_session later makes its
    SparkContext on this JVM (pyspark keeps one gateway per process). docs/design.md §8, startPhases."""
    from pyspark import SparkConf, SparkContext

    ensure_user_identity()
    launch = launch_conf(spark)
    SparkContext._ensure_initialized(conf=SparkConf(loadDefaults=False).setAll(list(launch.items())))


def launch_conf(spark: SparkSection) -> dict[str, str]:
    """The part of the session's conf the JVM must be launched with (_LAUNCH_PREFIXES)."""
    return {k: v for k, v in session_conf(spark).items() if k.startswith(_LAUNCH_PREFIXES)}
