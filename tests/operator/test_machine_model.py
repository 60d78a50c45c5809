"""A model that finds the next ones (issue 25): machine.decide against a simulated world
(model_world.py), driven by a hypothesis RuleBasedStateMachine: world events, user edits, API faults
and operator rounds at random, invariants after every step, liveness when the world goes quiet.
What it covers and found: docs/reliability.md, "The machine model". SPARKPOINT_MODEL_STEPS=N runs
at least N steps (make test-full: 100000); CI runs it short.
"""

from __future__ import annotations

import os

import pytest
from hypothesis import HealthCheck, settings
from hypothesis import strategies as st
from hypothesis.stateful import (
    RuleBasedStateMachine,
    invariant,
    precondition,
    rule,
    run_state_machine_as_test,
)
from model_found import FOUND
from model_standby import StandbyRules
from model_world import IMAGES, STORES, Chk, ModelViolation, Pod, World, tag_of

from sparkpoint.operator.decisions.checkpoints import number, parse_time
from sparkpoint.operator.decisions.machine import backoff_seconds, spec_key
from sparkpoint.operator.decisions.model import StopRuntime
from sparkpoint.runtime.spec import parse_duration

QUIET_ROUNDS = 200  # operator rounds a quiet world gives the job to settle
QUIET_SECONDS = 1800.0  # and simulated time (backoffs, drain grace, upgrade timeout 60s, listing wait)
REPORT_AFTER = 900.0  # creates refused this long (and >= 5 times): status must say so
PODS = st.integers(0, 3)  # 0: the newest pod, 1: the one before, ...
STEPS = {"steps": 0, "examples": 0}


def check_create(w: World, action, spec) -> None:  # type: ignore[no-untyped-def]
    """The restore point of an attempt being created (the pod does not exist yet)."""
    rf, store = action.restore_from, w.stores[spec.checkpoint.storage.url]
    tag, user = tag_of(rf), tag_of(w.spec.restore_from)
    where = f"attempt {action.attempt} restores from {tag}"
    if w.user_point and w.user_point[1] > w.operator_point_step and tag != w.user_point[0]:
        raise ModelViolation(f"{where}, not spec.restoreFrom {w.user_point[0]}, named since and not applied yet")
    sp = w.drain_savepoint
    if sp and sp[1] == store_url(spec) and not w.user_point and store.find(f"savepoint:{sp[0]}") \
            and tag != f"savepoint:{sp[0]}":
        raise ModelViolation(f"{where}, not the savepoint {sp[0]} the drain before it took")
    if user and user in w.failed_points and w.last_tag == user and tag != user \
            and user.split(":", 1)[1] not in (w.status.get("lastFailure") or {}).get("message", ""):
        raise ModelViolation(f"{where}: spec.restoreFrom {user} failed to restore and is replaced without a "
                             f"failure naming it (lastFailure: {w.status.get('lastFailure')})")
    # What the runtime will restore (restoreFrom is a lineage marker once a checkpoint descends from it).
    failed = set(w.failed_points)
    probe = Pod("probe", action.attempt, spec, rf, store_url(spec), fence=w.fence + 1, incarnation=w.incarnation)
    outcome = w.restore(probe, record=False)
    w.failed_points = failed
    point = outcome and outcome[1]
    good = [c for c in store.readable() if f"checkpoint:{c.id}" not in w.failed_points]
    if action.spec is not None:  # a rollback restores the stable spec's state, never the rejected spec's
        good = [c for c in good if w.spec_of_fence.get(c.attempt) in (None, spec_key(spec))]
    if isinstance(point, Chk) and f"checkpoint:{point.id}" != user and good and good[-1].num > point.num:
        raise ModelViolation(f"{where}: the runtime restores {point.id}, older than the newest restorable "
                             f"checkpoint {good[-1].id}")
    if outcome and point is None and action.spec is not None and tag != user and good:
        raise ModelViolation(f"{where}: a rollback that starts without state while the store holds {good[-1].id}")


LATE_SLACK = 1.0


