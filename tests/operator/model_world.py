"""A simulated world for machine.decide (test_machine_model.py): one StreamingJob, its pods, two
checkpoint stores, the runtime of its pods, a clock. Plain Python, no I/O.

It reacts as reconcile.py does: pods come from kopf's index unless pod_view says to read the API;
the status is written first and the round's actions are taken only if that write succeeded
(m.TriggerCheckpoint, m.CheckpointResult, m.Emit need none); a refused pod create is recorded as
tracking.createFailed; creating an existing pod is a no-op; deletion is finalize.drain_pods. The
runtime restores on start as runtime/service/recovery.py plans it (restoreFrom applied until a
checkpoint descends from it, then the newest readable checkpoint of its lineage, fallbacks, exit 3
naming the points in its termination message). check_create / check_decision are the test's hooks.
The job's shared hot volume, its executor pods and the finalizer's cleanup of it: model_hot_volume.py.
"""

from __future__ import annotations

import copy
from dataclasses import dataclass, field
from typing import Any

from model_hot_volume import HOT_VOLUME, HotVolume, ModelViolation, uid_of
from model_standby import Standby, create_standby, promote, standby_answers

from sparkpoint.operator.decisions import model as m
from sparkpoint.operator.decisions.checkpoints import iso
from sparkpoint.operator.decisions.finalize import drain_pods
from sparkpoint.operator.decisions.liveness import (
    Liveness,
    answered,
    of_pod,
    poll_in,
    poll_period,
    round_asks,
    unanswered,
)
from sparkpoint.operator.decisions.machine import decide, spec_key
from sparkpoint.operator.decisions.pod_view import confirm_before_create, needs_direct_read, split_standbys
from sparkpoint.operator.decisions.status_model import parse_status
from sparkpoint.operator.decisions.step import point_tag as tag_of
from sparkpoint.operator.decisions.step import running_spec
from sparkpoint.runtime.spec import JobSpec, RestoreFrom, parse_duration, parse_spec

T0 = 1_800_000_000.0
NAME = "job"
STORES = ("s3://bucket-a/jobs", "s3://bucket-b/jobs")
IMAGES = ("sparkpoint:v1", "sparkpoint:v2", "sparkpoint:broken")  # broken: the runtime crashes at start
GRACE = 60.0  # the job pod's terminationGracePeriodSeconds: then the kubelet kills (frozen processes too)
NO_WAIT = (m.TriggerCheckpoint, m.CheckpointResult, m.Emit)


__all__ = ["ModelViolation"]  # (defined with the hot volume's invariants, raised by both)


def base_spec_doc() -> dict[str, Any]:
    return {"image": IMAGES[0], "job": {"entrypoint": "m:f", "args": {"n": 0}},
            "spark": {"master": "k8s", "executors": {"instances": 2}},
            "checkpoint": {"interval": "10s", "storage": {"url": STORES[0]}, "hotVolume": HOT_VOLUME},
            "restart": {"maxRestarts": 3, "backoff": "10s", "maxBackoff": "40s", "window": "10m"},
            "upgradeTimeout": "60s"}


@dataclass
class Chk:
    num: int
    at: float
    lineage: str | None  # the restoredFrom tag its manifest carries
    attempt: int = 0  # the attempt that wrote it
    readable: bool = True

    id = property(lambda self: f"chk-{self.num:06d}")

    def fact(self) -> m.CheckpointFact:
        return m.CheckpointFact(self.id, self.num, iso(self.at))


@dataclass
class Store:
    checkpoints: list[Chk] = field(default_factory=list)
    savepoints: list[dict[str, Any]] = field(default_factory=list)  # oldest first; "lineage" is ours
    next_num: int = 1
    records: list[tuple[int, str, int]] = field(default_factory=list)  # lineage/: (fence, point, incarnation)

    def readable(self) -> list[Chk]:
        return [c for c in self.checkpoints if c.readable]

    def find(self, tag: str) -> Any:
        kind, name = tag.split(":", 1)
        if kind == "checkpoint":
            return next((c for c in self.checkpoints if c.id == name and c.readable), None)
        return next((s for s in self.savepoints if s["name"] == name), None)


