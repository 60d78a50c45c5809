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
from model_world import IMAGES, STORES, Chk, ModelViolation, Pod, World, tag_of

from sparkpoint.operator.checkpoints import number, parse_time
from sparkpoint.operator.machine import backoff_seconds, spec_key
from sparkpoint.operator.model import StopRuntime
from sparkpoint.runtime.config import parse_duration

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
    if isinstance(point, Chk) and f"checkpoint:{point.id}" != user and good and good[-1].num > point.num:
        raise ModelViolation(f"{where}: the runtime restores {point.id}, older than the newest restorable "
                             f"checkpoint {good[-1].id}")
    if outcome and point is None and action.spec is not None and tag != user and good:
        raise ModelViolation(f"{where}: a rollback that starts without state while the store holds {good[-1].id}")


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
    pod, listed = w.current(w.seen), obs.store_checkpoints or []
    latest = (st.get("latestCheckpoint") or {}).get("id")
    here = {c.id: c for c in w.stores[store_url(spec)].checkpoints}
    if listed and pod is not None and pod.url == store_url(spec) and pod.latest is not None \
            and (latest not in here or here[latest].num < number(listed[-1].id)):
        raise ModelViolation(f"status.latestCheckpoint {latest} is not the store's newest {listed[-1].id}")


def store_url(spec) -> str:  # type: ignore[no-untyped-def]
    return spec.checkpoint.storage.url


class MachineModel(RuleBasedStateMachine):
    def __init__(self) -> None:
        super().__init__()
        self.world = World()
        self.world.check_create, self.world.check_decision = check_create, check_decision
        self.nonce = 0
        self.nonce_step = -1
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
        if pod := self.pod(i):
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
        """Changes Spark cannot apply to state unless the edit starts without it (spec_changes.py)."""
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
            if pod.draining:
                w.finish_drain(pod)
        w.complete_requests()
        d = w.operator_round()
        w.now += min(60.0, d.requeue_after if d else 2.0)

    @precondition(lambda self: self.world.step > 0)
    @rule()
    def world_goes_quiet(self) -> None:
        """Every fault stops; pods start, get Ready, terminate, drains end. The job must settle."""
        w = self.world
        w.refuse_creates, w.fail_writes = False, 0
        for pod in w.pods.values():
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
        alive = sorted({p.attempt for p in self.world.pods.values() if p.alive})
        assert len(alive) <= 1, f"pods of attempts {alive} alive (not deleting) at once"

    def refused_creates_are_reported(self) -> None:
        w = self.world
        if w.refuse_creates and w.refused >= 5 and w.now - w.refuse_since >= REPORT_AFTER:
            at = parse_time((w.status.get("lastFailure") or {}).get("at"))
            assert w.status.get("phase") == "Failed" or (at is not None and at >= int(w.refuse_since)), (
                f"pod creates refused {w.refused} times over {w.now - w.refuse_since:g}s; phase "
                f"{w.status.get('phase')}, no failure reported (lastFailure {w.status.get('lastFailure')})")


# Violations the model found, replayed every run (docs/reliability.md, "The machine model").
FOUND = {
    "index loses a draining pod: a second attempt beside it": [
        ("edit_upgrade_mode", {"mode": "last-checkpoint"}), ("world_goes_quiet", {}),
        ("edit_image", {"image": IMAGES[1]}), ("operator_round", {}),
        ("pod_vanishes_from_index", {"i": 0}), ("operator_round", {})],
    "restoreFrom named after a suspend's drain: the suspend savepoint wins": [
        ("world_goes_quiet", {}), ("suspend_or_resume", {"state": "suspended"}), ("world_goes_quiet", {}),
        ("suspend_or_resume", {"state": "running"}), ("edit_restore_from", {"kind": "checkpoint", "i": 0}),
        ("world_goes_quiet", {})],
    "restoreFrom named during a stateless upgrade: never applied": [
        ("world_goes_quiet", {}), ("world_progresses", {"n": 8}), ("edit_upgrade_mode", {"mode": "stateless"}),
        ("operator_round", {}),
        ("edit_restore_from", {"kind": "checkpoint", "i": 0}), ("world_goes_quiet", {})],
    "rollback of an upgrade that changed the storage URL: the stable spec starts without state": [
        ("edit_upgrade_mode", {"mode": "last-checkpoint"}), ("world_goes_quiet", {}), ("world_progresses", {"n": 8}),
        ("edit_storage_url", {"i": 1}), ("edit_image", {"image": IMAGES[2]}), ("world_goes_quiet", {})],
    "back to an earlier storage URL: the lineage of the other store names an older checkpoint here": [
        ("edit_storage_url", {"i": 1}), ("world_goes_quiet", {}), ("world_progresses", {"n": 4}),
        ("edit_storage_url", {"i": 0}), ("world_goes_quiet", {}), ("world_progresses", {"n": 8}),
        ("edit_image", {"image": IMAGES[1]}), ("world_goes_quiet", {}), ("world_progresses", {"n": 8}),
        ("edit_storage_url", {"i": 1}), ("world_goes_quiet", {}), ("world_progresses", {"n": 8}),
        ("edit_storage_url", {"i": 0}), ("world_goes_quiet", {})],
}

