"""Crash injection: SIGKILL a checkpointing process at spread-out points in its run.

After every kill the store must restore the latest completed checkpoint byte for byte (the
previous one, or the new one if the kill came after its manifest was written), and once GC runs
with no grace, every piece of debris (pending markers, unreferenced uploads) must be gone.
"""

from __future__ import annotations

import os
import signal
import subprocess
import time

from sparkpoint.runtime.checkpoint import gc_pass, list_checkpoint_ids, load_manifest, restore
from sparkpoint.runtime.store import JobRef, open_store
from sparkpoint.runtime.store.layout import object_key, objects_prefix, pending_prefix

from .clirun import CLI, sparkpoint_json
from .trees import change_files, tree_digest, write_tree

KILLS = 6


def test_sigkill_during_checkpoint_leaves_a_restorable_store_and_collectable_debris(store_url, tmp_path) -> None:  # type: ignore[no-untyped-def]
    store, job = open_store(store_url), JobRef("crash", "victim")
    hot = tmp_path / "hot"
    paths = write_tree(hot, 40, size=128 * 1024)
    common = ["--store", store_url, "--job", str(job), "--no-progress", "--reuse-window", "0s"]  # GC: no grace
    trees: dict[str, dict[str, str]] = {}

    t0 = time.monotonic()
    first = sparkpoint_json("checkpoints", "create", "--from", str(hot), *common)
    full_run = time.monotonic() - t0
    trees[first["id"]] = tree_digest(hot)

    outcomes = []
    for i in range(KILLS):
        change_files(paths, 10, seed=100 + i)
        attempted = tree_digest(hot)
        proc = subprocess.Popen([*CLI, "checkpoints", "create", "--from", str(hot), *common],
                                stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, env=os.environ.copy())
        time.sleep(full_run * (0.35 + 0.13 * i))  # from mid-startup to around completion
        proc.send_signal(signal.SIGKILL)
        proc.wait()
        ids = list_checkpoint_ids(store, job)
        completed = ids[-1] not in trees  # the kill came after the manifest was written
        if completed:
            trees[ids[-1]] = attempted
        debris = bool(list(store.list(pending_prefix(job))))
        outcomes.append("completed" if completed else "killed+debris" if debris else "killed-early")
        target = tmp_path / f"restore-{i}"
        restore(store, job, target)
        assert tree_digest(target) == trees[ids[-1]], f"kill {i}: latest checkpoint does not restore"

    result = gc_pass(store, job, retain=2, grace_seconds=0, pending_timeout_seconds=0)
    kept = result.kept_checkpoints
    live = {object_key(job, sha) for cid in kept for sha in load_manifest(store, job, cid).shas()}
    assert {i.key for i in store.list(objects_prefix(job))} == live
    assert not list(store.list(pending_prefix(job)))
    for cid in kept:
        target = tmp_path / f"final-{cid}"
        restore(store, job, target, checkpoint_id=cid)
        assert tree_digest(target) == trees[cid]
    print(f"full run {full_run:.2f}s; outcomes {outcomes}; gc removed {result.deleted_objects} objects, "
          f"{len(result.deleted_pending)} pending markers")
