"""Spark glue: the session, the user's entrypoint, and the streaming query the runtime owns."""