# Found by 100,000 steps (seed-free runs of make test-full, 2026-11-25), shrunk by hand-run delta debugging:
FOUND["a rollback to a spec on another storage URL: the operator listed the CR's store, mixing its ids in"] = [
    ("edit_storage_url", {"i": 1}), ("world_progresses", {"n": 8}), ("edit_storage_url", {"i": 0}),
    ("world_goes_quiet", {}), ("edit_image", {"image": IMAGES[2]}), ("edit_storage_url", {"i": 1}),
    ("world_goes_quiet", {}), ("edit_storage_url", {"i": 0}), ("world_progresses", {"n": 8})]
FOUND["after a rollback across stores, an upgrade's drain savepoint is not seen and an older one restored"] = [
    ("edit_storage_url", {"i": 1}), ("world_progresses", {"n": 8}), ("edit_image", {"image": IMAGES[2]}),
    ("edit_storage_url", {"i": 0}), ("world_goes_quiet", {}), ("edit_image", {"image": IMAGES[1]}),
    ("operator_rounds", {"n": 2}), ("edit_image", {"image": IMAGES[2]}), ("world_goes_quiet", {})]
FOUND["a spec edited during a rollback is not on trial, and the rejected spec re-applied is not reported"] = [
    ("edit_storage_url", {"i": 1}), ("world_progresses", {"n": 7}), ("edit_image", {"image": IMAGES[2]}),
    ("operator_rounds", {"n": 2}), ("world_progresses", {"n": 6}), ("edit_storage_url", {"i": 0}),
    ("world_goes_quiet", {}), ("edit_storage_url", {"i": 1}), ("world_goes_quiet", {})]

FOUND["a failed spec.restoreFrom named again after an edit is skipped for a checkpoint, silently"] = [
    ("world_progresses", {"n": 4}), ("edit_restore_from", {"i": 0, "kind": "missing"}),
    ("pod_deleted_externally", {"i": 1}), ("world_goes_quiet", {}), ("edit_restore_from", {"i": 6, "kind": "savepoint"}),
    ("edit_restore_from", {"i": 5, "kind": "missing"}), ("world_goes_quiet", {})]
FOUND["a failed spec.restoreFrom that came with an upgrade is replaced by its rollback after an edit"] = [
    ("world_progresses", {"n": 8}), ("pod_deleted_externally", {"i": 0}), ("edit_job_args", {"n": 1}),
    ("edit_restore_from", {"i": 4, "kind": "missing"}), ("world_goes_quiet", {}), ("time_passes", {"seconds": 600.0}),
    ("savepoint_nonce", {}), ("world_goes_quiet", {})]

FOUND["restoreFrom removed while suspended: the suspend savepoint is dropped for no point at all"] = [
    ("edit_restore_from", {"i": 5, "kind": "fresh"}), ("suspend_or_resume", {"state": "suspended"}),
    ("world_goes_quiet", {}), ("edit_restore_from", {"i": 0, "kind": "none"}),
    ("suspend_or_resume", {"state": "running"}), ("operator_rounds", {"n": 3})]
FOUND["a new spec suspended while on trial: the trial's deadline runs out while suspended, a rollback starts empty"] = [
    ("world_progresses", {"n": 3}), ("edit_restart_policy", {"policy": "Never"}), ("runtime_crashes", {"code": 1, "i": 0}),
    ("operator_rounds", {"n": 2}), ("suspend_or_resume", {"state": "suspended"}), ("edit_job_args", {"n": 2}),
    ("world_progresses", {"n": 5}), ("world_progresses", {"n": 3}), ("suspend_or_resume", {"state": "running"}),
    ("operator_rounds", {"n": 4}), ("world_progresses", {"n": 1})]

