"""The driver's merge of executor reports (issue 42, executor_state/merge.py), on generated cases: the
partitions of a query spread over executors under random moves (a stale incomplete copy stays on the
old executor), retries (a complete copy on two executors) and deletions (a partition lost from every
executor). Pure: no files, no store.

The oracle: the merged state is exactly the truth's files whenever every partition is complete on some
executor and every copy of a file has one content; otherwise the merge fails with the named error."""

from __future__ import annotations

import hashlib

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from sparkpoint.runtime.executor_state import (
    ConflictingStateFile,
    ExecutorReport,
    StateFile,
    StateMergeError,
    UncoveredPartitions,
    merge_reports,
)

BATCH = 7


def _file(path: str, content: str) -> StateFile:
    return StateFile(path=path, size=len(content), sha256=hashlib.sha256(content.encode()).hexdigest(),
                     crc32="0" * 8)


@st.composite
def spread(draw):
    """(truth files by partition, reports, what the oracle expects: None = merged, else the error)."""
    operators = draw(st.integers(1, 2))
    partitions = draw(st.integers(1, 5))
    executors = [f"exec-{i}" for i in range(draw(st.integers(1, 4)))]
    truth: dict[str, list[StateFile]] = {}
    for op in range(operators):
        for p in range(partitions):
            part = f"state/{op}/{p}"
            versions = range(draw(st.integers(0, 3)) + 1, BATCH + 2)  # a snapshot, then deltas to C+1
            truth[part] = [_file(f"{part}/{v}.{'snapshot' if v == versions[0] else 'delta'}", f"{part}@{v}")
                           for v in versions]
            if draw(st.booleans()):
                truth[part].append(_file(f"{part}/_metadata/schema", f"schema of {op}"))
    covered: dict[str, set[str]] = {e: set() for e in executors}
    incomplete: dict[str, dict[str, str]] = {e: {} for e in executors}
    lost, conflict = [], None
    for part in truth:
        owners = draw(st.lists(st.sampled_from(executors), min_size=1, max_size=len(executors), unique=True))
        if draw(st.integers(0, 9)) == 0:  # deleted: the partition is complete nowhere
            lost.append(part)
            owners = []
        for e in owners:  # the owner, and a retried task's copy on another executor
            covered[e].add(part)
        for e in draw(st.lists(st.sampled_from(executors), max_size=2, unique=True)):
            if e not in owners:  # an old copy left behind by a move: its chain stops short of C+1
                incomplete[e][part] = f"{part}: versions {BATCH + 1} are not there"
        if len(owners) > 1 and conflict is None and draw(st.integers(0, 4)) == 0:
            conflict = (part, owners[1])  # the retried copy's newest delta differs
    reports = []
    for e in executors:
        files = []
        for part in sorted(covered[e]):
            for f in truth[part]:
                if conflict and (part, e) == conflict and f.path.endswith(f"/{BATCH + 1}.delta"):
                    f = _file(f.path, "another history")
                files.append(f)
        reports.append(ExecutorReport(executor=e, batch=BATCH, covered=sorted(covered[e]),
                                      incomplete=incomplete[e], files=draw(st.permutations(files))))
    reports = draw(st.permutations(reports))
    expected: type[StateMergeError] | None = (ConflictingStateFile if conflict else
                                              UncoveredPartitions if lost else None)
    return operators, partitions, truth, reports, expected, lost


@settings(max_examples=400, deadline=None)
@given(spread())
def test_the_merge_is_the_truth_or_fails_by_name(case):
    operators, partitions, truth, reports, expected, lost = case
    if expected is None:
        merged = merge_reports(reports, batch=BATCH, partitions=partitions, operators=[str(o) for o in range(operators)])
        assert merged.files == sorted((f for fs in truth.values() for f in fs), key=lambda f: f.path)
        for f in merged.files:  # every object has an executor that holds it, to upload it
            assert merged.holders[f.sha256] and all(
                any(g.sha256 == f.sha256 for g in r.files) for r in reports if r.executor in merged.holders[f.sha256])
        return
    with pytest.raises(expected) as err:
        merge_reports(reports, batch=BATCH, partitions=partitions, operators=[str(o) for o in range(operators)])
    if expected is UncoveredPartitions and not isinstance(err.value, ConflictingStateFile):
        assert all(part in str(err.value) for part in lost[:8]), str(err.value)


def test_an_operator_only_an_executor_names_must_be_covered_whole():
    """The driver lists operator 0; an executor holds a partition of operator 1 whose other partition
    nobody holds: the merge names it, though the driver's listing does not know operator 1."""
    reports = [ExecutorReport(executor="a", batch=BATCH, covered=["state/0/0", "state/0/1", "state/1/0"],
                              files=[_file(f"state/{o}/{p}/{BATCH + 1}.delta", f"{o}{p}") for o, p in
                                     [(0, 0), (0, 1), (1, 0)]])]
    with pytest.raises(UncoveredPartitions, match="state/1/1"):
        merge_reports(reports, batch=BATCH, partitions=2, operators=["0"])


def test_a_report_for_another_batch_or_outside_its_partitions_is_refused():
    good = ExecutorReport(executor="a", batch=BATCH, covered=["state/0/0"], files=[_file("state/0/0/1.delta", "x")])
    with pytest.raises(StateMergeError, match="not for batch"):
        merge_reports([good.model_copy(update={"batch": BATCH - 1})], batch=BATCH, partitions=1)
    stray = good.model_copy(update={"files": [_file("state/0/1/1.delta", "y")]})
    with pytest.raises(StateMergeError, match="outside the partitions it covers"):
        merge_reports([stray], batch=BATCH, partitions=1)


def test_the_documents_round_trip_as_json():
    report = ExecutorReport(executor="a", batch=BATCH, covered=["state/0/0"], incomplete={"state/0/1": "gap"},
                            files=[_file("state/0/0/1.delta", "x")])
    assert ExecutorReport.from_json(report.to_json()) == report
