"""Where state comes from on start: the pure decision."""

from __future__ import annotations

from datetime import UTC, datetime

import pytest

from sparkpoint.runtime.service.hotdir import LocalState
from sparkpoint.runtime.service.recovery import LineageFacts, RestorePlan, plan_restore
from sparkpoint.runtime.service.supervisor import should_restart
from sparkpoint.runtime.spec import RestartSection, RestoreFrom
from sparkpoint.runtime.store import JobRef, Manifest, Totals
from sparkpoint.runtime.store.layout import lineage_record_key, lineage_record_of


def manifest(cid: str, batch: int, attempt: int = 1, **extra) -> Manifest:
    now = datetime.now(UTC)
    return Manifest(id=cid, namespace="d", job="j", job_uid="u", attempt=attempt, batch_id=batch, trigger_time=now,
                    completion_time=now, base_checkpoint=None, spark_version="4", state_provider="rocksdb",
                    files=[], totals=Totals(files=0, bytes=0, new_bytes=0, reused_bytes=0), extra=extra)


IDS = ["chk-000001", "chk-000002", "chk-000003"]
LATEST = manifest("chk-000003", 10, attempt=4)
GOOD_LOCAL = LocalState(batch=12, attempt=4, checkpoint="chk-000003")
FAILED_LOCAL = {"source": "local", "error": "offsets/12 unparseable"}
NO_RECORDS = LineageFacts()  # the store lists no lineage record: no point was applied by this runtime


def plan(local: LocalState = GOOD_LOCAL, *, attempt: int = 5, latest: Manifest | None = LATEST,
         ids: list[str] = IDS, savepoints: list[str] = ("sp-b", "sp-a"), restore_from=None,
         local_recovery: bool = True, latest_problem: str | None = None,
         lineage: LineageFacts = NO_RECORDS) -> RestorePlan:
    return plan_restore(restore_from=restore_from, checkpoint_ids=list(ids), savepoints=list(savepoints),
                        latest=latest, latest_problem=latest_problem, local_recovery=local_recovery,
                        local=local, attempt=attempt, lineage=lineage)


ALL_REMOTE = ("checkpoint:chk-000003", "checkpoint:chk-000002", "checkpoint:chk-000001",
              "savepoint:sp-b", "savepoint:sp-a")

# (case, plan arguments, expected source, expected candidates, a word the reason must contain)
CASES = [
    ("valid hot dir that continues the store's latest", {}, "local", (), "valid at batch 12"),
    ("hot dir ahead of its own newer checkpoint (crash before owner.json was updated)",
     {"latest": manifest("chk-000004", 11, attempt=4), "ids": [*IDS, "chk-000004"]}, "local", (), "valid"),
    ("no hot dir", {"local": LocalState(problem="no local hot dir")}, "remote", ALL_REMOTE, "no local hot dir"),
    ("hot dir behind the latest", {"local": LocalState(batch=9, attempt=4, checkpoint="chk-000003")},
     "remote", ALL_REMOTE, "older than checkpoint"),
    ("local recovery disabled", {"local_recovery": False}, "remote", ALL_REMOTE, "disabled"),
    # item 6: an old pod's hot dir after a newer attempt took over
    ("a newer attempt claimed the fence since the hot dir's attempt", {"attempt": 7}, "remote", ALL_REMOTE,
     "another attempt claimed the fence"),
    ("the store's latest was written by another attempt",
     {"latest": manifest("chk-000004", 20, attempt=5), "ids": [*IDS, "chk-000004"], "attempt": 5},
     "remote", ("checkpoint:chk-000004", *ALL_REMOTE), "not written or restored by this hot dir"),
    ("owner record from an older runtime (no attempt)", {"local": LocalState(batch=12, checkpoint="chk-000003")},
     "remote", ALL_REMOTE, "names no attempt"),
    ("latest manifest unreadable, not the hot dir's own",
     {"latest": None, "latest_problem": "chk-000004: corrupt", "ids": [*IDS, "chk-000004"]}, "remote",
     ("checkpoint:chk-000004", *ALL_REMOTE), "unreadable"),
    # issue 25: the hot dir wrote or restored it, and no attempt ran since
    ("latest manifest unreadable, the hot dir's own", {"latest": None, "latest_problem": "chk-000003: corrupt"},
     "local", (), "valid at batch 12"),
    ("nothing in the store, hot dir of the previous attempt", {"latest": None, "ids": [], "savepoints": []},
     "local", (), "valid"),
    ("nothing anywhere", {"local": LocalState(problem="none"), "latest": None, "ids": [], "savepoints": []},
     "fresh", (), "no checkpoint"),
    # item 11: a start from the hot dir died before committing a batch
    ("previous local start failed", {"local": LocalState(batch=12, attempt=4, checkpoint="chk-000003",
                                                         failed_starts=[FAILED_LOCAL])},
     "remote", ALL_REMOTE, "offsets/12 unparseable"),
    ("previous start from the latest checkpoint failed too",
     {"local": LocalState(batch=10, attempt=4, checkpoint="chk-000003",
                          failed_starts=[FAILED_LOCAL, {"source": "checkpoint", "id": "chk-000003", "error": "x"}])},
     "remote", ALL_REMOTE[1:], "failed before committing"),
]


