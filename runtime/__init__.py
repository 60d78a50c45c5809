"""The job runtime: checkpoint store, Spark runner, control API (no Kubernetes imports)."""
