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
from collections.abc import Sequence
from pathlib import Path
from typing import Any, Protocol

from sparkpoint.runtime.checkpoint.errors import CheckpointError
from sparkpoint.runtime.checkpoint.freeze import state_partitions
from sparkpoint.runtime.checkpoint.operation import CheckpointResult
from sparkpoint.runtime.checkpoint.writer import CheckpointWriter
from sparkpoint.runtime.store.layout import object_key
from sparkpoint.runtime.store.manifest import FileEntry

from .merge import merge_reports
from .report import ExecutorReport, UploadAck

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


def checkpoint_with_executors(writer: CheckpointWriter, driver_frozen: str | Path, executors: Sequence[ExecutorHandle],
                              *, batch: int, partitions: int, operators: Sequence[str] = (),
                              extra: dict[str, Any] | None = None, spark_version: str | None = None,
                              state_provider: str | None = None) -> CheckpointResult:
    """Steps 3 to 6 above: merge, claim, plan, upload (the driver's and the executors'), commit."""
    merged = merge_reports([e.report for e in executors], batch=batch, partitions=partitions, operators=operators)
    remote = [FileEntry(path=f.path, size=f.size, sha256=f.sha256, crc32=f.crc32) for f in merged.files]
    op = writer.begin(driver_frozen, batch_id=batch, extra=extra, spark_version=spark_version,
                      state_provider=state_provider, remote=remote)
    try:
        op.upload_all()  # plans, then uploads the driver's objects
        by_executor: dict[str, list[str]] = {}
        for sha in op.remote_uploads():
            by_executor.setdefault(merged.holders[sha][0], []).append(sha)  # a duplicate's first holder
        handles = {e.report.executor: e for e in executors}
        for name, shas in by_executor.items():
            ack = handles[name].upload(op.id, shas)
            if ack.checkpoint != op.id:
                raise CheckpointError(f"executor {name} acknowledged {ack.checkpoint}, not {op.id}")
            if ack.changed:  # bytes that may not be the hashed ones: never left under that hash
                for sha in ack.changed:
                    writer.store.delete(object_key(writer.job, sha))
                raise CheckpointError(f"checkpoint {op.id}: executor {name}'s files changed after hashing "
                                      f"({len(ack.changed)}); not committing")
            op.remote_uploaded(set(ack.uploaded) & set(shas))
        return op.commit()  # refuses when an asked-for object was not acknowledged
    except BaseException:
        op.abort()
        raise
