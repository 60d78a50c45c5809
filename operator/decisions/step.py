"""One decision in progress (Step): the observation, the next status, the actions so far, and
the small helpers every row of the machine shares. Pure."""

from __future__ import annotations

from typing import Any

from sparkpoint.runtime.spec import JobSpec, RestoreFrom, parse_duration, state_change_refusal

from . import checkpoints as cp
from .model import CreateAttempt, Decision, DeletePod, Observed, PodObs
from .spec_key import NOT_UPGRADE_FIELDS, NOT_UPGRADES, is_spec, spec_key  # noqa: F401  (is_spec, spec_key: re-exported)
from .status_model import Failure, JobStatus, Lineage, Phase, Point, Tracking, UpgradeInFlight, same_point

DRAIN_GRACE = 90.0  # how long a requested drain (POST /stop) may take before the pod is deleted
SAVEPOINTS_SHOWN = 20
POLL = 2.0  # requeue while waiting for a pod to come or go
SAVEPOINT_LISTING_WAIT = 30.0  # beyond DRAIN_GRACE: how long a drain's savepoint may take to be listed
# Why a pod was lost without the job failing: these restart at once and spend no restart budget
# (a node drain during a cluster upgrade must not fail a healthy job, nor wait out a crash backoff).
DISRUPTIONS = frozenset({"PodDeleted", "NodeLost", "Evicted", "Preempting", "Preempted", "NodeShutdown",
                         "Terminated", "DeletionByTaintManager", "AttemptLost",
                         "PromotionFailed"})  # (a standby refused its promotion: decisions/standby.py)


def backoff_seconds(spec: JobSpec, failures_in_a_row: int) -> float:
    """restart.backoff, doubled per failure in a row, capped at restart.maxBackoff."""
    return spec.restart.backoff_seconds(max(1, failures_in_a_row))


def restarts_in_window(tracking: Tracking, now: float, window: float) -> int:
    """Restarts within the last `window` seconds (spec.restart.window): what maxRestarts limits."""
    return sum(1 for t in tracking.restart_times or [] if now - t <= window)


def effective_spec(spec: JobSpec, tracking: Tracking) -> JobSpec:
    """The CR's spec, or after a rolled-back upgrade (while the CR still holds the rejected spec)
    the last stable one; the sections that need no new pod always follow the CR."""
    stable = tracking.stable_spec_doc
    if not stable or not is_spec(tracking.rejected_spec, spec):
        return spec
    return with_stable_pod(spec, stable)


def state_change_refused(spec: JobSpec, tracking: Tracking) -> str | None:
    """Why the CR's spec changes what Spark cannot apply to the state of the last stable spec
    (runtime/spec/changes.py), else None: rescale.refuse_state_change keeps the stable spec running."""
    stable = tracking.stable_spec_doc
    if not stable or is_spec(tracking.stable_spec, spec):
        return None  # (the usual round: the CR's spec is the one running; no model to parse)
    return state_change_refusal(JobSpec.model_validate(stable), spec)


def running_spec(spec: JobSpec, tracking: Tracking) -> JobSpec:
    """The spec the job runs, whose store reconcile lists: effective_spec, or the stable spec's
    sections that need a new pod while a state change is refused (else a drain's savepoint in the
    stable spec's store is never listed, nor its checkpoints, after a storage URL edit with it)."""
    effective = effective_spec(spec, tracking)
    if effective is spec and tracking.stable_spec_doc and state_change_refused(spec, tracking):
        return with_stable_pod(spec, tracking.stable_spec_doc)
    return effective


def with_stable_pod(spec: JobSpec, stable: dict[str, Any]) -> JobSpec:
    """The stable spec's sections that need a new pod, the CR's others (NOT_UPGRADES)."""
    current = spec.model_dump(by_alias=True, mode="json")
    doc = dict(stable, **{name: current[name] for name in NOT_UPGRADES if name in current})
    for section, name in NOT_UPGRADE_FIELDS:  # (checkpoint.triggerNonce: answered on the stable spec too)
        if isinstance(doc.get(section), dict) and name in (current.get(section) or {}):
            doc[section] = dict(doc[section], **{name: current[section][name]})
    return JobSpec.model_validate(doc)


