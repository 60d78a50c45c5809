"""Executors benchmark (issue 26): input rows/s at the limit, batch and checkpoint durations of one
stateful job in three setups at the same two task slots: `local[2]` (one pod), a driver with one
2-core executor, a driver with two 1-core executors (`spark.master: k8s`, a shared hot volume).

Each run is a StreamingJob on the local cluster under the operator (a host process watching the
bench's namespace); the setups alternate per round (A B C, C B A, ...). The figures come from the
runtime's /metrics (input rows and batch-duration counters, two scrapes a window apart) and its
/status (recent checkpoints with their sync and async seconds), the API the operator reads too.

    python bench/executor_bench.py              # 4 rounds, 120 s windows (~40 min on 2 cores)
    python bench/executor_bench.py --small      # 2 rounds, 40 s windows, a smaller batch (minutes)
    python bench/executor_bench.py --no-write   # print the section, leave docs/benchmarks.md alone

The cluster is $KUBECONFIG's, else the local one (e2e/local, SPARKPOINT_E2E_STATE), brought up with
`make cluster-up` when it is down (NODE=agent: the node agent, whose pods are host processes: its
figures are not a real node's and the section says so). Without a cluster it skips with a message.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import time
import urllib.request
import uuid
from pathlib import Path
from typing import Any

import executor_report as er
import report  # bench/report.py (bench/ is on sys.path when this runs as a script)
import yaml

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO / "e2e"))  # the e2e suite's cluster helpers: the same operator and job spec

import kube_helpers as kh  # noqa: E402
from operator_jobs import Jobs  # noqa: E402

from sparkpoint.operator.kube import builders  # noqa: E402


def ensure_cluster() -> bool | None:
    """True if this call brought the local cluster up, False if one was up, None if none can be had."""
    if os.environ.get("KUBECONFIG"):
        return False
    cluster = [sys.executable, str(REPO / "e2e" / "local" / "cluster.py")]
    if subprocess.run([*cluster, "status"], capture_output=True).returncode == 0:
        os.environ["KUBECONFIG"] = str(kh.STATE_DIR / "kubeconfig")
        return False
    up = subprocess.run(["make", "-s", "cluster-up"], cwd=REPO, capture_output=True, text=True)
    if up.returncode != 0:
        print(f"executor_bench: skipped: no cluster ($KUBECONFIG unset, `make cluster-up` exited {up.returncode}: "
              f"{up.stderr.strip()[-300:]})", file=sys.stderr)
        return None
    os.environ["KUBECONFIG"] = up.stdout.strip().splitlines()[-1].split("=", 1)[1]
    return True


def http(url: str, token: str | None = None, timeout: float = 15) -> str:
    headers = {"Authorization": f"Bearer {token}"} if token else {}
    with urllib.request.urlopen(urllib.request.Request(url, headers=headers), timeout=timeout) as resp:
        return resp.read().decode()


class Bench:
    """One namespace, one operator, the jobs one after the other."""

    def __init__(self, args: argparse.Namespace):
        from kubernetes import client, config

        self.args = args
        self.api = config.new_client_from_config(config_file=os.environ["KUBECONFIG"])
        self.core = client.CoreV1Api(self.api)
        self.namespace = args.namespace or f"bench-executors-{uuid.uuid4().hex[:5]}"
        self.operator = kh.OperatorProcess(self.namespace, kh.STATE_DIR / "operator" / f"{self.namespace}.log")
        self.hot: Path | None = None

    def __enter__(self) -> Bench:
        from kubernetes import client
        from kubernetes.client.rest import ApiException
        from test_operator_executors import _driver_account_for_a_process_operator, shared_hot_dir

        from sparkpoint.runtime.store import open_store

        kh.install_crd(client.ApiextensionsV1Api(self.api), yaml.safe_load(kh.CRD_FILE.read_text()))
        kh.apply_crds(client.ApiextensionsV1Api(self.api), kh.PEERING_CRD_FILE)
        try:
            self.core.create_namespace(client.V1Namespace(metadata=client.V1ObjectMeta(name=self.namespace)))
        except ApiException as error:
            if error.status != 409:  # --namespace of one that exists: used as it is
                raise
        kh.wait_for("the default service account", lambda: kh.exists(
            lambda: self.core.read_namespaced_service_account("default", self.namespace)), timeout=60)
        info = json.loads(kh.MINIO_INFO.read_text())
        self.store_env = {"SPARKPOINT_S3_ENDPOINT": info["endpoint"], "AWS_ACCESS_KEY_ID": info["access_key"],
                          "AWS_SECRET_ACCESS_KEY": info["secret_key"]}
        open_store("s3://sparkpoint-e2e", env=self.store_env).create_bucket()
        self.jobs = Jobs(self.api, self.namespace, self.store_env)
        self.operator.start()
        _driver_account_for_a_process_operator(self.api, self.namespace, self.operator)
        if not self.args.hot_claim:
            self.hot = Path(self.args.hot_path) if self.args.hot_path else shared_hot_dir(self.namespace)
        return self

    def __exit__(self, *exc: object) -> None:
        from kubernetes import client

        try:
            client.CustomObjectsApi(self.api).delete_collection_namespaced_custom_object(
                kh.GROUP, kh.VERSION, self.namespace, kh.PLURAL)
            kh.wait_for("the bench's jobs deleted", lambda: not client.CustomObjectsApi(self.api)
                        .list_namespaced_custom_object(kh.GROUP, kh.VERSION, self.namespace, kh.PLURAL)["items"],
                        timeout=180)
        finally:
            self.operator.stop()
            if not self.args.namespace:
                self.core.delete_namespace(self.namespace, grace_period_seconds=0)
            if self.hot and not self.args.hot_path:
                shutil.rmtree(self.hot, ignore_errors=True)

    def spec(self, setup: er.Setup) -> dict[str, Any]:
        a = self.args
        over: dict[str, Any] = {
            "image": a.image,
            "job.args": {"rows_per_batch": a.rows_per_batch, "keys": a.keys},
            "job.triggerInterval": "100ms",  # the floor: a batch starts as soon as the previous one ends
            "spark.master": setup.master, "spark.shufflePartitions": a.partitions,
            "spark.resources": {"cpu": a.cpu_request, "memory": setup.driver_memory},
            "checkpoint.interval": a.interval}
        if setup.executors:
            over["spark.executors"] = setup.executors
            # what fits a 2-core node beside the cluster; the slots are spark.executor.cores either way
            over["spark.conf"] = {"spark.kubernetes.executor.request.cores": a.cpu_request}
            over["checkpoint.hotVolume"] = ({"persistentVolumeClaim": {"claimName": a.hot_claim}} if a.hot_claim
                                            else {"hostPath": {"path": str(self.hot)}})
        return over

    def run(self, setup: er.Setup, round_: int) -> er.Window:
        name = f"ex{round_}-{setup.master.replace('[', '').replace(']', '')}-{(setup.executors or {}).get('instances', 0)}"
        self.jobs.create(name, **self.spec(setup))
        try:
            st = self.jobs.wait_status(name, "Running with a checkpoint", lambda s: s.get("phase") == "Running"
                                       and s.get("latestCheckpoint"), timeout=600, operator=self.operator)
            pod = self.core.read_namespaced_pod(st["pod"], self.namespace)
            base = f"http://{pod.status.pod_ip}:{builders.CONTROL_PORT}"
            token = self._token(name)
            time.sleep(self.args.warmup)
            load0 = os.getloadavg()[0]
            t0, since = time.monotonic(), time.time()
            before = er.parse_metrics(http(f"{base}/metrics"))
            statuses = []
            while time.monotonic() - t0 < self.args.window:
                try:
                    statuses.append(json.loads(http(f"{base}/status", token)))
                except OSError as error:  # a slow answer on a loaded machine costs a sample, not the run
                    print(f"  /status: {error}", flush=True)
                time.sleep(1.0)
            after = er.parse_metrics(http(f"{base}/metrics"))
            seconds = time.monotonic() - t0
            statuses.append(json.loads(http(f"{base}/status", token)))
            return er.window(setup.name, round_, before, after, seconds, statuses, since,
                             (load0, os.getloadavg()[0]), self._resources(name, setup))
        finally:
            self._delete(name)

    def _token(self, job: str) -> str:
        import base64

        name = builders.control_token_secret_name(builders.JobRef(self.namespace, job, ""))
        secret = self.core.read_namespaced_secret(name, self.namespace)
        return base64.b64decode(secret.data[builders.CONTROL_TOKEN_KEY]).decode()

    def _resources(self, job: str, setup: er.Setup) -> list[dict[str, Any]]:
        """What each of the job's pods asked for and is held to (requests, limits), and its task slots."""
        out = []
        for p in sorted(self.jobs.pods(job), key=lambda p: p.metadata.name):
            if p.status.phase != "Running" or p.metadata.deletion_timestamp:
                continue
            role = p.metadata.labels.get("spark-role") or p.metadata.labels.get("app.kubernetes.io/component")
            c = p.spec.containers[0].resources
            req, lim = c.requests or {}, c.limits or {}
            # local[N] runs its tasks in the driver; with executors the driver runs none
            slots = setup.executors["cores"] if role == "executor" else 0 if setup.executors else setup.slots()
            out.append({"role": role or "pod", "cpu_request": req.get("cpu"), "cpu_limit": lim.get("cpu"),
                        "memory_request": req.get("memory"), "memory_limit": lim.get("memory"), "slots": slots})
        return out

    def _delete(self, name: str) -> None:
        from kubernetes import client
        from kubernetes.client.rest import ApiException

        try:
            client.CustomObjectsApi(self.api).delete_namespaced_custom_object(
                kh.GROUP, kh.VERSION, self.namespace, kh.PLURAL, name)
        except ApiException as error:
            if error.status != 404:
                raise
        kh.wait_for(f"{name}'s pods gone", lambda: not self.jobs.pods(name), timeout=300, interval=1.0)


