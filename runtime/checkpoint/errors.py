"""Errors of the checkpoint protocol (shared by writer.py and the modules it delegates to)."""

from sparkpoint.runtime.store import StoreError


class CheckpointError(StoreError):
    """A checkpoint could not be taken (bad input directory, id conflict)."""