def stable_doc(spec: JobSpec) -> dict[str, Any]:
    return spec.model_dump(by_alias=True, mode="json", exclude_none=True)


def json_copy(value: Any) -> Any:
    """A deep copy of JSON data (dicts, lists, scalars): what copy.deepcopy gives, about 4 times
    faster (no memo); a status is copied every round of every job."""
    if isinstance(value, dict):
        return {k: json_copy(v) for k, v in value.items()}
    if isinstance(value, list):
        return [json_copy(v) for v in value]
    return value


class Step:
    """One decision in progress: the observation, the new status and the actions so far."""

    def __init__(self, obs: Observed):
        self.obs, self.now = obs, obs.now
        self.st: JobStatus = obs.status.model_copy(deep=True)
        self.st.tracking = self.st.tracking  # (assigned: written even while empty, as always)
        self.tr: Tracking = self.st.tracking
        self.spec = effective_spec(obs.spec, self.tr)
        self.rolled_back = self.spec is not obs.spec
        self.change_refused = False  # rescale.refuse_state_change: the CR's spec is not run this round
        self.d = Decision()  # its status: the decided self.st as written, when decide() is done
        self.attempt: int = self.st.attempt
        self.current: PodObs | None = next((p for p in obs.pods if p.attempt == self.attempt and self.attempt), None)

    # --- helpers ----------------------------------------------------------------------------------
    def set_phase(self, phase: Phase, reason: str, message: str, warning: bool = False) -> None:
        old = self.st.phase
        self.st.phase = phase
        if old != phase:
            self.d.emit("Warning" if warning else "Normal", reason, f"{old or 'New'} -> {phase}: {message}")

    def requeue(self, seconds: float) -> None:
        self.d.requeue_after = max(0.5, min(self.d.requeue_after, seconds))

    def remove_pods(self) -> bool:
        """Delete every pod of the job; True once none is left (deleted ones still count)."""
        for pod in self.obs.pods:
            if not pod.deleting:
                self.d.actions.append(DeletePod(pod.name, force=pod.node_lost or pod.phase == "Unknown"))
            elif pod.node_lost or stuck_terminating(pod, self.now):
                self.d.actions.append(DeletePod(pod.name, force=True))
        if self.obs.pods:
            self.requeue(POLL)
        return not self.pods_left()

    def pods_left(self) -> list[PodObs]:
        """The pods that hold up the next attempt: all but the deleted pods of attempts given up as
        lost (lost_attempt.py), which the store's fence keeps from committing."""
        lost = set(self.tr.lost_pods or [])
        return [p for p in self.obs.pods if not (p.deleting and p.name in lost)]

    def start_attempt(self, restore_from: RestoreFrom | None) -> None:
        """Attempt N+1, only once no pod of the job is left (never two attempts at once). The
        point-choosing bookkeeping (freshStart, restoreTarget) is consumed only here, when the
        attempt is really created: a round that still waits for pods must not lose it."""
        if not self.remove_pods():
            return
        upgrade = self.tr.upgrade
        if upgrade is None and self.tr.upgrade_deadline is None and self.tr.stable_spec_doc \
                and self.tr.stable_spec is not None and not is_spec(self.tr.stable_spec, self.spec):
            # The spec changed while a rollback drained (no upgrade began for it): on trial all the same,
            # rolling back to the point the stable spec was to restore.
            drained = Point(savepoint=self.tr.restore_target) if self.tr.restore_target else None
            upgrade = UpgradeInFlight(rollback_point=self.tr.next_point or drained)
        rollback = (upgrade.rollback_point or self.stable_newest_point()) if upgrade is not None else None
        # The operator's chosen point (fresh_start, restore_target, next_point) stays until the new
        # attempt's pod is seen (consumed_points): an attempt whose create is refused never used it.
        self.tr.clear("upgrade", "create_failed")
        self.st.clear("next_attempt_at")
        self.attempt += 1
        self.st.attempt, self.st.pod = self.attempt, f"{self.obs_name()}-{self.attempt}"
        self.st.clear("restore")  # the runtime of the new attempt reports its own
        self.tr.clear("running_since", "pending_trigger", "last_trigger_at", "drain", "pod_seen", "pod_ready",
                      "container_restarts", "next_attempt_at", "fallback_reported")
        self.tr.restore_from = Point.of(restore_from)
        passed = restore_from or self.lineage_point()
        if passed:  # the runtime's history now descends from it: later attempts name it too (also
            # the user's restoreFrom: once removed, an older lineage point must not come back)
            self.tr.lineage = Lineage(point=Point.of(passed), over=self._spec_point(), storage=self.storage_url())
        self.tr.attempt_spec = spec_key(self.spec)
        self.tr.restart_nonce = self.spec.restart_nonce
        self.tr.attempt_storage = self.storage_url()
        self.set_phase("Pending", "AttemptCreated", f"attempt {self.attempt}"
                       + (f" restoring from {self.tr.restore_from.document()}" if self.tr.restore_from else ""))
        if upgrade is not None:
            self.tr.upgrade_deadline, self.tr.trial_since = self.now + self.upgrade_timeout(), self.now
            # What a rollback goes back to: the stable spec's own newest point (its drain's savepoint,
            # else its newest checkpoint in its own storage), never the new spec's state.
            self.tr.rollback_point = rollback
        self.tr.attempt_point = Point.of(passed)
        self.d.actions.append(self.create_action(passed))  # (or a standby's promotion: standby.promote_instead)
        self.requeue(POLL)

    def recreate_point(self) -> RestoreFrom | None:
        """The point of an attempt whose pod was never seen, created again: as given, unless the user
        named another restoreFrom since (then theirs, recorded as this attempt's)."""
        chosen, users, lineage = self.tr.restore_from, self.spec.restore_from, self.tr.lineage
        if chosen is None:
            return self.lineage_point()
        if users is None or lineage is None or same_point(lineage.over, self._spec_point()):
            return chosen.restore_from()
        self.tr.restore_from = self.tr.attempt_point = Point.of(users)
        self.tr.lineage = Lineage(point=Point.of(users), over=self._spec_point(), storage=self.storage_url())
        return users

    def consumed_points(self) -> None:
        """The attempt's pod exists: the point the operator chose for it is used (lineage carries it on)."""
        self.tr.clear("fresh_start", "restore_target", "next_point", "chosen_over")

    def _spec_point(self) -> Point | None:
        return Point.of(self.spec.restore_from)

    def lineage_point(self) -> RestoreFrom | None:
        """The restoreFrom an attempt without a new restore point passes to the runtime: the last one
        the operator chose (a savepoint, a fresh start, a fallback checkpoint), so the runtime keeps to
        the history that started there; the spec's restoreFrom once the user has changed it since."""
        lineage, url = self.tr.lineage, self.storage_url()
        if lineage and lineage.point and same_point(lineage.over, self._spec_point()) \
                and (lineage.storage or url) == url:  # (another store's history)
            return lineage.point.restore_from()
        return self.spec.restore_from

    def restart_window(self) -> float:
        return parse_duration(self.spec.restart.window)

    def upgrade_timeout(self) -> float:
        """spec.upgradeTimeout, else the operator's --upgrade-timeout."""
        own = self.obs.spec.upgrade_timeout  # the CR's: it also bounds a rolled-back spec's attempt
        return parse_duration(own) if own else self.obs.upgrade_timeout

    def create_action(self, restore_from: RestoreFrom | None) -> CreateAttempt:
        return CreateAttempt(self.attempt, restore_from, self.spec if self.rolled_back else None)

    def obs_name(self) -> str:
        return self.obs.name

    def fail(self, reason: str, message: str, budget: bool = True) -> None:
        """The attempt is lost. A disruption (DISRUPTIONS) restarts at once and spends no budget; a
        failure of the job itself counts toward maxRestarts (unless `budget` is False: an exit 0
        under restart.policy Always) and waits the backoff of its failure streak, which an attempt
        that ran restart.stableAfter resets. Failed once over budget."""
        self.st.last_failure = Failure(reason=reason, message=message, at=cp.iso(self.now))
        if self.ran_stably():
            self.tr.failure_streak = 0
        if reason in DISRUPTIONS:
            self.st.restarts += 1
            wait = 0.0
        else:
            if budget:
                self.count_restart(1)
            else:
                self.st.restarts += 1
                self.tr.failure_streak += 1
            if self.st.phase == "Failed":
                return
            wait = backoff_seconds(self.spec, self.tr.failure_streak)  # (a streak of 0 backs off as 1)
        self.tr.next_attempt_at = self.now + wait
        if wait > 0:
            self.st.next_attempt_at = cp.iso(self.now + wait)
        self.set_phase("Recovering", reason, f"{message}; next attempt in {wait:g}s", warning=True)
        self.remove_pods()

    def ran_stably(self) -> bool:
        """The current attempt has been Running for restart.stableAfter."""
        since = self.tr.running_since
        return since is not None and self.now - since >= parse_duration(self.spec.restart.stable_after)

    def count_restart(self, n: int) -> None:
        """n failures of the job itself: restarts, the crash streak and the maxRestarts window."""
        self.st.restarts += n
        self.tr.failure_streak += n
        times = [*(self.tr.restart_times or []), *[self.now] * n]
        del times[: max(0, len(times) - (self.spec.restart.max_restarts + 2))]  # bounded
        self.tr.restart_times = times
        over = restarts_in_window(self.tr, self.now, self.restart_window()) > self.spec.restart.max_restarts
        if over and self.upgrade_unproven():
            # A new spec that crash-loops before it was ever Ready rolls back to the last stable one
            # (upgrade.roll_back_if_late, its deadline now) instead of failing the job; those
            # restarts are the rejected spec's, so they leave the job's restart budget.
            since = (self.tr.upgrade_deadline or self.now) - self.upgrade_timeout()  # (set: upgrade_unproven)
            self.tr.upgrade_deadline = self.now
            self.tr.upgrade_crash_loop = len([t for t in times if t >= since])
            self.tr.restart_times = [t for t in times if t < since]
            return
        if over or self.spec.restart.policy == "Never":
            why = (f"{self.spec.restart.max_restarts} restarts within {self.spec.restart.window} exceeded" if over
                   else "restart.policy is Never")
            last = self.st.last_failure or Failure()
            self.fail_for_good(last.reason or "RestartLimit", f"{last.message or ''} ({why})".strip(),
                               "RestartLimitExceeded", why)

    def fail_for_good(self, reason: str, message: str, event_reason: str, event_message: str) -> None:
        """Failed until the spec is edited (failedGeneration): lastFailure says why; pods go."""
        self.st.last_failure = Failure(reason=reason, message=message, at=cp.iso(self.now))
        self.tr.failed_generation = self.obs.generation
        self.set_phase("Failed", event_reason, event_message, warning=True)
        self.remove_pods()

    def upgrade_unproven(self) -> bool:
        """An upgraded attempt that has not been Ready yet, with a stable spec to roll back to."""
        return self.tr.upgrade_deadline is not None and bool(self.tr.stable_spec_doc)

    def awaiting_savepoint(self) -> bool:
        """A drain's savepoint is not listed yet: the store listing may lag the runtime's exit, so
        wait a little for it rather than start from the latest checkpoint."""
        target, saved = self.tr.restore_target, self.obs.store_savepoints
        if not target or saved is None or target in {s["name"] for s in saved}:
            return False
        if (self.tr.attempt_storage or self.storage_url()) != self.storage_url():
            return False  # drained into the old storage URL: the new one's listing will never show it
        drain_at = self.tr.drain.at if self.tr.drain else 0
        return self.now - drain_at < DRAIN_GRACE + SAVEPOINT_LISTING_WAIT

    def restore_point(self) -> RestoreFrom | None:
        """Where the next attempt starts (pure; start_attempt consumes the bookkeeping): a rollback's
        point, empty after a stateless upgrade, a drain's savepoint, else past a restore that failed,
        the newest checkpoint not known to be bad, else None (lineage_point)."""
        chosen_over = self.tr.chosen_over
        if chosen_over is not None and self.spec.restore_from is not None \
                and not same_point(chosen_over, self._spec_point() or Point()):
            return None  # the user named a restore point since the operator chose one: theirs (lineage_point)
        # (a restoreFrom removed since names nothing: the operator's point stands)
        rollback = self.tr.next_point
        if rollback:
            return rollback.restore_from()
        fresh = self.tr.fresh_start
        if fresh:  # upgradeMode stateless
            return RestoreFrom(fresh=fresh)
        target = self.tr.restore_target
        saved = self.obs.store_savepoints
        bad = self.bad_points()
        if target and f"savepoint:{target}" not in bad and (saved is None or target in [s["name"] for s in saved]):
            return RestoreFrom(savepoint=target)
        lineage = self.lineage_point()
        users = lineage is not None and same_point(Point.of(lineage), self._spec_point())
        # A point the user names (again) is tried, and fails naming it: never skipped for another.
        if bad and not users and (lineage is None or point_tag(lineage) in bad):
            for fact in reversed(self.known_checkpoints()):
                if f"checkpoint:{fact.id}" not in bad:
                    return RestoreFrom(checkpoint=fact.id)
        return None

    def bad_points(self) -> set[str]:
        """Points a restore failed from (tags; an older operator recorded bare checkpoint ids)."""
        return {b if ":" in b else f"checkpoint:{b}" for b in self.tr.bad_restore_points or []}

    def known_checkpoints(self) -> list[cp.CheckpointFact]:
        """The store's listing, plus checkpoints status knows to be newer (the runtime reported them
        before the listing caught up: a drain's final checkpoint), oldest first."""
        listed = list(self.obs.store_checkpoints or [])
        newest = cp.number(listed[-1].id) if listed else -1
        newer = [cp.CheckpointFact.from_record(r) for r in self.st.checkpoints or [] if cp.number(r.id) > newest]
        return listed + sorted(newer, key=lambda f: cp.number(f.id))

    def newest_checkpoint_point(self) -> Point | None:
        known = self.known_checkpoints()
        return Point(checkpoint=known[-1].id) if known else None

    def stable_newest_point(self) -> Point | None:
        """The newest checkpoint of the attempt being upgraded. After a storage URL change, status
        knows only the new store, and the old one's newest may be the drain's final checkpoint the
        operator never saw: {"newestIn": url} lets that store's runtime pick its newest itself."""
        old = self.tr.attempt_storage or self.storage_url()
        if old == self.storage_url():
            return self.newest_checkpoint_point()
        return Point(newest_in=old)

    def choose_point(self, field: str, value: Any) -> None:
        """The operator picks the next attempt's point (tracking's restore_target, fresh_start or
        next_point: a drain's savepoint, a fresh start, a rollback or replacement point); a
        restoreFrom the user names after this wins over it. Chosen over no restoreFrom is an empty
        point, not None: a null would be no key once written, and no choice at all."""
        setattr(self.tr, field, value)
        self.tr.chosen_over = self._spec_point() or Point()

    def storage_url(self) -> str | None:
        storage = self.spec.checkpoint.storage
        return storage.url if storage else None


