"""spec.standby in the machine model (model_standby.py): the rules the random runs draw, driven on a
running job, with the model's invariants after every step (never two attempts at once, at most one pod
able to commit, checkpoints in fence order, restore points as for a new pod) and the quiet world's
liveness (a job with spec.standby on settles with a live standby for its next attempt)."""

from __future__ import annotations

from test_machine_model import MachineModel, running_model

from sparkpoint.runtime.spec import parse_duration


def standby_model() -> MachineModel:
    model = running_model()
    model.edit_standby(on=True, max_lag="60s")
    for _ in range(4):
        model.progress()
        model.world_invariants()
    return model


def the_standby(model: MachineModel):  # type: ignore[no-untyped-def]
    w = model.world
    [pod] = [p for p in w.pods.values() if p.following and not p.deleting]
    return pod


def settle(model: MachineModel, rounds: int = 6) -> None:
    for _ in range(rounds):
        model.progress()
        model.world_invariants()


def events(model: MachineModel) -> list[str]:
    return [e.reason for _, e in model.world.events]


def test_a_running_job_gets_a_standby_for_its_next_attempt():
    model = standby_model()
    w = model.world
    standby = the_standby(model)
    assert standby.name == f"job-{w.status['attempt'] + 1}-standby" and standby.up and not standby.ready
    assert standby.fence == 0 and w.status["standby"]["ready"] is True
    model.world_goes_quiet()


def test_a_lost_attempt_is_replaced_by_its_standby_and_a_new_standby_follows():
    model = standby_model()
    w = model.world
    old, standby = w.current(), the_standby(model)
    model.checkpoints_complete()
    w.lose(old, "deleted")
    before = w.promotions
    settle(model, 8)
    assert w.promotions == before + 1 and w.current() is standby and standby.ready
    assert w.status["attempt"] == standby.attempt and w.status["pod"] == standby.name
    assert f"job-{standby.attempt}" not in w.pods  # no cold pod for that attempt
    assert "StandbyPromoted" in events(model) and w.status["lastFailure"]["reason"] == "PodDeleted"
    model.checkpoints_complete()
    store = w.stores[w.spec.checkpoint.storage.url]
    assert store.checkpoints[-1].attempt == standby.fence  # the promoted standby commits, under its own fence
    settle(model, 6)
    assert the_standby(model).attempt == standby.attempt + 1
    model.world_goes_quiet()


def test_a_standby_that_dies_is_replaced_and_costs_no_restart():
    model = standby_model()
    w = model.world
    standby, restarts = the_standby(model), w.status.get("restarts", 0)
    w.now += 60.0
    w.lose(standby, "deleted")
    settle(model, 12)
    assert "StandbyFailed" in events(model) and w.status.get("restarts", 0) == restarts
    assert the_standby(model).attempt == standby.attempt and w.status["phase"] == "Running"
    model.world_goes_quiet()


def test_a_stale_standby_is_not_promoted_the_next_attempt_is_a_cold_pod():
    model = standby_model()
    w = model.world
    old, standby = w.current(), the_standby(model)
    standby.standby.lag = 500.0  # its last look at the store ended long ago
    w.lose(old, "deleted")
    settle(model, 8)
    assert "StandbyNotPromoted" in events(model) and not standby.standby.promoted
    assert w.current().name == f"job-{standby.attempt}" and w.current().standby is None
    assert standby.name not in w.pods or standby.deleting
    model.world_goes_quiet()


def test_a_standby_that_cannot_read_the_store_is_not_promoted():
    model = standby_model()
    w = model.world
    old, standby = w.current(), the_standby(model)
    standby.standby.error = "StoreError: 503"
    w.lose(old, "node_lost")
    settle(model, 8)
    assert not standby.standby.promoted and w.current().name == f"job-{standby.attempt}"


def test_a_frozen_attempt_is_replaced_by_the_standby_and_its_thawed_zombie_is_fenced_out():
    model = standby_model()
    w = model.world
    old, standby = w.current(), the_standby(model)
    model.checkpoints_complete()
    w.freeze(old)
    old.stuck = True
    frozen_at, bound = w.now, parse_duration(w.spec.restart.lost_after)
    while w.current() is old:
        model.progress()
        model.world_invariants()
        assert w.now - frozen_at < bound + 70, "the frozen attempt was not given up"
    assert w.status["lastFailure"]["reason"] == "AttemptLost" and w.current() is standby
    settle(model, 5)
    assert standby.ready and standby.standby.promoted and old.frozen and old.name in w.pods
    before = w.fenced_commits
    w.thaw(old)
    model.world_invariants()
    assert w.fenced_commits == before + 1  # it tried, and the fence refused
    model.world_goes_quiet()


def test_a_frozen_standby_is_replaced_and_never_promoted():
    model = standby_model()
    w = model.world
    standby = the_standby(model)
    w.freeze(standby)
    standby.stuck = True
    settle(model, 40)
    assert standby.deleting and "StandbyFailed" in events(model)
    standby.stuck = False
    w.thaw(standby)  # the thawed zombie standby takes its SIGTERM; it never claimed the fence
    model.world_invariants()
    model.world_goes_quiet()
    assert standby.name not in w.pods or not standby.standby.promoted


def test_an_upgrade_replaces_the_standby_with_one_of_the_new_spec():
    model = standby_model()
    w = model.world
    standby = the_standby(model)
    model.edit_job_args(n=1)
    model.world_goes_quiet()
    new = the_standby(model)
    assert new is not standby and new.spec.job.args == w.spec.job.args and not standby.standby.promoted


def test_random_runs_promote_standbys():
    """The random runs reach promotions (the short CI run too): the rules are not dead."""
    model = standby_model()
    w = model.world
    for _ in range(3):
        w.lose(w.current(), "deleted")
        settle(model, 10)
    assert w.promotions == 3
