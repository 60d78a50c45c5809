"""The Kubernetes operator (kopf): thin glue over the runtime."""
