"""The shared hot volume of the machine model's job (model_world.py) and the finalizer's cleanup of it
(operator/kube/hot_cleanup.py, deletion.JobDeletion.clean_hot_volume; docs/design.md §9, "Deleted jobs").

The volume holds one directory per StreamingJob uid. A driver pod's runtime makes its own on start
and removes the other uids' (job_dirs.remove_other_incarnations); its executors write into it. They
belong to the driver pod by owner reference: once the driver pod is gone the garbage collector
deletes them, a round later (not at once), and one may stick in Terminating. The cleanup pod is
built by build_cleanup_pod and removes the uid its command names. Its invariants raise
ModelViolation where they happen: it never starts while a driver or executor pod of the job exists;
it removes only the directory of the StreamingJob that created it, never a live job's; a finalizer
that ends leaves the directory only with a HotVolumeNotCleaned Warning naming it.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from sparkpoint.operator.decisions import model as m
from sparkpoint.operator.kube.builders import JobRef
from sparkpoint.operator.kube.hot_cleanup import (
    build_cleanup_pod,
    cleanup_pod_name,
    cleanup_step,
    created_for,
    needs_cleanup,
)
from sparkpoint.runtime.spec import JobSpec

NAMESPACE = "team"
HOT_VOLUME = {"hostPath": {"path": "/var/lib/sparkpoint-hot", "type": "DirectoryOrCreate"}}


class ModelViolation(AssertionError):
    """An invariant of the machine model broke (model_world.py raises it too)."""


def uid_of(incarnation: int) -> str:
    return f"00000000-0000-4000-8000-{incarnation:012d}"


@dataclass
class Executor:
    name: str
    driver: str  # the owner pod
    uid: str  # the directory it writes into (its job's)
    deleting: bool = False
    stuck: bool = False


@dataclass
class CleanupPod:
    doc: dict[str, Any]  # as build_cleanup_pod made it
    owner: JobRef  # the StreamingJob whose finalizer created it
    phase: str = "Pending"
    deleting: bool = False
    stuck: bool = False  # stays Terminating when deleted
    hangs: bool = False  # never starts (an image that cannot be pulled)

    def arg(self, flag: str) -> str:
        command = self.doc["spec"]["containers"][0]["command"]
        return command[command.index(flag) + 1]


@dataclass
class HotVolume:
    dirs: set[str] = field(default_factory=set)  # uid directories on the volume
    executors: dict[str, Executor] = field(default_factory=dict)
    cleanup: CleanupPod | None = None  # the pod named <job>-hot-cleanup (one name for every uid)
    removed: list[tuple[str, str]] = field(default_factory=list)  # (uid, by whom)

    # --- the job's pods ------------------------------------------------------------------------------------
    def runtime_starts(self, pod: Any, uid: str, live_uid: str | None) -> None:
        """A driver's runtime claimed its attempt: its directory, the others' removed, its executors."""
        for other in sorted(self.dirs - {uid}):
            self.remove(other, "the runtime of a later job (remove_other_incarnations)", live_uid)
        self.dirs.add(uid)
        executors = pod.spec.spark.executors
        for k in range(1, (executors.instances or 1) + 1 if executors else 0):
            name = f"{pod.name}-exec-{k}"
            self.executors.setdefault(name, Executor(name, pod.name, uid))

    def collect(self, drivers: set[str]) -> None:
        """One pass of the garbage collector: executors whose driver pod is gone are deleted, and
        those deleted before go (unless stuck)."""
        for name, ex in list(self.executors.items()):
            if ex.deleting and not ex.stuck:
                del self.executors[name]
            elif ex.driver not in drivers:
                ex.deleting = True

    # --- the cleanup pod's life ------------------------------------------------------------------------------
    def run_cleanup(self, drivers: list[Any], live_uid: str | None) -> None:
        """The kubelet's part: a Pending cleanup pod starts, a Running one finishes (removes its uid),
        a deleted one goes unless stuck. A deleted pod never starts; one Running when deleted may
        still finish."""
        pod = self.cleanup
        if pod is None:
            return
        if pod.phase == "Running":
            pod.phase = "Succeeded"
            self.remove(pod.arg("--uid"), "the cleanup pod", live_uid, pod)
        elif pod.phase == "Pending" and not pod.deleting and not pod.hangs:
            writers = [p.name for p in drivers] + sorted(self.executors)
            if writers:
                raise ModelViolation(f"the cleanup pod of {pod.owner.uid} starts while pods of the job exist: "
                                     f"{writers}")
            pod.phase = "Running"
        if pod.deleting and not pod.stuck and pod.phase != "Running":
            self.cleanup = None

    def fail_cleanup(self) -> None:
        if self.cleanup is not None and self.cleanup.phase in ("Pending", "Running"):
            self.cleanup.phase = "Failed"

    def remove(self, uid: str, by: str, live_uid: str | None, pod: CleanupPod | None = None) -> None:
        if pod is not None and (pod.arg("--namespace"), pod.arg("--job"), uid) != (pod.owner.namespace, pod.owner.name, pod.owner.uid):
            raise ModelViolation(f"the cleanup pod of {pod.owner.uid} removes {pod.arg('--namespace')}/"
                                 f"{pod.arg('--job')}/{uid}")
        if uid == live_uid:
            raise ModelViolation(f"{by} removes the directory {uid} of the job that exists under the name")
        if uid in self.dirs:
            self.dirs.discard(uid)
            self.removed.append((uid, by))

    # --- the finalizer's step (deletion.JobDeletion.clean_hot_volume) ---------------------------------------
    def finalizer_round(self, name: str, uid: str, spec: JobSpec | None, deleting_since: float, now: float,
                        emit: Any) -> bool:
        """True when the finalizer may go (the cleanup is done or given up on), else it waits."""
        if not needs_cleanup(spec):
            return True
        assert spec is not None
        job = JobRef(NAMESPACE, name, uid)
        pod = self.cleanup  # get_pod by name: whichever job of the name created it
        phase = pod.phase if pod is not None else None
        earlier = pod is not None and not created_for(pod.doc, uid)
        executors = len(self.executors) if pod is None else 0  # listed by the job's label: every uid's
        step = cleanup_step(executors, phase, deleting_since, now, earlier)
        if step.next == "create":
            assert cleanup_pod_name(job) == f"{name}-hot-cleanup"
            self.cleanup = CleanupPod(build_cleanup_pod(job, spec), owner=job)
        if step.next == "wait-earlier":
            pod.deleting = True  # type: ignore[union-attr]
        if step.next in ("create", "wait", "wait-executors", "wait-earlier"):
            return False
        if step.next == "give-up":
            emit(m.Emit("Warning", "HotVolumeNotCleaned",
                        f"{step.why}: the job's work directory {NAMESPACE}/{name}/{uid} on "
                        f"{spec.checkpoint.hot_volume.describe() if spec.checkpoint.hot_volume else '?'} was left"))
        if pod is not None:
            pod.deleting = True
        return True

    def check_finalized(self, uid: str, events: list[m.Emit]) -> None:
        """The finalizer went: the directory is gone, or a Warning named it."""
        if uid in self.dirs and not any(e.reason == "HotVolumeNotCleaned" and uid in e.message for e in events):
            raise ModelViolation(f"the finalizer of {uid} went, its directory stays, and no Warning says so")