FOUND["restoreFrom named while a resumed attempt is Pending and replaced: the suspend savepoint wins"] = [
    ("suspend_or_resume", {"state": "suspended"}), ("world_goes_quiet", {}), ("suspend_or_resume", {"state": "running"}),
    ("operator_round", {}), ("edit_image", {"image": IMAGES[1]}), ("edit_restore_from", {"i": 0, "kind": "checkpoint"}),
    ("world_goes_quiet", {})]

FOUND["a restoreFrom named during a trial whose pods are refused: the rollback starts empty over it"] = [
    ("edit_storage_url", {"i": 1}), ("world_goes_quiet", {}), ("edit_image", {"image": IMAGES[1]}),
    ("pod_deleted_externally", {"i": 0}), ("operator_rounds", {"n": 4}), ("terminations_finish", {}),
    ("api_server_refuses_pod_creates", {"refuse": True}), ("operator_round", {}),
    ("edit_restore_from", {"i": 0, "kind": "missing"}), ("operator_rounds", {"n": 6}), ("world_progresses", {"n": 7}),
    ("api_server_refuses_pod_creates", {"refuse": False}), ("edit_restore_from", {"i": 0, "kind": "none"}),
    ("edit_restore_from", {"i": 0, "kind": "missing"}), ("world_progresses", {"n": 1})]
FOUND["the rejected spec re-applied while the runtime restarts in place: reported by Event"] = [
    ("world_progresses", {"n": 5}), ("edit_image", {"image": IMAGES[2]}), ("world_goes_quiet", {}),
    ("edit_storage_url", {"i": 1}), ("runtime_crashes", {"code": 137, "i": 0}), ("edit_storage_url", {"i": 0}),
    ("world_goes_quiet", {})]

FOUND["a savepoint named again after the history moved on: a new pod resumed its first application's checkpoint"] = [
    ("edit_job_args", {"n": 1}), ("world_goes_quiet", {}), ("edit_job_args", {"n": 2}), ("world_goes_quiet", {}),
    ("edit_restart_policy", {"policy": "Never"}), ("edit_job_args", {"n": 1}), ("world_goes_quiet", {}),
    ("edit_image", {"image": IMAGES[2]}), ("world_goes_quiet", {}), ("edit_restore_from", {"i": 5, "kind": "savepoint"}),
    ("edit_image", {"image": IMAGES[0]}), ("world_goes_quiet", {}), ("node_lost", {"i": 0}), ("world_goes_quiet", {})]

FOUND["resumed onto another storage URL whose pods are refused: the rollback skips the suspend savepoint"] = [
    ("world_progresses", {"n": 7}), ("suspend_or_resume", {"state": "suspended"}), ("world_goes_quiet", {}),
    ("api_server_refuses_pod_creates", {"refuse": True}), ("edit_storage_url", {"i": 1}), ("world_progresses", {"n": 5}),
    ("time_passes", {"seconds": 60.0}), ("suspend_or_resume", {"state": "running"}), ("world_progresses", {"n": 6}),
    ("world_goes_quiet", {})]
FOUND["a failed restoreFrom that came with a storage move: the later rollback lost the drain's savepoint"] = [
    ("savepoint_nonce", {}), ("world_progresses", {"n": 3}), ("edit_restore_from", {"i": 0, "kind": "savepoint"}),
    ("edit_storage_url", {"i": 1}), ("world_goes_quiet", {}), ("api_server_refuses_pod_creates", {"refuse": True}),
    ("edit_restore_from", {"i": 0, "kind": "none"}), ("world_progresses", {"n": 1}), ("time_passes", {"seconds": 60.0}),
    ("world_goes_quiet", {})]

FOUND["created again with restoreFrom a savepoint the earlier job applied: the earlier job's record said applied"] = [
    ("world_progresses", {"n": 8}), ("edit_job_args", {"n": 3}), ("world_progresses", {"n": 7}), ("delete_job", {}),
    ("world_goes_quiet", {}), ("edit_restore_from", {"i": 4, "kind": "savepoint"}), ("delete_job", {}),
    ("world_goes_quiet", {})]

FOUND["a trial begun while the newest manifest was unreadable: its rollback started empty over a readable checkpoint"] = [
    ("savepoint_nonce", {}), ("world_goes_quiet", {}), ("node_lost", {"i": 0}),
    ("api_server_refuses_pod_creates", {"refuse": True}), ("edit_job_args", {"n": 1}), ("newest_manifest_unreadable", {}),
    ("world_progresses", {"n": 4}), ("manifests_readable_again", {}), ("world_progresses", {"n": 6}),
    ("world_goes_quiet", {})]
