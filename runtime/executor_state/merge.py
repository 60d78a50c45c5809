"""The driver's merge of the executors' reports into the state part of a manifest: pure, no I/O
(docs/design.md §4, "Executor-side state").

A partition directory may be reported by several executors: a retried or speculative task left a copy
on another node, or a partition moved and its old executor still holds an older copy. Complete copies
must agree file by file (the same path with two digests cannot be placed: the checkpoint fails, named);
an incomplete copy is ignored when another executor holds the directory complete. Every state partition
the offsets log names, of every stateful operator, must be covered by some executor, or the checkpoint
fails naming the partitions (and why their copies were incomplete): a manifest without them could not
restart. What fails here fails before the pending marker is written, so the store is untouched and the
previous checkpoint stays the newest.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass

from sparkpoint.runtime.checkpoint.errors import CheckpointError
from sparkpoint.runtime.checkpoint.freeze import partition_dir_of

from .report import ExecutorReport, StateFile


class StateMergeError(CheckpointError):
    """The executors' reports do not make one restartable state set; that checkpoint fails."""


class ConflictingStateFile(StateMergeError):
    """One path reported with two different contents."""


class UncoveredPartitions(StateMergeError):
    """A state partition the offsets log names is complete on no executor."""


@dataclass(frozen=True)
class MergedState:
    files: list[StateFile]  # by path: the state part of the manifest
    holders: dict[str, list[str]]  # sha256 -> the executors that hold it (reporting order), to upload it


def merge_reports(reports: Sequence[ExecutorReport], *, batch: int, partitions: int,
                  operators: Iterable[str] = ()) -> MergedState:
    """Merge the reports for committed `batch`. `partitions`: the state partitions the offsets log of
    `batch` names; `operators`: the stateful operators the driver knows (its state/ listing), to which
    every operator a report names is added."""
    stale = [r.executor for r in reports if r.batch != batch]
    if stale:
        raise StateMergeError(f"reports of executors {stale} are not for batch {batch}")
    by_path: dict[str, tuple[StateFile, str]] = {}
    holders: dict[str, list[str]] = {}
    covered: set[str] = set()
    why_not: dict[str, list[str]] = {}
    ops = set(operators)
    for report in reports:
        for part in report.covered:
            if partition_dir_of(part) != part:
                raise StateMergeError(f"executor {report.executor} reports {part!r}, not state/<op>/<partition>")
            covered.add(part)
            ops.add(part.split("/")[1])
        for part, reason in report.incomplete.items():
            why_not.setdefault(part, []).append(f"{report.executor}: {reason}")
            if partition_dir_of(part) == part:
                ops.add(part.split("/")[1])
        for f in report.files:
            if partition_dir_of(f.path) not in report.covered:
                raise StateMergeError(f"executor {report.executor} reports {f.path}, outside the partitions it covers")
            known = by_path.get(f.path)
            if known is None:
                by_path[f.path] = (f, report.executor)
            elif (known[0].sha256, known[0].size) != (f.sha256, f.size):
                raise ConflictingStateFile(
                    f"{f.path} differs between executors {known[1]} (sha256 {known[0].sha256[:12]}, "
                    f"{known[0].size} B) and {report.executor} (sha256 {f.sha256[:12]}, {f.size} B): "
                    "two histories of one state partition; not committing")
            if report.executor not in (held := holders.setdefault(f.sha256, [])):
                held.append(report.executor)
    missing = [f"state/{op}/{p}" for op in sorted(ops, key=int) for p in range(partitions)
               if f"state/{op}/{p}" not in covered]
    if missing:
        details = "; ".join(f"{part} ({', '.join(why_not[part])})" for part in missing if part in why_not)
        raise UncoveredPartitions(
            f"the offsets log of batch {batch} names {partitions} state partitions and no executor holds "
            f"{', '.join(missing[:8])}{', ...' if len(missing) > 8 else ''} complete"
            + (f": {details}" if details else ""))
    return MergedState(files=[by_path[p][0] for p in sorted(by_path)], holders=holders)
