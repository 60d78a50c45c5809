"""Executor-side state on synthetic hot dirs and the directory store (issue 42; docs/design.md §4,
"Executor-side state"): what an executor reports, that a second checkpoint uploads only what changed
(the base's objects are shared by reference, as the single-process path shares them), that a stale copy
of a moved partition is ignored while another executor holds it complete, and that a file changed after
hashing never stays under its hash. The real-Spark proof is test_executor_state_spark.py."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from sparkpoint.runtime.checkpoint import CheckpointError, CheckpointWriter, list_checkpoint_ids
from sparkpoint.runtime.checkpoint.freeze import freeze
from sparkpoint.runtime.executor_state import (
    Prepared,
    UploadAck,
    checkpoint_with_executors,
    expected_operators,
    prepare,
    prepare_request,
    upload,
)
from sparkpoint.runtime.store import DirectoryStore, JobRef
from sparkpoint.runtime.store.layout import object_key

JOB = JobRef("default", "exec")
OFFSETS = 'v1\n{"batchWatermarkMs":0,"conf":{"spark.sql.shuffle.partitions":"%d"}}\n{"offset":1}'


def _write(path: Path, text: str) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text)


def _driver(root: Path, committed: int, partitions: int) -> None:
    _write(root / "metadata", '{"id":"q"}')
    for b in range(committed + 1):
        _write(root / "offsets" / str(b), OFFSETS % partitions)
        _write(root / "commits" / str(b), "v1\n{}")
    _write(root / "state" / "0" / "_metadata" / "metadata", "v1")


def _partition(root: Path, p: int, versions: range, tag: str = "") -> None:
    for v in versions:  # HDFS-provider names: a snapshot at 1, deltas after it
        _write(root / "state" / "0" / str(p) / (f"{v}.snapshot" if v == 1 else f"{v}.delta"), f"p{p}v{v}{tag}")


class Local:
    """An executor reached in-process."""

    def __init__(self, prepared: Prepared, store: DirectoryStore):
        self.prepared, self.store, self.asked = prepared, store, []  # type: list[list[str]]

    @property
    def report(self):  # type: ignore[no-untyped-def]
        return self.prepared.report

    def upload(self, checkpoint: str, shas: list[str]) -> UploadAck:
        self.asked.append(shas)
        return upload(self.prepared, self.store, JOB, checkpoint, shas)


def _take(tmp: Path, name: str, batch: int, writer: CheckpointWriter, executors: dict[str, Path]):  # type: ignore[no-untyped-def]
    frozen = freeze(tmp / "driver", tmp / f"{name}-driver", scope="driver")
    assert frozen.batch_id == batch
    request = prepare_request(tmp / "driver", batch)
    handles = [Local(prepare(root, request, tmp / f"{name}-{e}", executor=e), writer.store) for e, root in executors.items()]
    partitions, operators = expected_operators(tmp / "driver", batch)
    return checkpoint_with_executors(writer, tmp / f"{name}-driver", handles, batch=batch, partitions=partitions,
                                     operators=operators), handles


def test_executors_upload_only_what_changed_and_a_moved_partitions_old_copy_is_ignored(tmp_path):
    store = DirectoryStore(str(tmp_path / "store"))
    writer = CheckpointWriter(store, JOB, attempt=0, job_uid="u", reuse_window_seconds=0)
    a, b = tmp_path / "a", tmp_path / "b"
    _driver(tmp_path / "driver", 3, partitions=3)
    _partition(a, 0, range(1, 5))
    _partition(a, 1, range(1, 5))
    _partition(b, 2, range(1, 5))
    first, handles = _take(tmp_path, "one", 3, writer, {"a": a, "b": b})
    assert [e.path for e in first.manifest.files if e.path.startswith("state/0/2")] == [
        "state/0/2/1.snapshot", "state/0/2/2.delta", "state/0/2/3.delta", "state/0/2/4.delta"]
    assert sum(len(s) for s in handles[0].asked) == 8 and sum(len(s) for s in handles[1].asked) == 4

    # Two batches later partition 1 has moved to b (which holds its whole chain, as a restore would
    # have given it); a keeps its old copy, which stops at version 4.
    _driver(tmp_path / "driver", 5, partitions=3)
    _partition(a, 0, range(5, 7))
    _partition(b, 1, range(1, 7))
    _partition(b, 2, range(5, 7))
    second, handles = _take(tmp_path, "two", 5, writer, {"a": a, "b": b})
    assert handles[0].report.incomplete.keys() == {"state/0/1"}
    assert "versions 5, 6 are not there" in handles[0].report.incomplete["state/0/1"]
    asked = {e: sorted(s for shas in h.asked for s in shas) for e, h in zip("ab", handles, strict=True)}
    new = {e.sha256 for e in second.manifest.files if e.path.endswith(("/5.delta", "/6.delta"))}
    assert sorted(asked["a"] + asked["b"]) == sorted(new)  # the rest is the base's, by reference
    assert second.manifest.base_checkpoint == first.manifest.id
    assert {e.path for e in second.manifest.files if e.path.startswith("state/0/1/")} == {
        f"state/0/1/{n}" for n in ("1.snapshot", "2.delta", "3.delta", "4.delta", "5.delta", "6.delta")}


def test_a_file_changed_after_hashing_is_not_left_under_its_hash_and_fails_the_checkpoint(tmp_path):
    store = DirectoryStore(str(tmp_path / "store"))
    writer = CheckpointWriter(store, JOB, attempt=0, job_uid="u", reuse_window_seconds=0)
    _driver(tmp_path / "driver", 1, partitions=1)
    _partition(tmp_path / "a", 0, range(1, 3))
    frozen = freeze(tmp_path / "driver", tmp_path / "frozen-driver", scope="driver")
    prepared = prepare(tmp_path / "a", prepare_request(tmp_path / "driver", 1), tmp_path / "frozen-a", executor="a")
    victim = next(f for f in prepared.report.files if f.path.endswith("2.delta"))
    changed = tmp_path / "frozen-a" / victim.path
    changed.write_text("other bytes")  # the frozen link's inode now holds bytes that are not `victim`'s
    os.utime(changed, ns=(1, 1))
    with pytest.raises(CheckpointError, match="changed after hashing"):
        checkpoint_with_executors(writer, tmp_path / "frozen-driver", [Local(prepared, store)], batch=frozen.batch_id,
                                  partitions=1, operators=["0"])
    assert store.stat(object_key(JOB, victim.sha256)) is None
    assert list_checkpoint_ids(store, JOB) == []


def test_the_schema_file_in_partition_0_is_the_drivers_share(tmp_path):
    """Spark's driver writes the state schema file into state/<op>/0/_metadata on its own disk, and no
    executor holds it (seen on local-cluster). The driver's freeze keeps it (it dropped it with the whole
    partition directory before), and an executor's copy, were there one, is not reported twice."""
    store = DirectoryStore(str(tmp_path / "store"))
    writer = CheckpointWriter(store, JOB, attempt=0, job_uid="u", reuse_window_seconds=0)
    _driver(tmp_path / "driver", 3, partitions=2)
    _write(tmp_path / "driver" / "state" / "0" / "0" / "_metadata" / "schema", "the schema")
    a = tmp_path / "a"
    _partition(a, 0, range(1, 5))
    _partition(a, 1, range(1, 5))
    result, _ = _take(tmp_path, "c1", 3, writer, {"a": a})
    assert [e.path for e in result.manifest.files].count("state/0/0/_metadata/schema") == 1
    _write(a / "state" / "0" / "0" / "_metadata" / "schema", "the schema")  # a shared-disk leftover
    _write(tmp_path / "driver" / "commits" / "4", "v1\n{}")
    _write(tmp_path / "driver" / "offsets" / "4", OFFSETS % 2)
    for p in (0, 1):
        _partition(a, p, range(5, 6))
    result, handles = _take(tmp_path, "c2", 4, writer, {"a": a})
    assert [e.path for e in result.manifest.files].count("state/0/0/_metadata/schema") == 1
    assert "state/0/0/_metadata/schema" not in [f.path for f in handles[0].report.files]
