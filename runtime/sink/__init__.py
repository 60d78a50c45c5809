"""Output sinks: transactional (exactly-once, published with checkpoints), upsert, console."""