def check_decision(w: World, obs, d) -> None:  # type: ignore[no-untyped-def]
    st, old, spec = d.status, obs.status.document(), obs.spec
    if st.get("attempt", 0) < old.get("attempt", 0) or st.get("restarts", 0) < old.get("restarts", 0):
        raise ModelViolation(f"status.attempt/restarts went back: {old.get('attempt')}/{old.get('restarts')} "
                             f"-> {st.get('attempt')}/{st.get('restarts')}")
    if st.get("phase") == "Finished" and spec.restart.policy == "Always":
        raise ModelViolation("phase Finished under restart.policy Always (exit 0 is restarted then)")
    if st.get("phase") in ("Upgrading", "Suspended") and old.get("phase") != st.get("phase") or d.of(StopRuntime):
        w.operator_point_step = w.step
    window = parse_duration(spec.restart.window)
    own = [t for t in w.failures if w.now - t <= 2 * window or t >= w.last_round_at]
    if st.get("phase") == "Failed" and old.get("phase") != "Failed" and spec.restart.policy != "Never" \
            and "exceeded" in (st.get("lastFailure") or {}).get("message", "") and len(own) <= spec.restart.max_restarts:
        raise ModelViolation(f"Failed over the restart budget after {len(own)} failures of the job itself "
                             f"(maxRestarts {spec.restart.max_restarts}); the others were lost pods")
    attempt, tracking = old.get("attempt", 0), st.get("tracking") or {}
    nxt = tracking.get("nextAttemptAt") or parse_time(st.get("nextAttemptAt"))
    if st.get("phase") == "Recovering" and old.get("phase") != "Recovering" and nxt \
            and attempt in w.lost and attempt not in w.failed_attempts:
        bound = backoff_seconds(spec, len([t for t in own if w.now - t <= window or t >= w.last_round_at]) + 1)
        if nxt - w.now > bound:
            raise ModelViolation(f"a lost pod ({w.lost[attempt]}) waits {nxt - w.now:g}s for the next attempt, "
                                 f"more than the backoff of the job's own failures ({bound:g}s)")
    seen = w.current(w.seen)
    if seen is not None and seen.attempt in w.oom_kills and seen.attempt == old.get("attempt"):
        # An OOM kill is a failure of the job (a new attempt), never a local recovery kept silent.
        w.oom_kills.discard(seen.attempt)
        if (st.get("lastFailure") or {}).get("reason") == "ContainerRestarted":
            raise ModelViolation(f"attempt {seen.attempt} was OOM-killed; lastFailure {st.get('lastFailure')}, "
                                 f"phase {st.get('phase')}")
    failure = st.get("lastFailure") or {}
    if failure.get("reason") == "AttemptLost" and failure != old.get("lastFailure") and seen is not None:
        silent = seen.unanswered_since  # the world's truth, not the operator's bookkeeping
        bound = parse_duration(spec.restart.lost_after)
        if silent is None or w.now - silent < bound:
            raise ModelViolation(f"attempt {seen.attempt} given up as lost, but its runtime answered "
                                 f"{'a request since' if silent is None else f'{w.now - silent:g}s ago'} "
                                 f"(restart.lostAfter {spec.restart.lost_after}): a slow runtime killed")
    if seen is not None and seen.unanswered_since is not None and failure == old.get("lastFailure") \
            and st.get("attempt", 0) == old.get("attempt", 0) and seen.attempt == old.get("attempt") \
            and st.get("phase") in ("Running", "Recovering") and not seen.deleting and not seen.following:
        # ...nor too late: a runtime silent (the world's truth) for lostAfter is given up by the round
        # after, whatever the checkpoint interval (the liveness poll dates the silence, its decision
        # requeues to the bound). The slack is the wait's own step (model_world.World.wait).
        bound = parse_duration(spec.restart.lost_after)
        if w.now - seen.unanswered_since > bound + LATE_SLACK:
            raise ModelViolation(f"attempt {seen.attempt} silent for {w.now - seen.unanswered_since:g}s and not given "
                                 f"up (restart.lostAfter {spec.restart.lost_after}, phase {st.get('phase')})")
    pod, listed = w.current(w.seen), obs.store_checkpoints or []
    latest = (st.get("latestCheckpoint") or {}).get("id")
    here = {c.id: c for c in w.stores[store_url(spec)].checkpoints}
    if listed and pod is not None and pod.url == store_url(spec) and pod.latest is not None \
            and (latest not in here or here[latest].num < number(listed[-1].id)):
        raise ModelViolation(f"status.latestCheckpoint {latest} is not the store's newest {listed[-1].id}")