STUCK_TERMINATING = 120.0  # beyond the pod's 60 s grace: its kubelet will not finish it (force-delete)


def stuck_terminating(pod: PodObs, now: float) -> bool:
    return pod.deleting_since is not None and now - pod.deleting_since > STUCK_TERMINATING


def point_tag(point: RestoreFrom | Point | dict[str, Any] | None) -> str | None:
    """`checkpoint:<id>` / `savepoint:<name>` / `fresh:<name>`: how blame and the runtime name a point."""
    if point is None:
        return None
    if isinstance(point, Point):
        return point.tag()
    doc = point if isinstance(point, dict) else point.model_dump(exclude_none=True)
    for kind in ("checkpoint", "savepoint", "fresh"):
        if doc.get(kind):
            return f"{kind}:{doc[kind]}"
    return None


def drain_then_remove(run: Step) -> None:
    """A drain ends with the runtime exiting 0; a pod that is not draining (or takes too long) is deleted."""
    drain = run.tr.drain
    for pod in run.obs.pods:
        # The runtime container exited (the GC sidecar keeps the pod Running): the drain is over.
        draining = drain and pod is run.current and pod.phase in ("Running", "Pending") and \
            pod.exit_code is None and run.now - drain.at < DRAIN_GRACE
        if not draining and not pod.deleting:
            run.d.actions.append(DeletePod(pod.name, force=pod.node_lost))
        elif pod.deleting and (pod.node_lost or stuck_terminating(pod, run.now)):
            run.d.actions.append(DeletePod(pod.name, force=True))
    if run.obs.pods:
        run.requeue(POLL)


