"""Collecting the records every start leaves: attempt claims and lineage records (docs/design.md §7).

Each runtime start claims `attempts/<n>.json` (fence.py) and each applied restoreFrom writes
`lineage/<n>.<kind>.<name>.json` (recovery.py); nothing read them back past the newest few, yet they
were never deleted, so a job that restarts often listed more of them at every start, forever.

What must stay:
- claims: every claim at or above `fence.json`'s number (a starter probes upward from it for the
  newest claim, so a gap there would let it claim a number twice), and the KEEP_CLAIMS below the
  newest claim (a start counts its pod's in-place restarts by walking the claims below its own,
  fence.restarts_before, at most that far; a zombie's check of its own claim finds it gone and
  stops, as it would find the newer claim);
- lineage: the records of the highest attempt that wrote one (recovery reads only the newest record:
  whether the spec's restoreFrom was applied already).
Both under the grace, like every deletion of the pass.
"""

from __future__ import annotations

import logging
import re
from dataclasses import dataclass

from sparkpoint.runtime.store import JobRef, ObjectStore, StoreError
from sparkpoint.runtime.store.layout import fence_key, lineage_prefix, lineage_record_of
from sparkpoint.runtime.store.manifest import Fence

from .fence import read_fence

log = logging.getLogger("sparkpoint.gc")

KEEP_CLAIMS = 1000  # fence.restarts_before's limit
_CLAIM = re.compile(r"/attempts/(\d+)\.json$")


@dataclass
class RecordsResult:
    deleted_claims: int = 0
    deleted_lineage: int = 0


def claims_prefix(job: JobRef) -> str:
    return f"{job.root}/attempts/"


def records_gc(store: ObjectStore, job: JobRef, *, now: float, grace_seconds: float,
               dry_run: bool = False) -> RecordsResult:
    result = RecordsResult()
    try:
        hint = Fence.from_json(store.get_bytes(fence_key(job)), where=fence_key(job)).attempt
    except (StoreError, ValueError):
        hint = 0  # no fence (no attempt ever started) or unreadable: keep every claim
    below = min(hint, read_fence(store, job) - KEEP_CLAIMS)
    for info in store.list(claims_prefix(job)):  # in number order: stop at the first one kept
        m = _CLAIM.search(info.key)
        if m is None:
            continue
        if int(m.group(1)) >= below:
            break
        if info.last_modified < now - grace_seconds:
            if not dry_run:
                store.delete(info.key)
            result.deleted_claims += 1
    records = [(r, info) for info in store.list(lineage_prefix(job)) if (r := lineage_record_of(info.key))]
    newest = max((r[0] for r, _ in records), default=None)
    for (attempt, _), info in records:
        if newest is not None and attempt < newest and info.last_modified < now - grace_seconds:
            if not dry_run:
                store.delete(info.key)
            result.deleted_lineage += 1
    if result.deleted_claims or result.deleted_lineage:
        log.info("gc collected start records", extra={"job": str(job), "claims": result.deleted_claims,
                                                      "lineage": result.deleted_lineage, "dry_run": dry_run})
    return result
