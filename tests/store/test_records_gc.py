"""GC of attempt claims and lineage records (runtime/checkpoint/records_gc.py): a job that restarted
many times keeps only the claims and the lineage record that starts still read, and the fence, the
restart count and the recovery's lineage facts read exactly as before. Both backends."""

from __future__ import annotations

import time

from sparkpoint.runtime.checkpoint import gc_pass, read_fence, write_fence
from sparkpoint.runtime.checkpoint import records_gc as records
from sparkpoint.runtime.checkpoint.fence import check_fence, restarts_before
from sparkpoint.runtime.service.recovery import read_lineage
from sparkpoint.runtime.store.layout import attempt_claim_key, fence_key, lineage_record_key
from sparkpoint.runtime.store.manifest import Fence, utcnow


def later() -> float:
    return time.time() + 5


def claims(store, job) -> list[int]:  # type: ignore[no-untyped-def]
    return [int(o.key.rsplit("/", 1)[-1][:-5]) for o in store.list(records.claims_prefix(job))]


def test_old_claims_and_lineage_records_go_and_starts_read_the_same(store, job, monkeypatch):
    monkeypatch.setattr(records, "KEEP_CLAIMS", 5)
    for _ in range(12):  # twelve starts of one pod (launch 1): in-place restarts
        write_fence(store, job, incarnation="uid", launch=1)
    for n, tag in ((3, "fresh:first"), (7, "savepoint:sp-1"), (9, "checkpoint:chk-000004")):
        store.put_bytes(lineage_record_key(job, n, tag), b'{"incarnation": "uid"}')
    facts = read_lineage(store, job, [], None, "uid")
    assert gc_pass(store, job, grace_seconds=3600).deleted_claims == 0  # all inside the grace
    result = gc_pass(store, job, grace_seconds=0, clock=later)
    assert (result.deleted_claims, result.deleted_lineage) == (6, 2)
    assert claims(store, job) == list(range(7, 13))  # the newest and the 5 below it (KEEP_CLAIMS)
    assert read_lineage(store, job, [], None, "uid") == facts
    assert read_fence(store, job) == 12
    assert restarts_before(store, job, 12, "uid", 1) == 5  # as far as the kept claims go
    assert write_fence(store, job, incarnation="uid", launch=1) == 13  # never a number twice
    check_fence(store, job, 13)


def test_claims_above_a_stale_fence_stay(store, job, monkeypatch):
    """A starter died between its claim and fence.json: the claims above the fence's number are how
    the next starter finds the newest one; none of them goes."""
    monkeypatch.setattr(records, "KEEP_CLAIMS", 2)
    for _ in range(4):
        write_fence(store, job)
    for n in range(5, 11):  # claims whose fence.json write never happened
        assert store.put_if_absent(attempt_claim_key(job, n), Fence(attempt=n, updated=utcnow(), owner="x").to_json())
    assert Fence.from_json(store.get_bytes(fence_key(job)), where="fence").attempt == 4
    result = gc_pass(store, job, grace_seconds=0, clock=later)
    assert result.deleted_claims == 3 and claims(store, job) == list(range(4, 11))
    assert write_fence(store, job) == 11
