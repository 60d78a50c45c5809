"""The runtime process: wiring of Spark, checkpoints and sink, the control API, metrics, supervisor."""
