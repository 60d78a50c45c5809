"""Sparkpoint: durable, incremental checkpoints for PySpark streaming on Kubernetes."""
