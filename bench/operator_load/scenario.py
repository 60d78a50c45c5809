"""One load run: N StreamingJobs on the fake node, the operator watching their namespace.

ramp (create N jobs, wait until all are Running) -> steady window (trigger lag, CPU, RSS) ->
pod deletions (time until the operator creates the next attempt's pod) -> teardown.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import signal
import subprocess
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

import aiohttp

from harness.polling import wait_until_async
from sparkpoint.runtime.spec import parse_duration

from . import jobs, procstat
from .fake_kubelet import FakeKubelet
from .kubeapi import ApiError, KubeApi

log = logging.getLogger("operator-load")


@dataclass(frozen=True)
class Settings:
    jobs: int
    interval: str = "10s"
    backoff: str = "1s"
    window: float = 180.0  # seconds of steady state measured
    deletions: int = 20
    node: str = "sparkpoint-load-node"
    network: str = "127.3.0.0/16"
    control_port: int = 8080
    create_concurrency: int = 8
    ramp_timeout: float | None = None  # default max(300 s, 1.5 s per job)


@dataclass
class Result:
    jobs: int
    interval_s: float
    ramp_s: float = 0.0  # first job created -> all Running
    window_s: float = 0.0
    lags: list[float] = field(default_factory=list)
    operator_lag_buckets: dict[str, float] = field(default_factory=dict)  # histogram diff over the window
    cpu_cores_steady: float = 0.0  # operator CPU seconds per wall second in the window
    cpu_cores_ramp: float = 0.0
    harness_cores: float = 0.0  # this process (fake kubelet + every stand-in runtime) in the window
    apiserver_cores: float = 0.0  # kube-apiserver + etcd in the window
    rss_mib: float = 0.0  # at the end of the window
    peak_rss_mib: float = 0.0
    delete_to_created: list[float] = field(default_factory=list)  # pod deleted -> next attempt's pod created
    delete_to_running: list[float] = field(default_factory=list)  # ... -> that pod Running on the node
    deleted: int = 0  # pods deleted; those whose next attempt did not come within the wait are missing above
    deletion_wait_s: float = 0.0
    triggers: int = 0
    errors: dict[str, float] = field(default_factory=dict)
    load_avg: tuple[float, float] = (0.0, 0.0)  # 1-min load average at the start and end

    def to_json(self) -> dict[str, Any]:
        return asdict(self)


class PodTimes:
    """First time each pod of the namespace was seen (created by the operator), from a watch."""

    def __init__(self, api: KubeApi, namespace: str):
        self.api, self.namespace, self.seen = api, namespace, {}

    async def run(self) -> None:
        path = f"/api/v1/namespaces/{self.namespace}/pods"
        while True:
            try:
                listing = await self.api.get(path)
                for pod in listing["items"]:
                    self.seen.setdefault(pod["metadata"]["name"], time.time())
                async for event in self.api.watch(path, listing["metadata"]["resourceVersion"]):
                    if event["type"] == "ERROR":
                        break
                    self.seen.setdefault(event["object"]["metadata"]["name"], time.time())
            except asyncio.CancelledError:
                raise
            except Exception as exc:  # noqa: BLE001
                log.warning("pod timing watch failed, relisting: %s", exc)
                await asyncio.sleep(1.0)


def parse_metrics(text: str) -> dict[str, float]:
    """The operator's trigger-lag histogram buckets and error/trigger counters from /metrics."""
    out: dict[str, float] = {}
    for line in text.splitlines():
        if line.startswith(("sparkpoint_operator_checkpoint_trigger_lag_seconds_bucket",
                            "sparkpoint_operator_checkpoint_triggers_total", "sparkpoint_operator_reconcile_errors_total")):
            name, value = line.rsplit(" ", 1)
            out[name] = float(value)
    return out


