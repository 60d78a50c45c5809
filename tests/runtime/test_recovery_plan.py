"""Where state comes from on start: the pure decision."""

from __future__ import annotations

from datetime import UTC, datetime

from sparkpoint.runtime.config import RestartSection, RestoreFrom
from sparkpoint.runtime.service.recovery import plan_restore
from sparkpoint.runtime.service.supervisor import backoff_seconds, should_restart
from sparkpoint.runtime.store import Manifest, Totals


def manifest(cid: str, batch: int, **extra) -> Manifest:
    now = datetime.now(UTC)
    return Manifest(id=cid, namespace="d", job="j", job_uid="u", attempt=1, batch_id=batch, trigger_time=now,
                    completion_time=now, base_checkpoint=None, spark_version="4", state_provider="rocksdb",
                    files=[], totals=Totals(files=0, bytes=0, new_bytes=0, reused_bytes=0), extra=extra)


def test_local_when_hot_dir_is_valid_and_not_behind():
    plan = plan_restore(restore_from=None, latest=manifest("chk-000003", 10), local_recovery=True,
                        local_batch=12, local_problem=None)
    assert plan.source == "local"


def test_remote_when_hot_dir_is_missing_behind_or_disabled():
    latest = manifest("chk-000003", 10)
    assert plan_restore(restore_from=None, latest=latest, local_recovery=True, local_batch=None,
                        local_problem="gone").checkpoint_id == "chk-000003"
    assert plan_restore(restore_from=None, latest=latest, local_recovery=True, local_batch=9,
                        local_problem=None).source == "remote"
    assert plan_restore(restore_from=None, latest=latest, local_recovery=False, local_batch=12,
                        local_problem=None).source == "remote"


def test_fresh_and_restore_from_applied_once():
    assert plan_restore(restore_from=None, latest=None, local_recovery=True, local_batch=None,
                        local_problem=None).source == "fresh"
    sp = RestoreFrom(savepoint="before-upgrade")
    first = plan_restore(restore_from=sp, latest=manifest("chk-000009", 40), local_recovery=True,
                         local_batch=41, local_problem=None)
    assert (first.source, first.savepoint) == ("remote", "before-upgrade")
    later = plan_restore(restore_from=sp, latest=manifest("chk-000011", 50, restoredFrom="savepoint:before-upgrade"),
                         local_recovery=True, local_batch=52, local_problem=None)
    assert later.source == "local"


def test_supervisor_backoff_and_policy():
    assert [backoff_seconds(n, 2, 10) for n in range(6)] == [0, 2, 4, 8, 10, 10]
    policy = RestartSection(policy="OnFailure", max_restarts=3)
    assert should_restart(1, 0, policy) and not should_restart(1, 3, policy)
    assert not should_restart(0, 0, policy) and not should_restart(2, 0, policy)
    assert should_restart(0, 0, RestartSection(policy="Always"))
    assert not should_restart(1, 0, RestartSection(policy="Never"))
