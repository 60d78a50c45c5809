"""Pure pod-status logic: container records in, the Pod `status` the kubelet would report out;
plus the restart decision and backoff. No I/O, no clock reads (times are passed in)."""

from __future__ import annotations

from dataclasses import dataclass, field


@dataclass
class Terminated:
    exit_code: int
    reason: str
    started_at: str
    finished_at: str
    message: str = ""

    def to_api(self) -> dict:
        state = {"exitCode": self.exit_code, "reason": self.reason,
                 "startedAt": self.started_at, "finishedAt": self.finished_at}
        if self.message:
            state["message"] = self.message
        return {"terminated": state}


@dataclass
class ContainerRecord:
    """What the agent knows about one container of a pod."""

    name: str
    image: str
    restart_count: int = 0
    running_since: str | None = None  # set while the process runs
    ready: bool = False
    waiting_reason: str = "ContainerCreating"
    waiting_message: str = ""
    terminated: Terminated | None = None  # the current state when not running/waiting
    last_terminated: Terminated | None = None
    container_id: str = ""
    ever_started: bool = False
    restart_pending: bool = False  # exited, waiting out its back-off before the next run
    extra: dict = field(default_factory=dict)

    def state(self) -> dict:
        if self.running_since is not None:
            return {"running": {"startedAt": self.running_since}}
        if self.terminated is not None:
            return self.terminated.to_api()
        waiting = {"reason": self.waiting_reason}
        if self.waiting_message:
            waiting["message"] = self.waiting_message
        return {"waiting": waiting}

    def to_api(self) -> dict:
        status = {
            "name": self.name, "image": self.image, "imageID": "", "ready": self.ready,
            "restartCount": self.restart_count, "started": self.running_since is not None,
            "state": self.state(), "lastState": self.last_terminated.to_api() if self.last_terminated else {},
        }
        if self.container_id:
            status["containerID"] = self.container_id
        return status


def exit_reason(exit_code: int) -> str:
    return "Completed" if exit_code == 0 else "Error"


def should_restart(restart_policy: str, exit_code: int) -> bool:
    return restart_policy == "Always" or (restart_policy == "OnFailure" and exit_code != 0)


def backoff_seconds(restart_count: int, base: float, cap: float) -> float:
    """Delay before the next restart: base, 2*base, 4*base, ... capped (kubelet: 10 s .. 300 s)."""
    return min(cap, base * (2 ** max(0, restart_count)))


def pod_phase(init: list[ContainerRecord], main: list[ContainerRecord], restart_policy: str,
              init_done: bool) -> str:
    if not init_done:
        failed = any(r.terminated and r.terminated.exit_code != 0 for r in init)
        return "Failed" if failed and restart_policy == "Never" else "Pending"
    if any(r.running_since is not None for r in main):
        return "Running"
    if not any(r.ever_started for r in main):
        return "Pending"
    finished = [r.terminated for r in main]
    if all(t is not None for t in finished) and not any(
            should_restart(restart_policy, t.exit_code) for t in finished):
        return "Succeeded" if all(t.exit_code == 0 for t in finished) else "Failed"
    return "Running"  # some container runs, or is between a stop and its restart


def _condition(kind: str, ok: bool, now: str, reason: str = "") -> dict:
    condition = {"type": kind, "status": "True" if ok else "False", "lastProbeTime": None,
                 "lastTransitionTime": now}
    if reason and not ok:
        condition["reason"] = reason
    return condition


def pod_status(init: list[ContainerRecord], main: list[ContainerRecord], restart_policy: str,
               init_done: bool, pod_ip: str, host_ip: str, start_time: str, now: str,
               previous_conditions: list[dict] | None = None) -> dict:
    """The full Pod status. Condition transition times are kept while a status is unchanged."""
    phase = pod_phase(init, main, restart_policy, init_done)
    containers_ready = init_done and all(r.ready for r in main)
    terminal = phase in ("Succeeded", "Failed")
    conditions = [
        _condition("PodReadyToStartContainers", True, now),
        _condition("Initialized", init_done, now, "ContainersNotInitialized"),
        _condition("Ready", containers_ready and not terminal, now,
                   "PodCompleted" if terminal else "ContainersNotReady"),
        _condition("ContainersReady", containers_ready and not terminal, now,
                   "PodCompleted" if terminal else "ContainersNotReady"),
        _condition("PodScheduled", True, now),
    ]
    previous = {c["type"]: c for c in previous_conditions or []}
    for condition in conditions:
        before = previous.get(condition["type"])
        if before and before.get("status") == condition["status"] and before.get("lastTransitionTime"):
            condition["lastTransitionTime"] = before["lastTransitionTime"]
    status = {
        "phase": phase, "conditions": conditions, "hostIP": host_ip, "hostIPs": [{"ip": host_ip}],
        "podIP": pod_ip, "podIPs": [{"ip": pod_ip}], "startTime": start_time,
        "containerStatuses": [r.to_api() for r in main],
    }
    if init:
        status["initContainerStatuses"] = [r.to_api() for r in init]
    return status