class OperatorProcess:
    def __init__(self, repo: Path, kubeconfig: Path, namespace: str, metrics_port: int, log_file: Path):
        # Not --standalone: with it the operator never leaves kopf's "peering CRD is missing" pause
        # (it passes a peering name, which makes peering mandatory while standalone looks for none).
        self.argv = [str(repo / ".venv" / "bin" / "sparkpoint-operator"), "--namespace", namespace,
                     "--priority", "100", "--metrics-port", str(metrics_port)]
        self.env = dict(os.environ, KUBECONFIG=str(kubeconfig))
        self.metrics_url = f"http://127.0.0.1:{metrics_port}/metrics"
        self.log_file = log_file
        self.proc: subprocess.Popen | None = None

    def start(self) -> int:
        with open(self.log_file, "ab") as out:
            self.proc = subprocess.Popen(self.argv, stdout=out, stderr=subprocess.STDOUT, env=self.env,
                                         stdin=subprocess.DEVNULL)
        return self.proc.pid

    def stop(self) -> None:
        if self.proc is None or self.proc.poll() is not None:
            return
        self.proc.send_signal(signal.SIGTERM)
        try:
            self.proc.wait(30)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait(10)

    async def metrics(self) -> dict[str, float]:
        try:
            async with aiohttp.ClientSession(timeout=aiohttp.ClientTimeout(total=10)) as session, \
                    session.get(self.metrics_url) as resp:
                return parse_metrics(await resp.text())
        except (TimeoutError, aiohttp.ClientError):
            return {}


async def _create_jobs(api: KubeApi, namespace: str, settings: Settings) -> None:
    spec = jobs.job_spec(settings.interval, settings.backoff)
    path = jobs.JOBS_PATH.format(namespace=namespace)
    queue = list(range(settings.jobs))

    async def worker() -> None:
        while queue:
            await api.create(path, jobs.streaming_job(namespace, queue.pop(), spec))
    await asyncio.gather(*(worker() for _ in range(settings.create_concurrency)))


async def _phases(api: KubeApi, namespace: str) -> dict[str, dict[str, Any]]:
    out: dict[str, dict[str, Any]] = {}
    params: dict[str, Any] = {"limit": 200}  # pages: one LIST of 1,000 jobs may time out on a busy API server
    while True:
        listing = await api.get(jobs.JOBS_PATH.format(namespace=namespace), **params)
        out.update({j["metadata"]["name"]: j.get("status") or {} for j in listing["items"]})
        if not listing["metadata"].get("continue"):
            return out
        params["continue"] = listing["metadata"]["continue"]


