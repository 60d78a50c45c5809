"""One thread per pod bound to the node: sets up its volumes, runs init then main containers,
applies restartPolicy with backoff, runs probes, reports status, and honours deletion
(SIGTERM, then SIGKILL after the grace period, then the final delete)."""

from __future__ import annotations

import json
import logging
import shutil
import signal
import threading
import time
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path

import image_mode
import podspec
import status as st
from kube import ApiError, KubeClient
from probes import ProbeTracker, run_probe
from process import ContainerProcess, in_container_view
from volumes import VolumeBuilder

log = logging.getLogger("node-agent.pod")
TICK = 0.2
VOLUME_REFRESH_SECONDS = 60


def now_iso() -> str:
    return datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


@dataclass
class AgentContext:
    """What every pod worker shares with the agent."""

    client: KubeClient
    node_name: str
    host_ip: str
    pods_dir: Path
    logs_dir: Path
    venv_bin: Path
    apiserver_port: int
    ca_bundle: bytes
    backoff_base: float
    backoff_cap: float
    base_env: dict[str, str]
    images: image_mode.LocalImages | None = None  # None: every container runs from the virtualenv


class PodWorker(threading.Thread):
    def __init__(self, ctx: AgentContext, pod: dict, pod_ip: str):
        meta = pod["metadata"]
        super().__init__(name=f"pod-{meta['namespace']}/{meta['name']}", daemon=True)
        self.ctx, self.pod, self.pod_ip = ctx, pod, pod_ip
        self.uid, self.ns, self.pod_name = meta["uid"], meta["namespace"], meta["name"]
        self.lock = threading.Lock()
        self.removed = threading.Event()  # the pod is gone from the API (force-deleted)
        self.shutdown = threading.Event()  # the agent stops: kill processes, keep the pod
        self.dir = ctx.pods_dir / self.uid
        self.log_root = ctx.logs_dir / f"{self.ns}_{self.pod_name}_{self.uid}"
        spec = pod["spec"]
        self.restart_policy = spec.get("restartPolicy", "Always")
        previous = {s["name"]: s for s in (pod.get("status") or {}).get("containerStatuses") or []}
        self.init = [st.ContainerRecord(c["name"], c.get("image", "")) for c in spec.get("initContainers") or []]
        self.main = [st.ContainerRecord(c["name"], c.get("image", ""),
                                        restart_count=previous.get(c["name"], {}).get("restartCount", 0))
                     for c in spec["containers"]]
        self.specs = {c["name"]: c for c in [*(spec.get("initContainers") or []), *spec["containers"]]}
        self.processes: dict[str, ContainerProcess] = {}
        self.not_before: dict[str, float] = {}
        self.readiness: dict[str, ProbeTracker] = {}
        self.liveness: dict[str, ProbeTracker] = {}
        self.exec_views: dict[str, tuple[list[str], dict[str, str]]] = {}  # exec probes run in these
        self.volume_dirs: dict[str, Path] | None = None
        self.volumes_refreshed = 0.0
        self.init_done = not self.init
        self.start_time = (pod.get("status") or {}).get("startTime") or now_iso()
        self.last_status = ""
        self.terminal_at_start = (pod.get("status") or {}).get("phase") in ("Succeeded", "Failed")

    def update(self, pod: dict) -> None:
        with self.lock:
            self.pod = pod

    def snapshot(self) -> dict:
        with self.lock:
            return self.pod

    def ctx_log(self, msg: str, **fields) -> None:
        log.info(msg, extra={"pod": f"{self.ns}/{self.pod_name}", **fields})

    # --- API helpers ----------------------------------------------------------------------------
    def lookup(self, kind: str, name: str) -> dict | None:
        plural = {"ConfigMap": "configmaps", "Secret": "secrets"}[kind]
        try:
            return self.ctx.client.get(f"/api/v1/namespaces/{self.ns}/{plural}/{name}")
        except ApiError as error:
            if error.status == 404:
                return None
            raise

    def token(self, service_account: str, seconds: int, audience: str | None) -> str:
        spec = {"expirationSeconds": seconds, "boundObjectRef": {
            "apiVersion": "v1", "kind": "Pod", "name": self.pod_name, "uid": self.uid}}
        if audience:
            spec["audiences"] = [audience]
        body = {"apiVersion": "authentication.k8s.io/v1", "kind": "TokenRequest", "spec": spec}
        result = self.ctx.client.request(
            "POST", f"/api/v1/namespaces/{self.ns}/serviceaccounts/{service_account}/token", body)
        return result["status"]["token"]

    def push_status(self, force_phase: str | None = None) -> None:
        pod = self.snapshot()
        status = st.pod_status(self.init, self.main, self.restart_policy, self.init_done, self.pod_ip,
                               self.ctx.host_ip, self.start_time, now_iso(),
                               (pod.get("status") or {}).get("conditions"))
        if force_phase:
            status["phase"] = force_phase
        encoded = json.dumps(status, sort_keys=True)
        if encoded == self.last_status:
            return
        try:
            updated = self.ctx.client.merge_patch(f"/api/v1/namespaces/{self.ns}/pods/{self.pod_name}/status",
                                                  {"status": status})
            self.update(updated)
            self.last_status = encoded
        except ApiError as error:
            if error.status == 404:
                self.removed.set()
            else:
                log.warning("status update failed", extra={"pod": self.pod_name, "error": str(error)})

    # --- containers -----------------------------------------------------------------------------
    def start_container(self, record: st.ContainerRecord) -> None:
        spec, pod = self.specs[record.name], self.snapshot()
        base = dict(self.ctx.base_env, HOSTNAME=self.pod_name, POD_IP=self.pod_ip)
        log_file = self.log_root / record.name / f"{record.restart_count}.log"
        pid_file = self.dir / "containers" / f"{record.name}.pid"
        message_file = self.termination_file(record.name)
        message_file.parent.mkdir(parents=True, exist_ok=True)
        message_file.write_bytes(b"")  # each run starts with an empty message, as with the kubelet
        message_file.chmod(0o666)  # an image's own user writes it
        try:
            if self.ctx.images is not None and image_mode.is_local_image(spec.get("image", "")):
                argv, env, view, probe_view = self.image_container(record, spec, pod, base)
            else:
                env = podspec.build_env(pod, spec, self.lookup, base, self.pod_ip, self.ctx.host_ip)
                argv = podspec.resolve_argv(spec, env, self.ctx.venv_bin,
                                            lambda p: shutil.which(p, path=env.get("PATH")))
                mounts, hidden = podspec.split_shadowing(podspec.mounts_for(spec, self.volume_dirs or {}),
                                                         [Path(self.ctx.venv_bin).resolve(), self.dir.resolve()])
                mounts.append(podspec.termination_mount(spec, message_file))
                if any(m.target.rstrip("/") == "/tmp" for m in hidden):
                    env["TMPDIR"] = str(next(m.source for m in hidden if m.target.rstrip("/") == "/tmp"))
                working_dir = spec.get("workingDir") or str(self.dir)
                view = probe_view = in_container_view(mounts, working_dir)
        except podspec.ConfigError as error:
            record.waiting_reason, record.waiting_message = error.reason, str(error)
            self.not_before[record.name] = time.monotonic() + 2
            return
        process = ContainerProcess(argv, env, view, log_file, pid_file)
        self.exec_views[record.name] = (probe_view(process.pid) if callable(probe_view) else probe_view, env)
        self.processes[record.name] = process
        record.running_since, record.terminated, record.ever_started = now_iso(), None, True
        record.waiting_reason, record.waiting_message = "", ""
        record.container_id = f"sparkpoint://{self.uid}/{record.name}/{process.pid}"
        record.ready = "readinessProbe" not in spec and "startupProbe" not in spec
        started = time.monotonic()
        # Without a readiness probe, a startup probe gates readiness until it first passes.
        readiness = spec.get("readinessProbe") or spec.get("startupProbe")
        for probe, trackers in ((readiness, self.readiness), (spec.get("livenessProbe"), self.liveness)):
            trackers.pop(record.name, None)
            if probe:
                trackers[record.name] = ProbeTracker(probe, started)
        self.ctx_log("container started", container=record.name, pid=process.pid, argv=argv[:3])

    def termination_file(self, container: str) -> Path:
        return self.dir / "termination" / container

    def image_container(self, record: st.ContainerRecord, spec: dict, pod: dict, base: dict[str, str]):
        """argv, env and views of a container that runs in its locally built image (image_mode)."""
        images = self.ctx.images
        assert images is not None
        config = images.config(spec["image"])
        lower = images.rootfs(spec["image"], config)
        passwd_file = lower / "etc" / "passwd"
        passwd = passwd_file.read_text() if passwd_file.exists() else ""
        uid, gid = image_mode.run_as(pod["spec"], spec, config, passwd)
        # The image's environment, not the agent's: only the in-cluster API settings carry over.
        kube_env = {k: v for k, v in base.items() if k.startswith("KUBERNETES_") or k in ("HOSTNAME", "POD_IP")}
        env = podspec.build_env(pod, spec, self.lookup, {**config.env, **kube_env}, self.pod_ip, self.ctx.host_ip)
        argv = [podspec.expand(part, env) for part in image_mode.container_argv(spec, config)]
        if not argv:
            raise podspec.ConfigError("CreateContainerConfigError", "no command specified")
        message = podspec.termination_mount(spec, self.termination_file(record.name))
        if message.target.startswith("/dev/"):  # /dev is the host's (rbind): the mount point must exist there
            Path(message.target).touch(exist_ok=True)
        mounts = [*podspec.mounts_for(spec, self.volume_dirs or {}), message]
        working_dir = spec.get("workingDir") or config.working_dir
        layer = self.dir / "layers" / record.name
        shutil.rmtree(layer, ignore_errors=True)  # each start gets a fresh writable layer
        view = image_mode.in_image_view(lower, layer, mounts, working_dir, uid, gid,
                                        image_mode.read_only_root(spec))
        return argv, env, view, lambda pid: image_mode.exec_view(pid, layer, working_dir, uid, gid)

    def reap(self, record: st.ContainerRecord, restartable: bool) -> None:
        """Notices an exited process; schedules a restart when the policy asks for one
        (init containers are only ever restarted after a failure)."""
        process = self.processes.get(record.name)
        code = process.poll() if process else None
        if code is None:
            return
        del self.processes[record.name]
        record.terminated = st.Terminated(code, st.exit_reason(code), record.running_since or now_iso(), now_iso(),
                                          podspec.termination_message(self.termination_file(record.name)))
        record.running_since, record.ready = None, False
        self.ctx_log("container exited", container=record.name, exit_code=code)
        is_init = any(r is record for r in self.init)
        policy = "OnFailure" if is_init and self.restart_policy == "Always" else self.restart_policy
        if restartable and st.should_restart(policy, code):
            delay = st.backoff_seconds(record.restart_count, self.ctx.backoff_base, self.ctx.backoff_cap)
            self.not_before[record.name] = time.monotonic() + delay
            # As the kubelet reports it: waiting in back-off, the exit kept as lastState.
            record.last_terminated, record.terminated, record.restart_pending = record.terminated, None, True
            record.waiting_reason = "CrashLoopBackOff"
            record.waiting_message = f"back-off {delay:g}s restarting failed container={record.name}"

    def restart_due(self, record: st.ContainerRecord) -> bool:
        """True once an exited container's back-off has passed; counts the restart."""
        if not record.restart_pending or time.monotonic() < self.not_before.get(record.name, 0):
            return False
        record.restart_pending = False
        record.restart_count += 1
        return True

    def step_containers(self) -> None:
        if not self.init_done:
            for record in self.init:
                self.reap(record, restartable=True)
                if record.terminated and record.terminated.exit_code == 0:
                    continue
                if record.name in self.processes:
                    return
                if (record.terminated is not None or record.restart_pending) and not self.restart_due(record):
                    return
                if time.monotonic() >= self.not_before.get(record.name, 0):
                    self.start_container(record)
                return
            self.init_done = True
        for record in self.main:
            self.reap(record, restartable=True)
            if record.name in self.processes:
                continue
            if (record.terminated is not None or record.restart_pending) and not self.restart_due(record):
                continue
            if time.monotonic() >= self.not_before.get(record.name, 0):
                self.start_container(record)

    def step_probes(self) -> None:
        now = time.monotonic()
        for record in self.main:
            if record.name not in self.processes:
                continue
            spec = self.specs[record.name]
            prefix, env = self.exec_views[record.name]
            tracker = self.readiness.get(record.name)
            if tracker and tracker.due(now):
                tracker.record(run_probe(tracker.probe, spec, self.pod_ip, prefix, env), now)
                record.ready = bool(tracker.result)
            tracker = self.liveness.get(record.name)
            if tracker and tracker.due(now):
                tracker.record(run_probe(tracker.probe, spec, self.pod_ip, prefix, env), now)
                if tracker.result is False:
                    self.ctx_log("liveness probe failed, restarting", container=record.name)
                    self.stop_processes([record.name], spec_grace=self.grace_seconds())

    def grace_seconds(self) -> float:
        pod = self.snapshot()
        grace = pod["metadata"].get("deletionGracePeriodSeconds")
        return float(grace if grace is not None else pod["spec"].get("terminationGracePeriodSeconds", 30))

    def stop_processes(self, names: list[str], spec_grace: float) -> None:
        """SIGTERM, wait up to the grace period, then SIGKILL; records every exit."""
        for name in names:
            self.processes[name].signal(signal.SIGTERM)
        deadline = time.monotonic() + spec_grace
        while any(n in self.processes for n in names):
            if time.monotonic() >= deadline:
                for name in names:
                    if name in self.processes:
                        self.processes[name].kill()
            for record in [*self.init, *self.main]:
                if record.name in names:
                    self.reap(record, restartable=not self.deleting())
            time.sleep(0.05)

    def deleting(self) -> bool:
        return bool(self.snapshot()["metadata"].get("deletionTimestamp")) or self.shutdown.is_set()

    # --- life cycle -----------------------------------------------------------------------------
    def setup_volumes(self) -> bool:
        try:
            self.volume_dirs = VolumeBuilder(self.snapshot(), self.lookup, self.token, self.ctx.ca_bundle,
                                             self.pod_ip, self.ctx.host_ip).materialize(self.dir / "volumes")
            self.volumes_refreshed = time.monotonic()
            return True
        except (podspec.ConfigError, ApiError) as error:
            for record in [*self.init, *self.main]:
                if record.running_since is None:
                    record.waiting_reason, record.waiting_message = "ContainerCreating", str(error)
            log.warning("volume setup failed", extra={"pod": self.pod_name, "error": str(error)})
            return False

    def run(self) -> None:
        try:
            self.run_pod()
        except Exception:
            log.exception("pod worker crashed", extra={"pod": f"{self.ns}/{self.pod_name}"})
            for process in self.processes.values():
                process.kill()

    def run_pod(self) -> None:
        self.dir.mkdir(parents=True, exist_ok=True)
        while not self.removed.is_set() and not self.deleting():
            if not self.terminal_at_start:
                stale = time.monotonic() - self.volumes_refreshed > VOLUME_REFRESH_SECONDS
                if self.volume_dirs is None or stale:
                    self.setup_volumes()
                if self.volume_dirs is not None:
                    self.step_containers()
                    self.step_probes()
                self.push_status()
            time.sleep(TICK)
        if self.shutdown.is_set():
            self.stop_processes(list(self.processes), spec_grace=10)
            return
        if self.removed.is_set():
            self.stop_processes(list(self.processes), spec_grace=0)
        else:
            grace = self.grace_seconds()
            self.ctx_log("pod deleting", grace_seconds=grace, running=list(self.processes))
            self.stop_processes(list(self.processes), spec_grace=grace)
            if not self.terminal_at_start:
                exits = [r.terminated.exit_code for r in self.main if r.terminated]
                self.push_status(force_phase="Succeeded" if exits and not any(exits) else "Failed")
            self.final_delete()
        shutil.rmtree(self.dir, ignore_errors=True)

    def final_delete(self) -> None:
        body = {"kind": "DeleteOptions", "apiVersion": "v1", "gracePeriodSeconds": 0,
                "preconditions": {"uid": self.uid}}
        try:
            self.ctx.client.request("DELETE", f"/api/v1/namespaces/{self.ns}/pods/{self.pod_name}", body)
            self.ctx_log("pod deleted")
        except ApiError as error:
            if error.status not in (404, 409):
                log.warning("final delete failed", extra={"pod": self.pod_name, "error": str(error)})