FOUND["the same after a re-created job: the rollback point chosen then was older than the unreadable newest"] = [
    ("savepoint_nonce", {}), ("world_progresses", {"n": 4}), ("delete_job", {}), ("world_goes_quiet", {}),
    ("node_lost", {"i": 0}), ("api_server_refuses_pod_creates", {"refuse": True}), ("edit_job_args", {"n": 1}),
    ("newest_manifest_unreadable", {}), ("world_progresses", {"n": 4}), ("manifests_readable_again", {}),
    ("world_progresses", {"n": 6}), ("world_goes_quiet", {})]
FOUND["a failed restoreFrom named again after another point was applied: skipped for the newest checkpoint"] = [
    ("world_progresses", {"n": 8}), ("edit_restore_from", {"i": 0, "kind": "missing"}), ("pod_deleted_externally", {"i": 0}),
    ("world_progresses", {"n": 7}), ("edit_restore_from", {"i": 8, "kind": "checkpoint"}), ("world_goes_quiet", {}),
    ("edit_restore_from", {"i": 4, "kind": "missing"}), ("pod_deleted_externally", {"i": 0}), ("world_goes_quiet", {})]
FOUND["a rollback onto a restoreFrom named during the trial, removed before the attempt: the drain's savepoint lost"] = [
    ("edit_storage_url", {"i": 1}), ("world_goes_quiet", {}), ("api_server_refuses_pod_creates", {"refuse": True}),
    ("edit_storage_url", {"i": 0}), ("world_progresses", {"n": 8}), ("operator_rounds", {"n": 3}),
    ("edit_restore_from", {"i": 1, "kind": "fresh"}), ("time_passes", {"seconds": 60.0}), ("operator_round", {}),
    ("api_server_refuses_pod_creates", {"refuse": False}), ("edit_restore_from", {"i": 4, "kind": "savepoint"}),
    ("world_progresses", {"n": 4})]
FOUND["the same when the rollback's attempt is refused: its create consumed the stable spec's point"] = [
    ("edit_storage_url", {"i": 1}), ("world_goes_quiet", {}), ("api_server_refuses_pod_creates", {"refuse": True}),
    ("edit_storage_url", {"i": 0}), ("world_progresses", {"n": 8}), ("edit_restore_from", {"i": 1, "kind": "fresh"}),
    ("time_passes", {"seconds": 60.0}), ("world_progresses", {"n": 3}), ("operator_round", {}),
    ("api_server_refuses_pod_creates", {"refuse": False}), ("edit_restore_from", {"i": 4, "kind": "savepoint"}),
    ("world_progresses", {"n": 4})]
FOUND["an attempt's pod deleted before it was seen, restoreFrom named meanwhile: created again from the old point"] = [
    ("world_progresses", {"n": 4}), ("node_lost", {"i": 3}), ("edit_restore_from", {"i": 6, "kind": "missing"}),
    ("world_goes_quiet", {}), ("world_progresses", {"n": 3}), ("edit_restore_from", {"i": 1, "kind": "savepoint"}),
    ("operator_round", {}), ("pod_deleted_externally", {"i": 3}), ("edit_restore_from", {"i": 3, "kind": "fresh"}),
    ("world_goes_quiet", {})]
FOUND["the user's restoreFrom applied, then removed: an older lineage point of the operator's came back"] = [
    ("world_progresses", {"n": 7}), ("edit_restore_from", {"i": 0, "kind": "missing"}), ("node_lost", {"i": 0}),
    ("world_goes_quiet", {}), ("edit_restore_from", {"i": 3, "kind": "none"}), ("suspend_or_resume", {"state": "suspended"}),
    ("world_goes_quiet", {}), ("edit_restore_from", {"i": 0, "kind": "savepoint"}),
    ("suspend_or_resume", {"state": "running"}), ("world_goes_quiet", {}), ("node_lost", {"i": 0}),
    ("edit_restore_from", {"i": 2, "kind": "none"}), ("world_progresses", {"n": 6})]
# A modelling error: crashes in place the operator sees only after a long absence are counted when seen.
FOUND["four crashes in place seen at once 20 minutes later: over the budget, as the operator counts them"] = [
    ("world_goes_quiet", {}), ("runtime_crashes", {"code": 1, "i": 0}), ("runtime_crashes", {"code": 137, "i": 1}),
    ("runtime_crashes", {"code": 137, "i": 2}), ("runtime_crashes", {"code": 137, "i": 3}),
    ("time_passes", {"seconds": 600.0}), ("time_passes", {"seconds": 30.0}), ("time_passes", {"seconds": 600.0}),
    ("world_goes_quiet", {})]