async def _delete_sample(api: KubeApi, namespace: str, settings: Settings, times: PodTimes,
                         fake: FakeKubelet, result: Result) -> None:
    statuses = await _phases(api, namespace)
    names = sorted(n for n, s in statuses.items() if s.get("phase") == "Running")
    step = max(1, len(names) // max(1, settings.deletions))
    chosen = names[::step][: settings.deletions]
    deleted: dict[str, float] = {}
    for name in chosen:
        attempt = statuses[name]["attempt"]
        deleted[f"{name}-{attempt + 1}"] = time.time()
        await api.delete(f"/api/v1/namespaces/{namespace}/pods/{name}-{attempt}")
        await asyncio.sleep(0.5)  # spread out: one deletion at a time is the case measured
    running_at = fake.added_at

    async def all_back() -> bool:
        return all(pod in times.seen and f"{namespace}/{pod}" in running_at for pod in deleted)
    result.deleted, result.deletion_wait_s = len(deleted), 120 + 2 * parse_duration(settings.backoff)
    await wait_until_async(all_back, timeout=result.deletion_wait_s, interval=1.0)
    for pod, t0 in deleted.items():
        if pod in times.seen:
            result.delete_to_created.append(times.seen[pod] - t0)
        if f"{namespace}/{pod}" in running_at:
            result.delete_to_running.append(running_at[f"{namespace}/{pod}"] - t0)


async def _teardown(api: KubeApi, namespace: str) -> None:
    """With the operator stopped: delete the namespace and release the jobs' finalizers."""
    await api.delete(f"/api/v1/namespaces/{namespace}")
    path = jobs.JOBS_PATH.format(namespace=namespace)
    for job in (await api.get(path))["items"]:
        with contextlib.suppress(ApiError):
            await api.merge_patch(f"{path}/{job['metadata']['name']}", {"metadata": {"finalizers": None}})

    async def gone() -> bool:
        try:
            await api.get(f"/api/v1/namespaces/{namespace}")
            return False
        except ApiError as exc:
            return exc.status == 404
    if not await wait_until_async(gone, timeout=300, interval=2.0):
        log.warning("namespace %s still terminating after 300 s", namespace)


async def run(settings: Settings, api: KubeApi, operator: OperatorProcess, namespace: str,
              store: dict[str, str], cluster_pids: list[int]) -> Result:
    interval = parse_duration(settings.interval)
    result = Result(jobs=settings.jobs, interval_s=interval)
    await api.create("/api/v1/namespaces", jobs.namespace_body(namespace))
    await api.create(f"/api/v1/namespaces/{namespace}/secrets",
                     jobs.store_secret(namespace, store["endpoint"], store["access_key"], store["secret_key"]))
    fake = FakeKubelet(api, settings.node, settings.network, settings.control_port, max_pods=settings.jobs + 100)
    times = PodTimes(api, namespace)
    await fake.start()
    watch = asyncio.create_task(times.run(), name="pod-times")
    pid = operator.start()
    try:
        result.load_avg = (procstat.load_average(), 0.0)
        started, before = time.time(), procstat.sample(pid)
        await _create_jobs(api, namespace, settings)

        async def all_running() -> bool:
            phases = await _phases(api, namespace)
            return len(phases) == settings.jobs and all(s.get("phase") == "Running" for s in phases.values())
        ramp_timeout = settings.ramp_timeout or max(300.0, settings.jobs * 1.5)
        if not await wait_until_async(all_running, timeout=ramp_timeout, interval=5.0):
            log.warning("not all %d jobs Running after the ramp timeout; measuring anyway", settings.jobs)
        result.ramp_s = time.time() - started
        ramp_end = procstat.sample(pid)
        result.cpu_cores_ramp = (ramp_end.cpu_seconds - before.cpu_seconds) / result.ramp_s

        await asyncio.sleep(interval + 2)  # every job has had its first trigger
        t0, s0, m0 = time.time(), procstat.sample(pid), await operator.metrics()
        h0, c0 = procstat.sample(os.getpid()).cpu_seconds, procstat.cpu_of(cluster_pids)
        await asyncio.sleep(settings.window)
        t1, s1, m1 = time.time(), procstat.sample(pid), await operator.metrics()
        h1, c1 = procstat.sample(os.getpid()).cpu_seconds, procstat.cpu_of(cluster_pids)
        result.window_s = t1 - t0
        result.lags = fake.fleet.triggers.lags(interval, t0, t1)
        result.triggers = len(result.lags)
        result.cpu_cores_steady = (s1.cpu_seconds - s0.cpu_seconds) / result.window_s
        result.harness_cores, result.apiserver_cores = (h1 - h0) / result.window_s, (c1 - c0) / result.window_s
        result.rss_mib, result.peak_rss_mib = s1.rss_bytes / 2**20, s1.peak_rss_bytes / 2**20
        diff = {k: v - m0.get(k, 0.0) for k, v in m1.items()}
        result.operator_lag_buckets = {k: v for k, v in diff.items() if "lag_seconds_bucket" in k}
        result.errors = {k: v for k, v in diff.items() if "lag_seconds_bucket" not in k and v}

        await _delete_sample(api, namespace, settings, times, fake, result)
        result.load_avg = (result.load_avg[0], procstat.load_average())
        return result
    finally:
        operator.stop()
        watch.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await watch
        await _teardown(api, namespace)
        await fake.stop()
