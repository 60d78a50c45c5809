"""A full output GC pass holds what it decides in bounded memory (runtime/sink/gc_full_pass.py,
gc_spill.py): its peak does not grow with the number of checkpoints a history holds, and it still
deletes exactly the garbage. Before the pass streamed, its peak grew by about 2 KB per checkpoint
(every entry's document, every listed key's info and the needed sets in memory: 568.8 MiB at a month
of 10 s checkpoints)."""

from __future__ import annotations

import json
import os
import time
import tracemalloc
from pathlib import Path

import pytest

from sparkpoint.runtime.checkpoint import write_fence
from sparkpoint.runtime.sink.history import compact_forward, entry_loader
from sparkpoint.runtime.sink.output_gc import output_gc_pass
from sparkpoint.runtime.store import JobRef, directory, open_store

from .test_output_gc import write_manifest

JOB = JobRef("ns", "aged")
GARBAGE = 40  # files of a crashed attempt that no entry names


def build(root: Path, n: int) -> object:
    """A transactional sink's store aged `n` checkpoints (one part per batch, entries snapshotted as the
    runtime does, three retained points), plus a crashed attempt's unpublished files, all old."""
    out = root / JOB.root / "outputs" / "default"
    (out / "_commits").mkdir(parents=True)
    previous = None
    for i in range(n):
        folder = out / "staging" / "attempt-1" / f"batch-{i:09d}-0a0a0a0a0a0a"
        folder.mkdir(parents=True)
        (folder / "part-00000.parquet").write_bytes(b"p")
        cid = f"chk-{i + 1:06d}"
        entry = {"checkpoint": cid, "attempt": 1, "previous": previous, "afterBatch": i - 1, "upToBatch": i,
                 "incarnation": "uid", "files": [{"batch": i, "rows": 1, "format": "parquet", "keys": [
                     f"{JOB.root}/outputs/default/staging/attempt-1/{folder.name}/part-00000.parquet"]}]}
        (out / "_commits" / f"{cid}.json").write_text(json.dumps(entry, sort_keys=True))
        previous = cid
    for i in range(GARBAGE):
        folder = out / "staging" / "attempt-2" / f"batch-{n + i:09d}-0b0b0b0b0b0b"
        folder.mkdir(parents=True)
        (folder / "part-00000.parquet").write_bytes(b"g")
    store = open_store(f"file://{root}")
    for i in range(n - 3, n):
        cid = f"chk-{i + 1:06d}"
        entry = json.loads((out / "_commits" / f"{cid}.json").read_text())
        write_manifest(store, JOB, cid, 1, {"sink": {"kind": "transactional", "path": "default", "attempt": 1,
                                                     "previous": entry["previous"], "afterBatch": i - 1,
                                                     "upToBatch": i, "files": entry["files"],
                                                     "incarnation": "uid"}})
    write_fence(store, JOB, "uid")
    write_fence(store, JOB, "uid")  # attempt 2 claimed (and crashed); attempt 3 is the newest
    write_fence(store, JOB, "uid")
    compact_forward(store, JOB, "default", previous, 1, entry_loader(store, JOB, "default"))
    past = time.time() - 3600
    for dirpath, _, names in os.walk(root):
        for name in names:
            os.utime(os.path.join(dirpath, name), (past, past))
    return store


def full_pass_peak(root: Path, n: int) -> tuple[int, object]:
    store = build(root, n)
    tracemalloc.start()
    try:
        result = output_gc_pass(store, JOB, grace_seconds=60, incremental=False)
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    return peak, result


@pytest.mark.slow
@pytest.mark.ci_sample
def test_a_full_pass_holds_the_same_peak_at_four_times_the_history(tmp_path, monkeypatch) -> None:
    monkeypatch.setattr(directory, "_NAMES_HELD", 256)  # (S3 pages 1,000 keys: a folder is never held)
    small, large = 2_500, 10_000
    peaks = {}
    for n in (small, large):
        peaks[n], result = full_pass_peak(tmp_path / f"n{n}", n)
        assert result.deleted_files == GARBAGE and result.skipped_paths == []
        assert result.live_files == n  # every batch of the history stays
        assert result.deleted_snapshotted_entries >= n - 1_000 - 3  # what the snapshots hold goes
        store = open_store(f"file://{tmp_path / f'n{n}'}")
        assert len(list(store.list(f"{JOB.root}/outputs/default/staging/"))) == n
    # Run alone the new code grew -104 bytes per checkpoint here, after other tests 155 (the smaller pass no
    # longer pays first-use costs), and it is flat from 20,000 to 40,000; the old code grew 1,575.
    growth = (peaks[large] - peaks[small]) / (large - small)
    assert growth < 500, f"{growth:.0f} bytes per checkpoint ({peaks})"