def run(args: argparse.Namespace) -> tuple[list[er.Window], list[str], bool]:
    all_setups = er.setups(args.executor_memory)
    with Bench(args) as bench:
        agent = not kh.real_node(bench.core)
        windows = []
        for r, idxs in enumerate(er.schedule(len(all_setups), args.rounds), start=1):
            for i in idxs:
                print(f"round {r}: {all_setups[i].name}", flush=True)
                windows.append(bench.run(all_setups[i], r))
                w = windows[-1]
                print(json.dumps(er.figures(w) | {"load": w.load}), flush=True)
    return windows, [s.name for s in all_setups], agent


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--small", action="store_true", help="2 rounds, 40 s windows, 20000 rows per batch")
    p.add_argument("--rounds", type=int)
    p.add_argument("--window", type=float, help="seconds measured per run (default 120, --small 40)")
    p.add_argument("--warmup", type=float, default=10.0, help="seconds after the first checkpoint before measuring")
    p.add_argument("--rows-per-batch", type=int, help="the backlog each batch takes (default 100000, --small 20000)")
    p.add_argument("--keys", type=int, default=20000)
    p.add_argument("--partitions", type=int, default=4)
    p.add_argument("--interval", default="10s", help="checkpoint.interval")
    p.add_argument("--executor-memory", default="512Mi", help="executor heap per core (local[2]'s driver gets both)")
    p.add_argument("--cpu-request", default="200m", help="CPU request of the driver and of each executor")
    p.add_argument("--image", default=kh.E2E_IMAGE, help="the job's image (executors run it too)")
    p.add_argument("--namespace", help="an existing namespace to use (default: a new one, deleted after)")
    p.add_argument("--hot-path", help="hostPath of the shared hot volume (default: a new dir under /var/tmp)")
    p.add_argument("--hot-claim", help="a ReadWriteMany PVC for the hot volume instead of a hostPath")
    p.add_argument("--no-write", action="store_true", help="print, do not update docs/benchmarks.md")
    p.add_argument("--raw-out", metavar="JSON", help="also write every window's figures here")
    args = p.parse_args(argv)
    args.rounds = args.rounds or (2 if args.small else 4)
    args.window = args.window or (40.0 if args.small else 120.0)
    args.rows_per_batch = args.rows_per_batch or (20000 if args.small else 100000)
    started = ensure_cluster()
    if started is None:
        return 0
    try:
        windows, order, agent = run(args)
    finally:
        if started:
            subprocess.run([sys.executable, str(REPO / "e2e" / "local" / "cluster.py"), "down"],
                           stdout=subprocess.DEVNULL)
    if args.raw_out:
        Path(args.raw_out).write_text(json.dumps([w.__dict__ for w in windows]))
    meta = {"commit": report.commit(), "date": time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime()),
            "cores": os.cpu_count(), "rounds": args.rounds, "window": f"{args.window:.0f}",
            "node": "the local cluster's node agent (pods are host processes: no cgroup holds a pod to its "
                    "resources)" if agent else "the local cluster's real node (kubelet, containerd)",
            "smoke": ("node agent, not the real node; --small" if args.small else "node agent, not the real node")
            if agent else ("--small" if args.small else None),
            "workload": f"sparkpoint.examples.windowed_aggregation, {args.rows_per_batch} rows per batch, "
                        f"{args.keys} keys, 10 s windows, {args.partitions} shuffle partitions, RocksDB state, "
                        f"checkpoint every {args.interval} to the cluster's MinIO"}
    return report.publish(er.START, er.END, er.render(windows, order, meta), write=not args.no_write)


if __name__ == "__main__":
    sys.exit(main())