def store_url(spec) -> str:  # type: ignore[no-untyped-def]
    return spec.checkpoint.storage.url


class MachineModel(StandbyRules, RuleBasedStateMachine):
    def __init__(self) -> None:
        super().__init__()
        self.world = World()
        self.world.check_create, self.world.check_decision = check_create, check_decision
        self.nonce = 0
        self.nonce_step = -1
        self.restart_nonce = 0
        self.checkpoint_nonces = 0  # (not checkpoint_nonce: the rule of that name)
        STEPS["examples"] += 1

    def pod(self, i: int):  # type: ignore[no-untyped-def]
        pods = sorted(self.world.pods.values(), key=lambda p: p.attempt)
        return pods[-1 - i % len(pods)] if pods else None

    # --- world events ----------------------------------------------------------------------------------
    @rule(i=PODS)
    def pod_starts(self, i: int) -> None:
        if pod := self.pod(i):
            self.world.start(pod)

    @rule(i=PODS)
    def pod_becomes_ready(self, i: int) -> None:
        if pod := self.pod(i):
            self.world.become_ready(pod)

    @rule(i=PODS)
    def pod_becomes_unready(self, i: int) -> None:
        if pod := self.pod(i):
            pod.ready = False

    @rule(i=PODS, code=st.sampled_from([1, 137]))
    def runtime_crashes(self, i: int, code: int) -> None:
        if pod := self.pod(i):
            self.world.crash(pod, code)

    @rule(i=PODS)
    def runtime_oom_killed(self, i: int) -> None:
        if pod := self.pod(i):
            self.world.crash(pod, 137, reason="OOMKilled")

    @rule(i=PODS)
    def runtime_stops_on_its_own(self, i: int) -> None:
        if (pod := self.pod(i)) and not pod.following:  # (a standby exits only when asked to stop)
            self.world.exit_zero(pod)

    @rule(i=PODS)
    def pod_deleted_externally(self, i: int) -> None:
        if (pod := self.pod(i)) and not pod.deleting:
            self.world.lose(pod, "deleted")

    @rule(i=PODS)
    def pod_sticks_in_terminating(self, i: int) -> None:
        if pod := self.pod(i):
            pod.stuck = True

    @rule()
    def stuck_pods_let_go(self) -> None:
        for pod in self.world.pods.values():
            pod.stuck = False

    @rule(i=PODS)
    def node_lost(self, i: int) -> None:
        if (pod := self.pod(i)) and not pod.deleting:
            self.world.lose(pod, "node_lost")

    @rule(i=PODS)
    def pod_vanishes_from_index(self, i: int) -> None:
        if pod := self.pod(i):
            pod.in_index = False

    @rule()
    def index_relists(self) -> None:
        for pod in self.world.pods.values():
            pod.in_index = True

    @rule(i=PODS)
    def runtime_freezes(self, i: int) -> None:
        """The cgroup freezer (or a node that stops answering while its pods' network is up)."""
        if pod := self.pod(i):
            self.world.freeze(pod)

    @rule(i=PODS)
    def runtime_thaws(self, i: int) -> None:
        if pod := self.pod(i):
            self.world.thaw(pod)

    @rule(i=PODS, seconds=st.sampled_from([5.0, 14.0, 30.0, 45.0, 120.0]), thaw=st.booleans())
    def runtime_frozen_for(self, i: int, seconds: float, thaw: bool) -> None:
        """Frozen while the world goes on for a while (the operator may give the attempt up), then
        maybe thawed: a zombie beside the next attempt."""
        if pod := self.pod(i):
            self.world.freeze(pod)
            end = self.world.now + seconds
            while self.world.now < end:
                self.progress()
            if thaw:
                self.world.thaw(pod)

    @rule(i=PODS, n=st.integers(1, 3))
    def runtime_answers_late(self, i: int, n: int) -> None:
        """The next n requests to a running runtime time out (an overloaded node), then it answers."""
        if pod := self.pod(i):
            pod.slow = n

    @rule()
    def terminations_finish(self) -> None:
        self.world.finish_terminations()

    @rule()
    def checkpoints_complete(self) -> None:
        self.world.complete_requests()

    @rule()
    def drains_complete(self) -> None:
        for pod in list(self.world.pods.values()):
            if pod.draining:
                self.world.finish_drain(pod)

    @rule()
    def newest_manifest_unreadable(self) -> None:
        store = self.world.stores[self.world.spec.checkpoint.storage.url]
        if store.checkpoints:
            store.checkpoints[-1].readable = False

    @rule()
    def manifests_readable_again(self) -> None:
        for store in self.world.stores.values():
            for chk in store.checkpoints:
                chk.readable = True

    @rule(seconds=st.sampled_from([0.5, 2.0, 10.0, 30.0, 60.0, 120.0, 600.0]))
    def time_passes(self, seconds: float) -> None:
        self.world.now += seconds

    # --- the user and the API server -------------------------------------------------------------------
    @rule(n=st.integers(1, 3))
    def edit_job_args(self, n: int) -> None:
        self.world.edit(lambda d: d["job"]["args"].update(n=d["job"]["args"]["n"] + n))

    @rule(image=st.sampled_from(IMAGES))
    def edit_image(self, image: str) -> None:
        self.world.edit(lambda d: d.update(image=image))

    @rule(policy=st.sampled_from(["Always", "OnFailure", "Never"]))
    def edit_restart_policy(self, policy: str) -> None:
        self.world.edit(lambda d: d["restart"].update(policy=policy))

    @rule(mode=st.sampled_from(["stateless", "savepoint", "last-checkpoint"]))
    def edit_upgrade_mode(self, mode: str) -> None:
        self.world.edit(lambda d: d.update(upgradeMode=mode))

    @rule(i=st.integers(0, 1))
    def edit_storage_url(self, i: int) -> None:
        self.world.edit(lambda d: d["checkpoint"]["storage"].update(url=STORES[i]))

    @rule(store=st.sampled_from(["rocksdb", "hdfs"]), partitions=st.sampled_from([2, 4]),
          fresh=st.booleans())
    def edit_state_store_or_partitions(self, store: str, partitions: int, fresh: bool) -> None:
        """Changes Spark cannot apply to state unless the edit starts without it (runtime/spec/changes.py)."""
        def change(d) -> None:  # type: ignore[no-untyped-def]
            d.setdefault("spark", {}).update(stateStore=store, shufflePartitions=partitions)
            if fresh:
                d["restoreFrom"] = {"fresh": f"fresh-{self.world.step}"}
        self.world.edit(change)

    @rule(state=st.sampled_from(["suspended", "running"]))
    def suspend_or_resume(self, state: str) -> None:
        self.world.edit(lambda d: d.update(state=state))

    @rule()
    def savepoint_nonce(self) -> None:
        self.nonce += 1
        self.nonce_step = self.world.step
        self.world.edit(lambda d: d.setdefault("savepoint", {}).update(triggerNonce=self.nonce))

    @rule()
    def checkpoint_nonce(self) -> None:
        self.checkpoint_nonces += 1
        self.world.edit(lambda d: d.setdefault("checkpoint", {}).update(triggerNonce=self.checkpoint_nonces))

    @rule()
    def restart_nonce_changes(self) -> None:
        self.restart_nonce += 1
        self.world.edit(lambda d: d.update(restartNonce=self.restart_nonce))

    @rule(kind=st.sampled_from(["none", "checkpoint", "savepoint", "missing", "fresh"]), i=st.integers(0, 9))
    def edit_restore_from(self, kind: str, i: int) -> None:
        store = self.world.stores[self.world.spec.checkpoint.storage.url]
        point = None
        if kind == "checkpoint" and store.checkpoints:
            point = {"checkpoint": store.checkpoints[-1 - i % len(store.checkpoints)].id}
        elif kind == "savepoint" and store.savepoints:
            point = {"savepoint": store.savepoints[-1 - i % len(store.savepoints)]["name"]}
        elif kind == "missing":
            point = {"savepoint": "sp-missing"}
        elif kind == "fresh":
            point = {"fresh": f"fresh-{i}"}
        self.world.edit(lambda d: d.update(restoreFrom=point) if point else d.pop("restoreFrom", None))

    @rule()
    def delete_job(self) -> None:
        self.world.delete_cr()

    # --- the hot volume's pods (model_hot_volume.py) ---------------------------------------------------
    @rule()
    def garbage_collector_runs(self) -> None:
        self.world.hot.collect(set(self.world.pods))

    @rule()
    def executor_sticks_in_terminating(self) -> None:
        for ex in self.world.hot.executors.values():
            ex.stuck = True
            break

    @rule()
    def executors_let_go(self) -> None:
        for ex in self.world.hot.executors.values():
            ex.stuck = False

    @rule()
    def cleanup_pod_runs(self) -> None:
        self.world.hot_volume_progresses()

    @rule()
    def cleanup_pod_fails(self) -> None:
        self.world.hot.fail_cleanup()

    @rule()
    def cleanup_pod_hangs(self) -> None:
        if self.world.hot.cleanup is not None:
            self.world.hot.cleanup.hangs = True

    @rule(stuck=st.booleans())
    def cleanup_pod_sticks_in_terminating(self, stuck: bool) -> None:
        if self.world.hot.cleanup is not None:
            self.world.hot.cleanup.stuck = stuck

    @rule(n=st.integers(1, 3))
    def status_writes_fail(self, n: int) -> None:
        self.world.fail_writes = n

    @rule(refuse=st.booleans())
    def api_server_refuses_pod_creates(self, refuse: bool) -> None:
        w = self.world
        if refuse and not w.refuse_creates:
            w.refused, w.refuse_since = 0, w.now
        w.refuse_creates = refuse

    # --- the operator ----------------------------------------------------------------------------------
    @rule()
    def operator_round(self) -> None:
        d = self.world.operator_round()
        self.restore_points_are_pinned(d)

    @rule(n=st.integers(2, 6))
    def operator_rounds(self, n: int) -> None:
        for _ in range(n):
            d = self.world.operator_round()
            self.world.now += min(2.0, d.requeue_after if d else 2.0)

    @rule(n=st.integers(1, 8))
    def world_progresses(self, n: int) -> None:
        """Rounds in which pods start, get Ready, terminate and drains end (faults go on)."""
        for _ in range(n):
            self.progress()

    def progress(self) -> None:
        w = self.world
        w.hot_volume_progresses()
        w.finish_terminations()
        for pod in list(w.pods.values()):
            if pod.spec.image == IMAGES[2] and pod.phase == "Running":
                w.crash(pod, 1)  # CrashLoopBackOff
            w.start(pod)
            w.become_ready(pod)
            if pod.frozen:
                pod.ready = False  # its readiness probe times out
            if pod.draining:
                w.finish_drain(pod)
        w.complete_requests()
        d = w.operator_round()
        w.wait(min(60.0, d.requeue_after if d else 2.0))

    @precondition(lambda self: self.world.step > 0)
    @rule()
    def world_goes_quiet(self) -> None:
        """Every fault stops; pods start, get Ready, terminate, drains end. The job must settle."""
        w = self.world
        w.refuse_creates, w.fail_writes = False, 0
        for pod in w.pods.values():
            pod.slow = 0  # frozen pods stay frozen: the job must recover without them
            if pod.standby is not None:
                pod.standby.lag, pod.standby.error = 1.0, None
            pod.in_index = True  # stuck pods stay stuck: only a forced delete removes them
        start, why = w.now, None
        for _ in range(QUIET_ROUNDS):
            self.progress()
            why = self.unsettled()
            if why is None or w.now - start > QUIET_SECONDS:
                break
        if why is not None:
            raise ModelViolation(f"the job does not settle in a quiet world ({w.now - start:g}s): {why}; "
                                 f"phase {w.status.get('phase')}, generation {w.generation}, "
                                 f"pods {[(p.name, p.phase, p.ready, p.deleting) for p in w.pods.values()]}, "
                                 f"lastFailure {w.status.get('lastFailure')}")

    def unsettled(self) -> str | None:
        """None when the job has acted on its spec: running it, suspended, or Failed/Finished for it."""
        w = self.world
        if w.deleting:
            return "deletion not finished"
        st_, spec, pods = w.status, w.spec, list(w.pods.values())
        phase = st_.get("phase")
        if spec.state == "suspended":
            return None if phase == "Suspended" and not pods else "suspend not done"
        if phase in ("Failed", "Finished"):
            if w.terminal_gen != (phase, w.generation):
                return f"{phase} since generation {w.terminal_gen and w.terminal_gen[1]}, the spec was edited since"
            if any(p.alive for p in pods):
                return f"{phase} with a live pod"
            return None if phase == "Finished" or st_.get("lastFailure") else "Failed without a reason"
        pod = w.current()
        if phase != "Running" or pod is None or not pod.ready:
            return f"phase {phase} without a ready pod"
        if spec_key(pod.spec) != spec_key(spec) and w.rollback_step <= w.upgrade_edit_step:
            return f"attempt {pod.attempt} runs a spec older than generation {w.generation}, no reason"
        if pod.spec.restart_nonce != spec.restart_nonce and spec.restart_nonce is not None:
            return (f"attempt {pod.attempt} was started before restartNonce {spec.restart_nonce}: "
                    "the job was not restarted")
        if spec.standby and spec.standby.enabled and not any(
                p.following and p.up and not p.frozen and not p.deleting and p.attempt == pod.attempt + 1
                for p in pods):
            return f"spec.standby is on and attempt {pod.attempt} has no live standby"
        answered = (st_.get("tracking") or {}).get("checkpointNonce")
        if spec.checkpoint.trigger_nonce is not None and answered != spec.checkpoint.trigger_nonce:
            return f"checkpoint.triggerNonce {spec.checkpoint.trigger_nonce} not answered (last {answered})"
        if self.nonce and self.nonce_step >= 0:
            taken = any(s["name"] == f"nonce-{self.nonce}" for s in
                        (sp for store in w.stores.values() for sp in store.savepoints))
            reported = any(e.reason == "SavepointFailed" and step >= self.nonce_step for step, e in w.events)
            if not (taken or reported):
                return f"savepoint nonce {self.nonce} neither taken nor reported"
        return None

    # --- invariants ------------------------------------------------------------------------------------
    @invariant()
    def world_invariants(self) -> None:
        STEPS["steps"] += 1
        self.never_two_attempts_at_once()
        self.never_two_attempts_that_can_commit()
        self.refused_creates_are_reported()

    def restore_points_are_pinned(self, d) -> None:  # type: ignore[no-untyped-def]
        """After a round whose status was written, the GC of a live pod keeps every checkpoint an
        attempt may be given by name (the user's restoreFrom, the lineage, a next or rollback point),
        so retention never prunes one before the attempt that needs it starts."""
        w = self.world
        if d is None or w.status is not d.status and w.status != d.status or not any(p.alive for p in w.pods.values()):
            return
        tr, spec_point = w.status.get("tracking") or {}, w.doc.get("restoreFrom") or {}
        points = [spec_point, (tr.get("lineage") or {}).get("point"), tr.get("nextPoint"), tr.get("rollbackPoint")]
        named = {p["checkpoint"] for p in points if isinstance(p, dict) and p.get("checkpoint")}
        assert named <= w.gc_pins, f"checkpoints {sorted(named - w.gc_pins)} may be restored but are not pinned"

    def never_two_attempts_at_once(self) -> None:
        alive = sorted({p.attempt for p in self.world.pods.values() if p.alive and not p.following})
        assert len(alive) <= 1, f"pods of attempts {alive} alive (not deleting) at once"

    def never_two_attempts_that_can_commit(self) -> None:
        """Pods of a lost attempt may outlive the next attempt's start (Terminating, frozen), but the
        fence leaves at most one able to commit, and every store's checkpoints were written in fence
        order: a zombie that thaws after a newer attempt started commits nothing."""
        w = self.world
        can = [p.attempt for p in w.pods.values() if p.up and not p.frozen and p.fence == w.fence]
        assert len(can) <= 1, f"pods of attempts {can} can commit at once"
        for url, store in w.stores.items():
            fences = [c.attempt for c in store.checkpoints]
            assert fences == sorted(fences), f"{url}: checkpoints out of fence order {fences} (a zombie committed)"

    def refused_creates_are_reported(self) -> None:
        w = self.world
        if w.refuse_creates and w.refused >= 5 and w.now - w.refuse_since >= REPORT_AFTER:
            at = parse_time((w.status.get("lastFailure") or {}).get("at"))
            assert w.status.get("phase") == "Failed" or (at is not None and at >= int(w.refuse_since)), (
                f"pod creates refused {w.refused} times over {w.now - w.refuse_since:g}s; phase "
                f"{w.status.get('phase')}, no failure reported (lastFailure {w.status.get('lastFailure')})")