@pytest.mark.parametrize("case,kwargs,source,candidates,word", CASES, ids=[c[0] for c in CASES])
def test_plan_restore_table(case, kwargs, source, candidates, word):
    result = plan(**kwargs)
    assert result.source == source, result
    assert tuple(p.tag for p in result.candidates) == candidates
    assert word in result.reason or any(word in f.error for f in result.skipped), result


def test_failed_starts_are_recorded_as_fallbacks_and_exhaustion_is_impossible():
    failed = [{"source": "local", "error": "e"}] + [{"source": "checkpoint", "id": c, "error": "boom"} for c in IDS]
    failed += [{"source": "savepoint", "id": s, "error": "boom"} for s in ("sp-a", "sp-b")]
    result = plan(LocalState(batch=10, attempt=4, checkpoint="chk-000003", failed_starts=failed))
    assert result.source == "impossible" and len(result.skipped) == 5
    assert result.skipped[0].to_json() == {"checkpoint": "chk-000003", "error": result.skipped[0].error}


def test_restore_from_is_explicit_and_applied_once():
    sp = RestoreFrom(savepoint="before-upgrade")
    first = plan(restore_from=sp, latest=manifest("chk-000009", 40))
    assert (first.source, first.savepoint, first.explicit) == ("remote", "before-upgrade", True)
    assert [p.tag for p in first.candidates] == ["savepoint:before-upgrade"]  # nothing else
    applied = manifest("chk-000011", 50, attempt=4, restoredFrom="savepoint:before-upgrade")
    later = plan(restore_from=sp, latest=applied, ids=["chk-000011"],
                 local=LocalState(batch=52, attempt=4, checkpoint="chk-000011"))
    assert later.source == "local"
    fallback = plan(restore_from=sp, latest=applied, ids=["chk-000011"], local=LocalState(problem="wiped"))
    assert [p.tag for p in fallback.candidates] == ["checkpoint:chk-000011", "savepoint:sp-b", "savepoint:sp-a",
                                                   "savepoint:before-upgrade"]
    assert fallback.lineage_tag == "savepoint:before-upgrade" and not fallback.explicit
    crashed = plan(restore_from=sp, latest=None, ids=[], local=LocalState(
        problem="x", failed_starts=[{"source": "savepoint", "id": "before-upgrade", "error": "bad state"}]))
    assert crashed.source == "impossible" and "bad state" in crashed.reason


def test_restore_from_fresh_starts_without_state_once():
    """upgradeMode stateless: the operator asks for a fresh start; the store's checkpoints (of the old
    history) are not restored, though a valid hot dir and checkpoints exist."""
    fresh = RestoreFrom(fresh="upgrade-3")
    first = plan(restore_from=fresh)
    assert (first.source, first.candidates, first.lineage_tag) == ("fresh", (), "fresh:upgrade-3")
    # Applied (a checkpoint of the new history exists): later starts continue the new history only.
    applied = manifest("chk-000011", 2, attempt=6, restoredFrom="fresh:upgrade-3")
    later = plan(restore_from=fresh, latest=applied, ids=[*IDS, "chk-000011"], attempt=7,
                 local=LocalState(problem="wiped"))
    assert later.source == "remote" and later.lineage_tag == "fresh:upgrade-3"
    assert "fresh:upgrade-3" not in [p.tag for p in later.candidates]  # no such point to restore


