"""The store's view: what the operator reads from a job's checkpoint store (view) and the cache of it
with the Secrets that open it (facts)."""