@dataclass
class Pod:
    name: str
    attempt: int
    spec: JobSpec
    restore_from: RestoreFrom | None
    url: str
    phase: str = "Pending"
    ready = deleting = node_lost = False
    stuck = False  # stays Terminating when deleted (a dead kubelet): only a forced delete removes it
    in_index = True  # False: kopf's index lost it (the API server still has it)
    up = False  # the runtime process answers
    exit_code: int | None = None
    last_exit_code: int | None = None
    termination_reason: str | None = None  # of the newest termination (OOMKilled: the memory limit)
    restart_count = 0
    lineage: str | None = None  # the restoredFrom tag its checkpoints carry
    fence: int = 0  # the runtime's attempt number (the store's fence: it grows across incarnations)
    incarnation: int = 0  # which StreamingJob of the name created it
    latest: Chk | None = None
    draining: dict[str, Any] | None = None
    deleting_since: float | None = None
    failed_points: tuple[str, ...] | None = None  # exit 3: the termination message's points
    requests: list[dict[str, Any]] = field(default_factory=list)  # GET /status recentCheckpoints
    frozen = False  # its processes stopped by the cgroup freezer: no answer, no progress, no exit
    slow = 0  # the next this many requests to its runtime time out although it runs (an overloaded node)
    unanswered_since: float | None = None  # the truth: the first of the timeouts in a row up to now
    open_requests: list[str] = field(default_factory=list)  # triggered, not completed
    standby: Standby | None = None  # started as a standby (model_standby.py)

    @property
    def following(self) -> bool:
        """A standby not promoted (yet): it claims no fence, commits nothing, is never Ready."""
        return self.standby is not None and not self.standby.promoted

    def obs(self) -> m.PodObs:
        sb = self.standby
        return m.PodObs(name=self.name, attempt=self.attempt, phase=self.phase, ready=self.ready and not self.deleting,
                      deleting=self.deleting, ip=None if self.phase == "Pending" else f"10.0.{int(bool(sb))}.{self.attempt}",
                      standby_spec=sb.spec_key if sb else None, standby_point=sb.point if sb else None,
                      restart_count=self.restart_count, last_exit_code=self.last_exit_code,
                      exit_code=self.exit_code, reason="NodeLost" if self.node_lost else None,
                      node_lost=self.node_lost, deleting_since=self.deleting_since,
                      failed_points=self.failed_points, termination_reason=self.termination_reason)

    @property
    def alive(self) -> bool:
        return not self.deleting and self.phase in ("Pending", "Running", "Unknown") and self.exit_code is None