FOUND["a crash seen 20 minutes late, then three more: four failures in the window as the operator counts them"] = [
    ("world_goes_quiet", {}), ("runtime_crashes", {"code": 137, "i": 2}), ("time_passes", {"seconds": 600.0}),
    ("time_passes", {"seconds": 600.0}), ("world_goes_quiet", {}), ("runtime_crashes", {"code": 137, "i": 1}),
    ("runtime_crashes", {"code": 137, "i": 0}), ("runtime_crashes", {"code": 1, "i": 3}), ("world_goes_quiet", {})]

# A modelling error: the kubelet reports only a container's newest termination, so an OOM kill followed
# by another crash before any round looks is invisible to the operator (and to any client).
FOUND["an OOM kill overwritten by a crash in place before a round saw it: not held against the operator"] = [
    ("edit_image", {"image": IMAGES[2]}), ("status_writes_fail", {"n": 3}), ("world_progresses", {"n": 6}),
    ("runtime_oom_killed", {"i": 2}), ("world_goes_quiet", {})]
FOUND["the runtime OOM-killed while draining for an upgrade: reported as nothing, the drain waited its grace"] = [
    ("edit_image", {"image": IMAGES[2]}), ("world_progresses", {"n": 4}), ("edit_image", {"image": IMAGES[0]}),
    ("operator_rounds", {"n": 2}), ("world_progresses", {"n": 1}), ("world_progresses", {"n": 1}),
    ("edit_job_args", {"n": 1}), ("operator_rounds", {"n": 2}), ("runtime_oom_killed", {"i": 0}), ("operator_round", {})]
FOUND["an OOM kill in place no round saw, then a suspend: the drain began and the kill was never reported"] = [
    ("world_goes_quiet", {}), ("runtime_crashes", {"i": 0, "code": 1}), ("world_goes_quiet", {}),
    ("suspend_or_resume", {"state": "suspended"}), ("runtime_oom_killed", {"i": 1}), ("world_goes_quiet", {})]

# The finalizer's hot-volume cleanup (model_hot_volume.py), found by the short run once it was modelled:
FOUND["deleted again while the earlier job's cleanup pod of the name is Terminating: its success taken for this job's"] = [
    ("delete_job", {}), ("operator_round", {}), ("cleanup_pod_sticks_in_terminating", {"stuck": True}),
    ("time_passes", {"seconds": 600.0}), ("cleanup_pod_runs", {}), ("operator_rounds", {"n": 6}), ("delete_job", {}),
    ("world_goes_quiet", {})]

# Rows someone thought of, replayed beside the found ones: a decision the model must keep exercising.
# The hot volume's cleanup: executors outlive their driver pod for a garbage collector's pass, a cleanup
# pod fails or never starts (given up on after CLEANUP_FOR: the finalizer always goes).
RUNNING_DELETED = [("world_goes_quiet", {}), ("delete_job", {}), ("world_progresses", {"n": 3})]  # driver pod gone
FOUND["executors outlive their driver pod: the cleanup pod waits for them"] = [*RUNNING_DELETED, ("world_goes_quiet", {})]
FOUND["the cleanup pod fails: the directory stays with a Warning, the finalizer goes"] = [
    *RUNNING_DELETED, ("world_progresses", {"n": 2}), ("cleanup_pod_fails", {}), ("operator_round", {}),
    ("world_goes_quiet", {})]
FOUND["the cleanup pod never starts: given up on after CLEANUP_FOR"] = [
    *RUNNING_DELETED, ("world_progresses", {"n": 2}), ("cleanup_pod_hangs", {}), ("world_goes_quiet", {})]
FOUND["an executor stuck in Terminating: given up on after CLEANUP_FOR, the next job of the name removes it"] = [
    *RUNNING_DELETED, ("executor_sticks_in_terminating", {}), ("world_goes_quiet", {}), ("executors_let_go", {}),
    ("world_goes_quiet", {})]
FOUND["restoreFrom named while a pod runs: its checkpoint is pinned in the GC at once"] = [
    ("world_goes_quiet", {}), ("world_progresses", {"n": 6}), ("edit_restore_from", {"kind": "checkpoint", "i": 1}),
    ("operator_round", {})]


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