@pytest.mark.parametrize("steps", FOUND.values(), ids=FOUND.keys())
def test_found_by_the_model(steps: list[tuple[str, dict]]) -> None:
    model = MachineModel()
    model.world.step = 1  # as after a round: world_goes_quiet's precondition
    for name, args in steps:
        getattr(model, name)(**args)
        model.world_invariants()


@pytest.mark.timeout(3600)  # the 100,000-step run of make test-full: 5-7 min idle, over 10 on a loaded machine
def test_machine_model() -> None:
    """Short (CI): 100 runs of up to 100 steps. SPARKPOINT_MODEL_STEPS=N (make test-full: 100000):
    runs of up to 200 steps until N steps in all, counted and printed."""
    total = int(os.environ.get("SPARKPOINT_MODEL_STEPS") or 0)
    steps = 200 if total else 100
    # CI's short run is derandomized (the same examples every run: a red CI is a change's doing, not
    # a draw); the long run explores anew each time.
    config = settings(max_examples=max(100, total // steps), stateful_step_count=steps, deadline=None,
                      suppress_health_check=list(HealthCheck), print_blob=True, derandomize=not total,
                      database=None if not total else settings.default.database)
    STEPS.update(steps=0, examples=0)
    try:
        run_state_machine_as_test(MachineModel, settings=config)
        while STEPS["steps"] < total:  # a run ends early when hypothesis has seen enough of it
            run_state_machine_as_test(MachineModel, settings=config)
    finally:
        if total:
            print(f"\nmachine model: {STEPS['steps']} steps in {STEPS['examples']} runs")


@pytest.mark.parametrize("before", [[], ["savepoint_nonce"], ["runtime_crashes"]])
def test_the_model_restarts_on_a_restart_nonce(before: list[str]) -> None:
    """The rule the random runs draw, on a running job: the quiet world's liveness check (every
    running attempt started with the current restartNonce) holds only if the operator restarted it."""
    model = MachineModel()
    model.world.step = 1
    model.world_progresses(n=5)
    for name in before:
        getattr(model, name)(**({"i": 0, "code": 1} if name == "runtime_crashes" else {}))
    model.restart_nonce_changes()
    model.world_invariants()
    model.world_goes_quiet()
    assert model.world.current().spec.restart_nonce == 1


def running_model() -> MachineModel:
    model = MachineModel()
    model.world.step = 1
    model.world_progresses(n=5)
    assert model.world.status["phase"] == "Running"
    return model


def test_a_frozen_attempt_is_replaced_within_the_bound_and_its_thawed_zombie_is_fenced_out() -> None:
    model = running_model()
    w = model.world
    old = w.current()
    model.checkpoints_complete()
    w.freeze(old)
    old.stuck = True  # its kubelet waits out the grace period before it kills the frozen processes
    frozen_at, bound = w.now, parse_duration(w.spec.restart.lost_after)
    while w.current() is old:
        model.progress()
        model.world_invariants()
        assert w.now - frozen_at < bound + 70, "the frozen attempt was not given up"
    assert w.status["lastFailure"]["reason"] == "AttemptLost"
    assert old.name in w.pods and old.deleting and old.frozen  # Terminating beside the next attempt
    for _ in range(5):
        model.progress()
    assert w.current().ready and w.stores[w.spec.checkpoint.storage.url].checkpoints[-1].attempt == w.current().fence
    before = w.fenced_commits
    w.thaw(old)
    model.world_invariants()
    assert w.fenced_commits == before + 1  # it tried, and the fence refused
    model.world_goes_quiet()


def test_a_slow_runtime_that_answers_within_the_bound_is_not_killed() -> None:
    model = running_model()
    w = model.world
    pod, start = w.current(), w.now
    while w.now - start < 600:
        pod.slow = 2  # two requests in a row time out, then one is answered: never silent for the bound
        for _ in range(3):
            w.operator_round()
            w.wait(4.0)
        model.world_invariants()
    assert w.current() is pod and w.status["phase"] == "Running" and w.status.get("lastFailure") is None
