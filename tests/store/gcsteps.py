"""One GC pass driven step by step, as the interleaving tests order them."""

from __future__ import annotations

import itertools
from collections.abc import Callable, Iterator
from pathlib import Path

from sparkpoint.runtime.checkpoint import GcPass, restore
from sparkpoint.runtime.checkpoint.catalog import list_checkpoint_ids, load_manifest
from sparkpoint.runtime.store import JobRef, ObjectStore
from sparkpoint.runtime.store.layout import object_key, objects_prefix, pending_prefix

from .timeshift import FakeClock
from .trees import tree_digest

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


def assert_restores_then_only_latest_remains(store: ObjectStore, job: JobRef, target: Path, expected_tree: dict,
                                             clock: FakeClock, *, advance: float, passes: int,
                                             **gc_options: float) -> None:
    """The latest checkpoint restores the expected tree; then, `advance` seconds on and after `passes`
    full GC passes, the store holds exactly its objects and no pending marker."""
    restore(store, job, target, workers=1)
    assert tree_digest(target) == expected_tree
    clock.offset += advance
    for _ in range(passes):
        GcPass(store, job, clock=clock, **gc_options).run()  # type: ignore[arg-type]
    latest = load_manifest(store, job, list_checkpoint_ids(store, job)[-1])
    assert {i.key for i in store.list(objects_prefix(job))} == {object_key(job, s) for s in latest.shas()}
    assert not list(store.list(pending_prefix(job)))


def orderings(counts: dict[str, int]) -> list[tuple[str, ...]]:
    """Every distinct interleaving of the tokens, each repeated as often as `counts` says."""
    tokens = [t for t, n in counts.items() for _ in range(n)]
    return sorted(set(itertools.permutations(tokens)))


def play(order: tuple[str, ...], steps: dict[str, Iterator[str] | None], act: dict[str, Callable[..., None]],
         check: Callable[[int], None]) -> None:
    """Run one ordering: each token does its actor's next step (or the actor alone, for a token whose
    steps are None), and `check` runs after every step."""
    for i, token in enumerate(order):
        it = steps[token]
        if it is None:
            act[token]()
        else:
            act[token](next(it))
        check(i)
