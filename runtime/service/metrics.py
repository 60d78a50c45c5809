"""The runtime's Prometheus metrics (docs/design.md §10; names are a contract: prefix `sparkpoint_`).

One registry per runtime instance, so tests can run several in one process.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator

from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram, generate_latest
from prometheus_client.core import CounterMetricFamily, Metric

_DURATION_BUCKETS = (0.001, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 120, 300, 600)


class RuntimeMetrics:
    def __init__(self) -> None:
        r = self.registry = CollectorRegistry()
        self.checkpoint_last_completed = Gauge(
            "sparkpoint_checkpoint_last_completed_timestamp_seconds",
            "Unix time the latest checkpoint completed", registry=r)
        # With the two below, an alert tells "no checkpoint for N intervals" from a fresh start.
        self.checkpoint_interval = Gauge(
            "sparkpoint_checkpoint_interval_seconds", "The job's configured checkpoint interval", registry=r)
        self.start_time = Gauge(
            "sparkpoint_runtime_start_timestamp_seconds", "Unix time this runtime process started", registry=r)
        self.start_time.set_to_current_time()
        self.checkpoint_duration = Histogram(
            "sparkpoint_checkpoint_duration_seconds", "Checkpoint phase duration (sync: freeze; async: "
            "hash, upload, manifest, publish)", ["phase"], buckets=_DURATION_BUCKETS, registry=r)
        self.checkpoints_completed = Counter(
            "sparkpoint_checkpoints_completed", "Checkpoints completed", ["kind"], registry=r)
        self.uploaded_bytes = Counter(
            "sparkpoint_checkpoint_uploaded_bytes", "Bytes uploaded by checkpoints", registry=r)
        self.reused_bytes = Counter(
            "sparkpoint_checkpoint_reused_bytes", "Checkpointed bytes already in the store", registry=r)
        self.checkpoint_failures = Counter(
            "sparkpoint_checkpoint_failures", "Checkpoints that failed, by reason", ["reason"], registry=r)
        self.checkpoint_bytes = Gauge(
            "sparkpoint_checkpoint_size_bytes", "Total bytes of the latest checkpoint", registry=r)
        self.batch_duration = Histogram(
            "sparkpoint_batch_duration_seconds", "Micro-batch duration", buckets=_DURATION_BUCKETS, registry=r)
        self.input_rows = Counter("sparkpoint_input_rows", "Rows read by the query", registry=r)
        self.state_rows = Gauge("sparkpoint_state_rows", "Rows in the query's state stores", registry=r)
        self.last_committed_batch = Gauge(
            "sparkpoint_last_committed_batch", "Latest committed micro-batch id", registry=r)
        self.restore_duration = Gauge(
            "sparkpoint_restore_duration_seconds", "Time to restore state at start, by source",
            ["source"], registry=r)
        self.restore_fallbacks = Counter(
            "sparkpoint_restore_fallbacks", "Restore points passed over at start (corrupt or missing "
            "object or manifest, or a start from it that failed), by reason", ["reason"], registry=r)
        self.attempt = Gauge("sparkpoint_attempt", "Current attempt number of this runtime", registry=r)
        self.output_published = Counter(
            "sparkpoint_output_commits", "Exactly-once sink commit entries written", registry=r)
        self.checkpoint_consecutive_failures = Gauge(
            "sparkpoint_checkpoint_consecutive_failures",
            "Checkpoints failed or timed out in a row (0 after a completed one; retried with backoff)",
            registry=r)
        self.sink_staged_bytes = Gauge(
            "sparkpoint_sink_staged_bytes", "Sink output staged on local disk, not yet published", registry=r)
        # A delta sink's compaction or an upsert sink's snapshot (docs/design.md §7), after a checkpoint;
        # the names predate upsert snapshots and stay for existing dashboards.
        self.compactions = Counter(
            "sparkpoint_delta_compactions",
            "Delta compaction commits (one per run that compacted), or upsert snapshots written", registry=r)
        self.compacted_files = Counter(
            "sparkpoint_delta_compacted_files",
            "Small Delta data files replaced by compacted ones, or upsert batches folded into a snapshot", registry=r)
        self.compaction_failures = Counter(
            "sparkpoint_delta_compaction_failures", "Compaction runs that failed (retried at the next interval)",
            registry=r)
        self.compaction_duration = Histogram(
            "sparkpoint_delta_compaction_duration_seconds", "Duration of a compaction run that compacted",
            buckets=_DURATION_BUCKETS, registry=r)

        self.sink_short_writes = ReadCounter(
            "sparkpoint_sink_short_writes",
            "Batch writes whose part files held fewer rows than Spark counted (a stale listing); each was "
            "written again, or the batch failed after three", registry=r)

    def render(self) -> bytes:
        return generate_latest(self.registry)


class ReadCounter:
    """A counter another part keeps (the sink counts its short writes): the registry exports what
    `set_function`'s callable reads, 0 until one is set."""

    def __init__(self, name: str, documentation: str, registry: CollectorRegistry):
        self.name, self.documentation = name, documentation
        self.read: Callable[[], float] = lambda: 0
        registry.register(self)

    def set_function(self, read: Callable[[], float]) -> None:
        self.read = read

    def collect(self) -> Iterator[Metric]:
        family = CounterMetricFamily(self.name, self.documentation)
        family.add_metric([], self.read())
        yield family
