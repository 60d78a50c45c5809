"""The driver's checkpoint with executors (docs/design.md §4, "Executor-side state"): today's order,
with the state partitions frozen, hashed and uploaded by the executors that hold them.

 1. the driver reads C from `commits/` and freezes its own share (checkpoint/freeze.py, scope "driver":
    metadata, offsets/ and commits/ up to C, sources/, the operators' metadata);
 2. each executor freezes and hashes its partitions for C and reports (prepare.py);
 3. the driver merges the reports (merge.py); a conflict or an uncovered partition fails the checkpoint
    here, before anything is written to the store;
 4. the writer hashes the driver's share and claims the id with the pending marker naming every object,
    the executors' too (checkpoint/writer.py), then plans from one listing of objects/ (plan.py);
 5. the driver uploads its objects, each executor the planned objects it holds (upload.py), and acks;
 6. fence check, manifest, commit (checkpoint/operation.py): the driver alone commits.
How the driver reaches an executor (`ExecutorHandle`) is the transport's business: in-process here and
in the tests, a sidecar agent in the executor pod later.
"""

from __future__ import annotations

import logging
import os
from collections.abc import Sequence
from pathlib import Path
from typing import Any, Protocol

from sparkpoint.runtime.checkpoint.concurrent_calls import concurrently
from sparkpoint.runtime.checkpoint.errors import CheckpointError
from sparkpoint.runtime.checkpoint.freeze import commit_state_ids, state_partitions
from sparkpoint.runtime.checkpoint.operation import CheckpointOperation, CheckpointResult
from sparkpoint.runtime.checkpoint.writer import CheckpointWriter
from sparkpoint.runtime.store.layout import object_key
from sparkpoint.runtime.store.manifest import FileEntry

from .merge import merge_reports
from .report import ExecutorReport, PrepareRequest, UploadAck

log = logging.getLogger("sparkpoint.checkpoint")


class ExecutorHandle(Protocol):
    """One executor as the driver reaches it, after it prepared for this checkpoint's batch."""

    @property
    def report(self) -> ExecutorReport: ...

    def upload(self, checkpoint: str, shas: list[str]) -> UploadAck: ...


def expected_operators(driver_hot: str | Path, batch: int) -> tuple[int, list[str]]:
    """The state partitions the offsets log of `batch` names and the operators under the driver's
    state/ (their metadata); CheckpointError when the offsets log does not say (coverage is the check)."""
    partitions, operators = state_partitions(Path(driver_hot), batch)
    if partitions is None:
        raise CheckpointError(f"the offsets log of batch {batch} names no spark.sql.shuffle.partitions: "
                              "cannot check that every state partition is covered")
    return partitions, operators


def prepare_request(driver_hot: str | Path, batch: int) -> PrepareRequest:
    """Batch C and the stateUniqueIds of every commit entry up to C on the driver's disk (Spark keeps
    the last spark.sql.streaming.minBatchesToRetain; none with checkpoint format v1)."""
    commits = Path(driver_hot) / "commits"
    batches = sorted(int(n) for n in (os.listdir(commits) if commits.is_dir() else []) if n.isdigit())
    found = {b: commit_state_ids(Path(driver_hot), b) for b in batches if b <= batch}
    return PrepareRequest(batch=batch, lineage={b: ids for b, ids in found.items() if ids is not None})


class ExecutorCheckpoint:
    """Steps 3 to 6 above, one method each (tests interleave them with GC passes)."""

    def __init__(self, writer: CheckpointWriter, driver_frozen: str | Path, executors: Sequence[ExecutorHandle], *,
                 batch: int, partitions: int, operators: Sequence[str] = (), extra: dict[str, Any] | None = None,
                 spark_version: str | None = None, state_provider: str | None = None):
        self.writer, self.driver_frozen, self.batch = writer, Path(driver_frozen), batch
        self.handles = {e.report.executor: e for e in executors}
        self.partitions, self.operators = partitions, list(operators)
        self.manifest_fields: dict[str, Any] = {"extra": extra, "spark_version": spark_version,
                                                "state_provider": state_provider}
        self.op: CheckpointOperation | None = None

    def begin(self) -> str:
        """Merge (a failure writes nothing), hash the driver's share, claim the id: the marker names
        every object, the executors' included."""
        self.merged = merge_reports([h.report for h in self.handles.values()], batch=self.batch,
                                    partitions=self.partitions, operators=self.operators)
        remote = [FileEntry(path=f.path, size=f.size, sha256=f.sha256, crc32=f.crc32) for f in self.merged.files]
        self.op = self.writer.begin(self.driver_frozen, batch_id=self.batch, remote=remote, **self.manifest_fields)
        return self.op.id

    def plan(self) -> None:
        """Decide from one listing of objects/ what to upload (checkpoint/plan.py)."""
        assert self.op is not None
        self.op.plan()

    def upload_driver(self) -> None:
        """Upload the driver's planned objects (planning first if nothing did)."""
        assert self.op is not None
        self.op.upload_all()

    def upload_executors(self) -> None:
        """Each planned object only executors hold, uploaded by its first holder and acknowledged."""
        op = self.op
        assert op is not None and op.planned
        by_executor: dict[str, list[str]] = {}
        for sha in op.remote_uploads():
            by_executor.setdefault(self.merged.holders[sha][0], []).append(sha)

        def one(name: str) -> None:
            shas = by_executor[name]
            ack = self.handles[name].upload(op.id, shas)
            if ack.checkpoint != op.id:
                raise CheckpointError(f"executor {name} acknowledged {ack.checkpoint}, not {op.id}")
            if ack.changed:  # bytes that may not be the hashed ones: never left under that hash
                for sha in ack.changed:
                    self.writer.store.delete(object_key(self.writer.job, sha))
                raise CheckpointError(f"checkpoint {op.id}: executor {name}'s files changed after hashing "
                                      f"({len(ack.changed)}); not committing")
            op.remote_uploaded(set(ack.uploaded) & set(shas))
        # The executors upload at once, each over its own link; every call ends before this returns.
        concurrently(*(lambda name=name: one(name) for name in by_executor))

    def commit(self) -> CheckpointResult:
        """Fence check, manifest, marker removal; refuses when a planned object was not acknowledged."""
        assert self.op is not None
        return self.op.commit()

    def abort(self) -> None:
        if self.op is not None:
            self.op.abort()


def checkpoint_with_executors(writer: CheckpointWriter, driver_frozen: str | Path, executors: Sequence[ExecutorHandle],
                              *, batch: int, partitions: int, operators: Sequence[str] = (),
                              extra: dict[str, Any] | None = None, spark_version: str | None = None,
                              state_provider: str | None = None) -> CheckpointResult:
    """Steps 3 to 6 above in order: merge, claim, plan, upload (the driver and the executors at once), commit."""
    checkpoint = ExecutorCheckpoint(writer, driver_frozen, executors, batch=batch, partitions=partitions,
                                    operators=operators, extra=extra, spark_version=spark_version,
                                    state_provider=state_provider)
    try:
        checkpoint.begin()
        checkpoint.plan()
        concurrently(checkpoint.upload_driver, checkpoint.upload_executors)
        return checkpoint.commit()
    except BaseException:
        checkpoint.abort()
        raise