UNREADABLE_LATEST = {"latest": None, "latest_problem": "chk-000003: corrupt", "local": LocalState(problem="wiped")}
RECORDS_DOWN = "lineage/: store unreachable"
# issue 25: (case, restoreFrom, plan arguments, expected source, explicit (applied again), a word of the reason)
APPLIED_CASES = [
    ("the newest lineage record names it", "fresh:x", {"lineage": LineageFacts(recorded="fresh:x")},
     "remote", False, "lineage record"),
    ("no record (older runtime), the newest readable manifest descends from it", "savepoint:sp-x",
     {"lineage": LineageFacts(newest_readable="savepoint:sp-x")}, "remote", False, "descends"),
    ("records unreadable, the newest readable manifest descends from it", "fresh:x",
     {"lineage": LineageFacts(records_problem=RECORDS_DOWN, newest_readable="fresh:x")}, "remote", False,
     "descends"),
    ("records unreadable, the previous attempt's valid hot dir holds its history", "fresh:x",
     {"lineage": LineageFacts(records_problem=RECORDS_DOWN),
      "local": LocalState(batch=12, attempt=4, checkpoint="chk-000003", lineage="fresh:x")}, "local", False,
     "valid at batch 12"),
    ("records unreadable, nothing else tells: refused, not applied again", "fresh:x",
     {"lineage": LineageFacts(records_problem=RECORDS_DOWN, newest_readable="fresh:old")}, "unknown", False,
     "cannot tell"),
    ("records unreadable, a hot dir of it but another attempt ran since: no proof", "savepoint:sp-x",
     {"lineage": LineageFacts(records_problem=RECORDS_DOWN), "attempt": 7,
      "local": LocalState(batch=12, attempt=4, checkpoint="chk-000003", lineage="savepoint:sp-x")}, "unknown",
     False, "cannot tell"),
    ("records unreadable, the latest reads and descends from another point: applied now", "fresh:x",
     {"lineage": LineageFacts(records_problem=RECORDS_DOWN), "latest": manifest("chk-000003", 10, restoredFrom="b"),
      "latest_problem": None}, "fresh", True, "start without state"),
    ("another point was applied after it (A, B, then A again): applied again", "savepoint:sp-x",
     {"lineage": LineageFacts(recorded="fresh:b", newest_readable="savepoint:sp-x")}, "remote", True,
     "not applied yet"),
    ("never applied, no record", "fresh:x", {}, "fresh", True, "start without state"),
]


@pytest.mark.parametrize("case,tag,kwargs,source,explicit,word", APPLIED_CASES, ids=[c[0] for c in APPLIED_CASES])
def test_applied_restore_point_does_not_depend_on_the_newest_manifest(case, tag, kwargs, source, explicit, word):
    kind, name = tag.split(":")
    result = plan(restore_from=RestoreFrom(**{kind: name}), **{**UNREADABLE_LATEST, **kwargs})
    assert (result.source, result.explicit) == (source, explicit), result
    assert word in result.reason, result
    if source in ("remote", "local") and not explicit:  # its history: the newest checkpoint first
        assert result.lineage_tag == tag and [p.tag for p in result.candidates[:1]] in ([], ["checkpoint:chk-000003"])


def test_applied_point_keeps_its_lineage_without_checkpoints_and_refuses_another_lineages_hot_dir():
    records = LineageFacts(recorded="fresh:x")
    # Applied, then the pod died before the first checkpoint: start empty again, in the same lineage.
    empty = plan(restore_from=RestoreFrom(fresh="x"), ids=[], latest=None, lineage=records,
                 local=LocalState(problem="wiped"))
    assert (empty.source, empty.lineage_tag) == ("fresh", "fresh:x")
    # A valid hot dir of another lineage (its owner record says so) is not this lineage's history.
    other = plan(restore_from=RestoreFrom(fresh="x"), lineage=records,
                 local=LocalState(batch=12, attempt=4, checkpoint="chk-000003", lineage="fresh:old"))
    assert other.source == "remote" and "descends from fresh:old" in other.reason


def test_lineage_record_key_names_the_attempt_and_the_point():
    key = lineage_record_key(JobRef("d", "j"), 7, "savepoint:sp-x")
    assert key == "d/j/lineage/000007.savepoint.sp-x.json"
    assert lineage_record_of(key) == (7, "savepoint:sp-x") and lineage_record_of("d/j/lineage/x.tmp") is None


def test_restore_from_takes_at_most_one_source():
    with pytest.raises(ValueError, match="at most one"):
        RestoreFrom(fresh="x", checkpoint="chk-000001")


def test_supervisor_backoff_and_policy():
    # the one formula, the operator's too (RestartSection.backoff_seconds)
    assert [RestartSection(backoff="2s", max_backoff="10s").backoff_seconds(n) for n in range(6)] == [0, 2, 4, 8, 10, 10]
    policy = RestartSection(policy="OnFailure", max_restarts=3)
    assert should_restart(1, 0, policy) and not should_restart(1, 3, policy)
    assert not should_restart(0, 0, policy) and not should_restart(2, 0, policy)
    assert should_restart(0, 0, RestartSection(policy="Always"))
    assert not should_restart(1, 0, RestartSection(policy="Never"))