class World:
    def __init__(self) -> None:
        self.stores = {url: Store() for url in STORES}
        self.now, self.step = T0, 0  # step: counts operator rounds and spec edits (orders them)
        self.check_create: Any = None  # (world, CreateAttempt, spec) -> None; raises ModelViolation
        self.check_decision: Any = None  # (world, Observed, Decision) -> None
        self.hot = HotVolume()  # outlives every StreamingJob of the name
        self.new_cr(base_spec_doc())

    # --- the CR --------------------------------------------------------------------------------------
    def new_cr(self, doc: dict[str, Any]) -> None:
        self.incarnation = getattr(self, "incarnation", -1) + 1
        self.fence = getattr(self, "fence", 0)
        self.doc, self.generation, self.status, self.deleting = doc, 1, {}, False
        self.uid, self.deleting_since = uid_of(self.incarnation), 0.0
        self.pods: dict[str, Pod] = {}
        self.refuse_creates, self.refused, self.refuse_since, self.fail_writes = False, 0, 0.0, 0
        self.events: list[tuple[int, m.Emit]] = []  # (step, event) of rounds whose actions were taken
        self.failures: list[float] = []  # times of the job's own failures (crash, exit 3, restart)
        self.last_round_at = 0.0  # failures since the last round are seen now: the operator cannot date them
        self.oom_kills: set[int] = set()  # attempts whose runtime was OOM-killed (not yet reported)
        self.failed_points: set[str] = set()  # restore tags the runtime could not restore (exit 3)
        self.user_point: tuple[str | None, int] | None = None  # (tag, step set) until applied
        # restoreFrom as the last operator round saw it, and user_point then: edits between two rounds
        # that end on the value the operator saw are invisible to it (it sees one CR, not a history)
        self.round_point: tuple[str | None, tuple[str | None, int] | None] = (None, None)
        self.operator_point_step = -1  # last drain / upgrade / rollback the operator began
        self.drain_savepoint: tuple[str, str] | None = None  # (name, url) taken by a drain, not yet used
        self.upgrade_edit_step, self.rollback_step = 0, -1  # last edit needing a new pod; rollback reported
        self.terminal_gen: tuple[str, int] | None = None  # (Failed|Finished, generation it was entered at)
        self.lost: dict[int, str] = {}  # attempt -> how its pod was lost (not by the job's fault)
        self.failed_attempts: set[int] = set()  # attempts that ended by the job's own fault
        self.last_tag: str | None = None  # restore tag of the newest attempt created
        self.answered, self.doubt = False, None  # reconcile's _answers entry and pod_view doubt
        self.seen: list[Pod] = []  # the pods the last round observed
        self.liveness: Liveness | None = None
        self.fenced_commits = 0  # commits the fence refused (zombies)
        self.spec_of_fence: dict[int, str] = getattr(self, "spec_of_fence", {})  # (outlives the CR, as the fence)  # reconcile's memory of the runtime's answers (liveness.py)
        self.gc_pins: set[str] = set()  # what the GC sidecar of the pods reads (the ConfigMap's gc-pins.json)
        self.config_point: RestoreFrom | None = None  # the job file's restoreFrom (written with each new attempt)
        self.promotions = 0  # standbys promoted (model_standby.py)

    @property
    def spec(self) -> JobSpec:
        return parse_spec(self.doc)

    def edit(self, mutate: Any) -> None:
        doc, before = copy.deepcopy(self.doc), self.spec
        mutate(doc)
        if doc == self.doc:
            return
        self.doc, self.generation, self.step = doc, self.generation + 1, self.step + 1
        if spec_key(self.spec) != spec_key(before):
            self.upgrade_edit_step = self.step
        if (tag := tag_of(self.spec.restore_from)) != tag_of(before.restore_from):
            seen, then = self.round_point
            self.user_point = then if tag == seen else (tag, self.step) if tag else None

    # --- what the operator observes -------------------------------------------------------------------
    def current(self, seen: list[Pod] | None = None) -> Pod | None:
        """The status's attempt's pod, among `seen` (the round's pods) or all of them."""
        pods = self.pods.values() if seen is None else seen
        attempt, name = self.status.get("attempt"), self.status.get("pod")
        mine = [p for p in pods if p.attempt == attempt and (not p.following or p.name == name)]
        return next((p for p in mine if p.name == name), mine[0] if mine else None)

    def fetch_runtime(self) -> dict[str, Any] | None:
        pod = self.current(self.seen)
        if pod is None or pod.deleting or pod.phase != "Running":
            return None  # not asked: reconcile keeps its last answer
        if not round_asks(self.liveness, pod.name, self.poll_period(), self.now):
            return None  # timing out: the liveness poll asks (reconcile._runtime_status)
        doc = self.runtime_doc(pod)
        self.answered = doc is not None
        self.note_request(pod, doc is not None)
        return doc

    def note_request(self, pod: Pod, answer: bool) -> None:
        """A request to the runtime (GET /status, a trigger): answered, timed out (frozen, slow) or refused."""
        timed_out = pod.frozen or pod.slow > 0
        pod.slow = max(0, pod.slow - 1)
        if answer:
            self.liveness, pod.unanswered_since = answered(pod.name, self.now), None
            return
        self.liveness = unanswered(self.liveness, pod.name, self.now, unreachable=timed_out)
        if not timed_out:
            pod.unanswered_since = None  # refused: the pod's network answered
        elif pod.unanswered_since is None:
            pod.unanswered_since = self.now

    def poll_period(self) -> float:
        return poll_period(parse_duration(self.spec.restart.lost_after))

    def poll_liveness(self) -> None:
        """reconcile's liveness poll between rounds (operator/liveness_poll.py): GET /healthz of the
        current runtime when no request reached it for a period; answered while its process runs."""
        pod = self.current(self.seen)
        if pod is None or pod.deleting or pod.phase != "Running" \
                or poll_in(self.liveness, pod.name, self.poll_period(), self.now) > 0:
            return
        self.note_request(pod, pod.up and not pod.frozen and not pod.slow)

    def wait(self, seconds: float) -> None:
        """Time passes until the next round, with the liveness poll in it (reconcile.run's wait)."""
        end = self.now + seconds
        while self.now < end:
            pod = self.current(self.seen)
            due = poll_in(self.liveness, pod.name, self.poll_period(), self.now) if pod else self.poll_period()
            self.now = min(end, self.now + max(due, 0.5))
            self.poll_liveness()

    def runtime_doc(self, pod: Pod | None) -> dict[str, Any] | None:
        if pod is None or pod.deleting or pod.phase != "Running" or not pod.up or pod.frozen or pod.slow:
            return None
        if pod.following:
            return pod.standby.document()
        latest = pod.latest and {"id": pod.latest.id, "batchId": pod.latest.num, "completed": iso(pod.latest.at)}
        return {"phase": "running", "latestCheckpoint": latest, "recentCheckpoints": pod.requests[-10:]}

    def seen_pods(self) -> list[Pod]:
        """kopf's index, or all pods when reconcile reads them from the API (pod_view)."""
        index = [p for p in self.pods.values() if p.in_index]
        status = parse_status(self.status)
        read, self.doubt = needs_direct_read(status, split_standbys([p.obs() for p in index], status)[0], self.answered,
                                             self.doubt, self.now)
        return list(self.pods.values()) if read else index

    def observe(self) -> m.Observed:
        spec = self.spec  # reconcile lists the store of the spec the job runs (after a rollback, the stable one's)
        store = self.stores[running_spec(spec, parse_status(self.status).tracking).checkpoint.storage.url]
        listed = [c.fact() for c in store.checkpoints[-10:] if c.readable]
        runtime = self.fetch_runtime()
        alive = of_pod(self.liveness, (self.current(self.seen) or Pod("", 0, spec, None, "")).name)
        saved = [{k: v for k, v in s.items() if k not in ("lineage", "attempt")} for s in store.savepoints][-20:]
        pods, standbys = split_standbys([p.obs() for p in self.seen], parse_status(self.status))
        return m.Observed(spec=spec, generation=self.generation, status=copy.deepcopy(self.status),
                        pods=pods, now=self.now, name=NAME, standbys=standbys,
                        standby_runtime=standby_answers(self, standbys) if spec.standby else {},
                        runtime=runtime, store_checkpoints=listed, store_savepoints=saved,
                        runtime_silent_since=alive.silent_since if alive else None,
                        runtime_unreachable_since=alive.unreachable_since if alive else None)

    # --- world events ---------------------------------------------------------------------------------
    def start(self, pod: Pod) -> None:
        """Pending -> Running: the runtime restores (or crashes: a broken image, exit 1)."""
        if pod.phase != "Pending" or pod.deleting:
            return
        pod.phase = "Running"
        if pod.spec.image == IMAGES[2]:
            self.crash(pod, 1)
            return
        if pod.following:
            pod.up = True  # it follows the store until promoted (model_standby.promote restores then)
            return
        self.restored(pod)

    def restored(self, pod: Pod) -> None:
        """The runtime's restore on start (a new pod's, or a promoted standby's)."""
        outcome = self.restore(pod)
        if outcome is None:
            self.failed_points.update(pod.failed_points or ())
            self.crash(pod, 3)
            return
        pod.lineage, point = outcome
        pod.latest, pod.up = point if isinstance(point, Chk) else None, True
        self.hot.runtime_starts(pod, uid_of(pod.incarnation), self.live_uid)

    def restore(self, pod: Pod, record: bool = True) -> tuple[str | None, Any] | None:
        """recovery.plan_restore for a new pod (no hot dir): (its lineage tag, the point restored:
        a Chk, a savepoint's dict or None for none), None: exit 3 (pod.failed_points says why).
        "Applied already" is the newest lineage record's word (recovery.applied); applying a point
        records it first. `record=False`: a probe that changes nothing."""
        store, tag = self.stores[pod.url], tag_of(pod.restore_from)
        newest = store.records[-1] if store.records else None
        mine = newest is not None and newest[1] == tag and newest[2] == pod.incarnation
        if tag and not mine:
            point = None if tag.startswith("fresh:") else store.find(tag)
            if point is None and not tag.startswith("fresh:"):
                pod.failed_points = (tag,)
                return None
            if record:
                store.records.append((pod.fence, tag, pod.incarnation))
            return tag, point
        if not store.checkpoints:
            return tag, None
        failed: list[str] = []
        candidates = [(f"checkpoint:{c.id}", c) for c in reversed(store.checkpoints)]
        candidates += [(f"savepoint:{s['name']}", s) for s in reversed(store.savepoints)]
        for ptag, point in candidates:
            if isinstance(point, Chk) and not point.readable:
                failed.append(ptag)
                continue
            lineage = point.lineage if isinstance(point, Chk) else point["lineage"]
            written = point.attempt if isinstance(point, Chk) else point["attempt"]
            since = newest[0] if mine and newest else 0
            if tag and ptag != tag and (lineage != tag or written < since):
                continue  # predates the applied restoreFrom (or its newest application)
            return (tag if ptag == tag else lineage), point
        pod.failed_points = tuple(failed)
        return None

    def crash(self, pod: Pod, code: int, reason: str = "Error") -> None:
        """The runtime exits `code`: restarted in place (pod restartPolicy OnFailure) unless Never."""
        if not (pod.phase == "Running" and pod.exit_code is None and not pod.deleting) or pod.frozen:
            return
        pod.up = pod.ready = False
        pod.draining = None  # the runtime restarted in place knows nothing of a stop request
        if pod.following:  # the kubelet restarts it in place; the job lost nothing
            pod.restart_count, pod.last_exit_code = pod.restart_count + 1, code
            return
        pod.termination_reason = reason
        if reason == "OOMKilled":
            self.oom_kills.add(pod.attempt)
        else:  # the kubelet reports only the newest termination: an OOM kill no round saw is gone with it
            self.oom_kills.discard(pod.attempt)
        self.failed_attempts.add(pod.attempt)
        self.failures.append(self.now)
        if pod.spec.restart.policy == "Never":
            pod.phase, pod.exit_code, pod.last_exit_code = "Failed", code, code
        else:
            pod.restart_count, pod.last_exit_code = pod.restart_count + 1, code

    def become_ready(self, pod: Pod) -> None:
        """A restarted container resumes from the pod's hot dir (local recovery); then Ready."""
        if pod.phase == "Running" and pod.exit_code is None and not pod.deleting and pod.last_exit_code != 3 \
                and pod.spec.image != IMAGES[2] and not pod.node_lost and not pod.frozen:
            pod.up, pod.ready = True, not pod.following

    def exit_zero(self, pod: Pod) -> None:
        """The runtime stops (the GC sidecar keeps the pod Running)."""
        if pod.up and not pod.deleting and not pod.frozen:
            pod.up = pod.ready = False
            pod.exit_code = pod.last_exit_code = 0

    def checkpoint(self, pod: Pod, request: str | None = None, savepoint: str | None = None) -> Chk | None:
        if not pod.up or pod.frozen or pod.following:  # (a standby writes nothing to the store)
            return None
        if pod.fence < self.fence:  # check_fence before the manifest's put: a newer attempt claimed
            self.fenced_commits += 1
            return None
        store = self.stores[pod.url]
        chk = Chk(store.next_num, self.now, pod.lineage, pod.fence)
        store.next_num += 1
        store.checkpoints.append(chk)
        pod.latest = chk
        if request:
            pod.requests.append({"id": chk.id, "requestId": request, "status": "completed"})
        if savepoint and savepoint not in {s["name"] for s in store.savepoints}:
            store.savepoints.append({"name": savepoint, "checkpoint": chk.id, "batch": chk.num, "bytes": 1,
                                     "completedAt": iso(self.now), "lineage": pod.lineage, "attempt": pod.fence})
            pod.requests.append({"savepoint": savepoint, "kind": "savepoint", "status": "completed"})
        return chk

    def complete_requests(self) -> None:
        for pod in self.pods.values():
            while pod.open_requests and pod.up and not pod.frozen:
                self.checkpoint(pod, request=pod.open_requests.pop(0))

    def finish_drain(self, pod: Pod) -> None:
        if pod.frozen:
            return
        if pod.draining and pod.up:
            name = pod.draining.get("savepoint")
            self.checkpoint(pod, savepoint=name)
            if name:
                self.drain_savepoint = (name, pod.url)
            self.exit_zero(pod)
        pod.draining = None

    def lose(self, pod: Pod, how: str) -> None:
        if how == "node_lost":
            pod.node_lost, pod.phase, pod.ready, pod.up = True, "Unknown", False, False
        else:
            pod.deleting, pod.ready, pod.up, pod.deleting_since = True, False, False, self.now
        if pod.attempt not in self.failed_attempts:
            self.lost.setdefault(pod.attempt, how)

    def freeze(self, pod: Pod) -> None:
        if pod.phase == "Running" and not pod.node_lost:
            pod.frozen = True

    def thaw(self, pod: Pod) -> None:
        """The zombie runs on where it stopped: it tries to commit what it had (refused if fenced), and a
        deleted one then takes its SIGTERM."""
        if not pod.frozen:
            return
        pod.frozen = False
        if pod.up:
            self.checkpoint(pod)
        if pod.deleting:
            pod.up = False

    def finish_terminations(self) -> None:
        for name in [n for n, p in self.pods.items() if p.deleting and not p.stuck and not (
                p.frozen and self.now - (p.deleting_since or 0) < GRACE)]:  # SIGTERM waits for the thaw
            del self.pods[name]

    @property
    def live_uid(self) -> str | None:
        """The uid of the StreamingJob that exists and is not being deleted (none while deleting)."""
        return None if self.deleting else self.uid

    def delete_cr(self) -> None:
        if not self.deleting:
            self.deleting, self.deleting_since = True, self.now

    def hot_volume_progresses(self) -> None:
        """The garbage collector and the kubelet on the hot volume's pods (model_hot_volume.py)."""
        self.hot.run_cleanup(list(self.pods.values()), self.live_uid)
        self.hot.collect(set(self.pods))

    # --- one operator round (reconcile.reconcile) ------------------------------------------------------
    def operator_round(self) -> Any:
        try:
            return self._operator_round()
        finally:
            self.round_point = (tag_of(self.spec.restore_from), self.user_point)
            # The operator counts a failure when a round sees it (it cannot date a restart in place).
            self.failures = [max(t, self.now) if t >= self.last_round_at else t for t in self.failures]
            self.last_round_at = self.now

    def _operator_round(self) -> Any:
        self.step += 1
        if self.deleting:
            self.finalize()
            return None
        self.seen = self.seen_pods()
        d = decide(obs := self.observe())
        creates = bool(d.of(m.CreateAttempt) or d.of(m.PromoteStandby))  # (a promotion starts an attempt too)
        if confirm_before_create(parse_status(self.status), creates, self.seen == list(self.pods.values())):
            self.seen = list(self.pods.values())  # reconcile reads the API before creating on the index's word
            d = decide(obs := self.observe())
        current = self.current(self.seen)
        for _ in d.of(m.TriggerCheckpoint):
            self.trigger(current, d.status)
        if self.check_decision:
            self.check_decision(self, obs, d)
        if self.fail_writes:  # the round's PATCH fails: only actions that need no stored status go on
            self.fail_writes -= 1
            if any(not isinstance(a, NO_WAIT) for a in d.actions):
                return d
        else:
            self.write(d.status)
        for action in d.actions:
            self.act(action, current)
        return d

    def finalize(self) -> None:
        """reconcile.finalize (decide is not called): drain, delete pods (the API's list), then gone."""
        tracking = self.status.setdefault("tracking", {})
        step = drain_pods([p.obs() for p in self.pods.values()], tracking.get("deleteDrainAt"), self.now)
        for action in step.actions:
            pod = self.pods.get(getattr(action, "pod", None) or action.name)
            if isinstance(action, m.DeletePod):
                self.delete_pod(action.name, action.force)
            elif pod is not None and pod.obs().can_drain and pod.up:
                pod.draining = {"savepoint": None, "at": self.now}
        if step.drain_started:
            tracking["deleteDrainAt"] = self.now
        if self.pods:
            return
        spec = self.spec  # (deletion.py: the CR's spec; invalid: no cleanup)
        if not self.hot.finalizer_round(NAME, self.uid, spec, self.deleting_since, self.now,
                                        lambda e: self.events.append((self.step, e))):
            return
        self.hot.check_finalized(self.uid, [e for _, e in self.events])
        self.new_cr(copy.deepcopy(self.doc))  # gone; the same name is created again

    def trigger(self, pod: Pod | None, status: dict[str, Any]) -> None:
        tracking = status.setdefault("tracking", {})
        if pod is None or self.runtime_doc(pod) is None:
            if pod is not None and pod.phase == "Running":
                self.note_request(pod, False)
            tracking.pop("pendingTrigger", None)
            return
        self.note_request(pod, True)
        rid = f"req-{self.step:06d}"
        pod.open_requests.append(rid)
        tracking["pendingTrigger"] = dict(tracking.get("pendingTrigger") or {}, id=rid)

    def write(self, status: dict[str, Any]) -> None:
        if (status.get("lastFailure") or {}).get("reason") in ("UpgradeTimeout", "UpgradeFailed", "UpgradeRejected",
                                                              "SpecChangeRefused"):
            self.rollback_step = self.step  # a rollback reported
        phase = status.get("phase")
        terminal = phase in ("Failed", "Finished")
        if not terminal or not self.terminal_gen or self.terminal_gen[0] != phase:
            self.terminal_gen = (phase, self.generation) if terminal else None
        self.status = copy.deepcopy(status)

    def act(self, action: Any, current: Pod | None) -> None:
        match action:
            case m.CreateAttempt():
                self.create(action)
            case m.CreateStandby():
                create_standby(self, action)
            case m.PromoteStandby():
                promote(self, action)
            case m.DeletePod(name=name, force=force):
                self.delete_pod(name, force)
            case m.StopRuntime(savepoint=sp):
                if current is not None and current.obs().can_drain and current.up:
                    current.draining = {"savepoint": sp, "at": self.now}
            case m.TriggerSavepoint(name=sp):
                if current is not None and current.up and current.phase == "Running" and not current.deleting:
                    self.checkpoint(current, savepoint=sp)
            case m.DeleteSavepoint(name=sp):
                store = self.stores[self.spec.checkpoint.storage.url]
                store.savepoints = [s for s in store.savepoints if s["name"] != sp]
            case m.PinCheckpoints(ids=ids):
                self.gc_pins = set(ids)
            case m.Emit():
                self.events.append((self.step, action))
                if action.reason in ("UpgradeRolledBack", "UpgradeRejected", "SpecChangeRefused"):
                    self.rollback_step = self.step  # reported by Event (lastFailure may be a later failure's)

    def delete_pod(self, name: str, force: bool) -> None:
        if (pod := self.pods.get(name)) is None:
            return
        if force:
            del self.pods[name]
        elif not pod.deleting:
            # (a frozen runtime gets its SIGTERM when thawed: until then it is up, and may try to commit)
            pod.deleting, pod.ready, pod.up, pod.deleting_since = True, False, pod.up and pod.frozen, self.now

    def create(self, action: m.CreateAttempt) -> None:
        name = f"{NAME}-{action.attempt}"
        if name in self.pods:
            return  # 409 AlreadyExists: the pod of this attempt is there
        if self.refuse_creates:  # 403 (quota): reconcile records it for the machine (createFailed)
            self.refused += 1
            self.failures.append(self.now)  # a failed start of the job's own (operator/decisions/machine.py)
            refused = copy.deepcopy(self.status)
            refused.setdefault("tracking", {})["createFailed"] = {
                "attempt": action.attempt, "reason": "Forbidden", "message": "exceeded quota"}
            if self.fail_writes:
                self.fail_writes -= 1
            else:
                self.write(refused)
            self.events.append((self.step, m.Emit("Warning", "PodCreateFailed", "exceeded quota")))
            return
        spec = action.spec or self.spec
        if self.check_create:
            self.check_create(self, action, spec)
        self.fence += 1
        self.spec_of_fence[self.fence] = spec_key(spec)  # which spec wrote the checkpoints of this fence
        self.pods[name] = Pod(name, action.attempt, spec, action.restore_from, spec.checkpoint.storage.url,
                              fence=self.fence, incarnation=self.incarnation)
        self.gc_pins = set((self.status.get("tracking") or {}).get("gcPins", []))  # the attempt's ConfigMap
        self.config_point = action.restore_from  # ...and its job file's restoreFrom (what a standby reads)
        if self.user_point and tag_of(action.restore_from) == self.user_point[0]:
            self.user_point = None
        self.drain_savepoint = None
        self.last_tag = tag_of(action.restore_from)

