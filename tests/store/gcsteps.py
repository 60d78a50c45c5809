"""One GC pass driven step by step, as the interleaving tests order them."""

from __future__ import annotations

from sparkpoint.runtime.checkpoint import GcPass

STEPS = ["list_pending", "list_checkpoints", "list_objects", "delete"]


def gc_step(gc: GcPass, step: str) -> None:
    """list_checkpoints also deletes the manifests it drops; delete removes every candidate object
    and the abandoned pending markers."""
    if step == "list_checkpoints":
        gc.list_checkpoints()
        gc.delete_manifests()
    elif step == "delete":
        for info in gc.candidates:
            gc.delete_object(info)
        gc.delete_abandoned_pending()
    else:
        getattr(gc, step)()
