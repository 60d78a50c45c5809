"""`make chaos` (not in CI): kill job pods, runtime containers and the operator, freeze a pod's
processes with the cgroup freezer and thaw them (a node that stops answering; the operator gives the
attempt up after restart.lostAfter and the thawed zombie is fenced out), edit the spec (an upgrade),
suspend and resume, and delete and re-create the job, at random on the local cluster
for CHAOS_MINUTES (default 20), then compare the committed output with a failure-free run of the
same input: 0 missing and 0 duplicate rows, or exit 1.

Two StreamingJobs of the same deterministic input (windowed_aggregation over rate-micro-batch, a
bounded number of input batches) run side by side under one operator: `chaos` suffers the kills,
`reference` does not (it only shares the operator's outages, which never touch a pod). After the
chaos window both run past their last input batch; then their committed outputs (what a reader of
the transactional sink sees) must be equal, and equal to the output computed in Python.

The tally goes into docs/reliability.md (section "Chaos run").
Usage: python e2e/chaos.py [--minutes N] [--seed S] [--no-report]   (needs $KUBECONFIG)
"""

from __future__ import annotations

import argparse
import json
import os
import random
import re
import signal
import sys
import time
import uuid
from collections import Counter

import yaml
from kube_helpers import (
    CRD_FILE,
    MINIO_INFO,
    PEERING_CRD_FILE,
    REPO,
    STATE_DIR,
    OperatorProcess,
    apply_crds,
    install_crd,
    wait_for,
)
from kubernetes import client, config
from local.freezer import freeze, pod_cgroup_of_pid, thaw
from operator_jobs import BUCKET, Jobs
from test_operator_recovery import runtime_pid

from harness.runtime_job import WindowedJob, canonical
from sparkpoint.runtime.sink.transactional import read_committed
from sparkpoint.runtime.store import JobRef, open_store

ROWS, KEYS, WINDOW, WATERMARK = 100, 40, 5, 2  # per batch; window and watermark in seconds (= batches)
KILLS = ("pod", "pod-force", "container", "operator", "edit", "suspend", "recreate", "freeze")
JOB_OPTIONS = {"restart.maxRestarts": 1000, "restart.window": "1m", "checkpoint.interval": "5s",
               "restart.lostAfter": "10s"}
FREEZE_SECONDS = (5.0, 45.0)  # thawed before (short) or after (long) the operator gives the attempt up
REPORT = REPO / "docs" / "reliability.md"
SECTION = "## Chaos run"


def log(msg: str, **fields) -> None:
    print(json.dumps({"t": time.strftime("%H:%M:%S"), "msg": msg, **fields}), flush=True)


def expected_rows(total_batches: int) -> Counter:
    """The failure-free output computed in Python. The watermark stops at the last input batch's
    event time (later batches are filtered empty), so the windows it never passes stay open."""
    return WindowedJob(rows_per_batch=ROWS, keys=KEYS, total_batches=total_batches, window_seconds=WINDOW,
                       watermark_seconds=WATERMARK).expected_rows()


def store_env() -> dict[str, str]:
    info = json.loads(MINIO_INFO.read_text())
    env = {"SPARKPOINT_S3_ENDPOINT": info["endpoint"], "AWS_ACCESS_KEY_ID": info["access_key"],
           "AWS_SECRET_ACCESS_KEY": info["secret_key"]}
    open_store(f"s3://{BUCKET}", env=env).create_bucket()
    return env


class Chaos:
    def __init__(self, api: client.ApiClient, namespace: str, env: dict[str, str], rng: random.Random,
                 total_batches: int):
        self.jobs, self.ns, self.env, self.rng = Jobs(api, namespace, env), namespace, env, rng
        self.total = total_batches
        self.kills: Counter = Counter()
        self.before: Counter = Counter()  # restarts, local recoveries, attempts of earlier incarnations
        self.operator = OperatorProcess(namespace, STATE_DIR / "operator" / f"{namespace}.log")

    def start(self) -> None:
        self.operator.start()
        for name in ("chaos", "reference"):
            self.create(name)
        for name in ("chaos", "reference"):
            self.jobs.wait_status(name, "Running with a checkpoint",
                                  lambda s: s.get("phase") == "Running" and s.get("latestCheckpoint"),
                                  timeout=600, operator=self.operator)

    def create(self, name: str) -> None:
        args = {"rows_per_batch": ROWS, "keys": KEYS, "total_batches": self.total,
                "window": f"{WINDOW} seconds", "watermark": f"{WATERMARK} seconds"}
        self.jobs.create(name, **{"job.args": args, **JOB_OPTIONS})

    def edit(self) -> None:
        """A spec change that needs a new pod and leaves the output alone: an upgrade (drain with a
        savepoint, a new attempt from it)."""
        self.edits = getattr(self, "edits", 0) + 1
        self.jobs.patch_spec("chaos", {"spark": {"conf": {"spark.sql.streaming.numRecentProgressUpdates":
                                                          str(100 + self.edits)}}})

    def suspend_and_resume(self) -> None:
        self.jobs.patch_spec("chaos", {"state": "suspended"})
        time.sleep(self.rng.uniform(0, 30))  # sometimes resumed while the suspend drain still runs
        self.jobs.patch_spec("chaos", {"state": "running"})

    def recreate(self) -> None:
        """Delete the StreamingJob (gc.onDelete retain: its finalizer drains it) and create it again
        under the same name: the new one resumes the old one's checkpoints and output history."""
        st = self.jobs.status("chaos")
        self.before.update(restarts=st.get("restarts", 0), localRecoveries=st.get("localRecoveries", 0),
                           attempts=st.get("attempt", 0))
        self.jobs.custom.delete_namespaced_custom_object("sparkpoint.dev", "v1alpha1", self.ns, "streamingjobs",
                                                         "chaos")

        def gone() -> bool:
            return not [j for j in self.jobs.custom.list_namespaced_custom_object(
                "sparkpoint.dev", "v1alpha1", self.ns, "streamingjobs")["items"] if j["metadata"]["name"] == "chaos"]
        if self.operator.process.poll() is not None:
            self.start_operator()
        wait_for("the chaos job deleted", gone, timeout=600, interval=1.0)
        self.create("chaos")

    def start_operator(self) -> None:
        """Start it again; on a loaded machine /healthz may take longer than start() waits."""
        try:
            self.operator.start()
        except AssertionError:
            wait_for("the operator's /healthz", lambda: self.operator.get("/healthz") is not None
                     or self.operator._died(), timeout=600, interval=2.0)

    def kill_one(self) -> None:
        kind = self.rng.choice(KILLS)
        if kind == "operator":
            self.operator.kill()
            time.sleep(self.rng.uniform(0, 20))
            self.start_operator()
        elif kind == "edit":
            self.edit()
        elif kind == "suspend":
            self.suspend_and_resume()
        elif kind == "recreate":
            self.recreate()
        elif kind == "freeze":
            if not self.freeze_pod("chaos", self.rng.uniform(*FREEZE_SECONDS)):
                return None
        elif kind == "container":
            pid = runtime_pid(self.ns, "chaos")
            if pid is None:
                return log("no runtime process to kill (between attempts)")
            os.kill(pid, signal.SIGKILL)
        else:
            pods = [p for p in self.jobs.pods("chaos") if p.metadata.deletion_timestamp is None]
            if not pods:
                return log("no pod to delete (between attempts)")
            self.jobs.core.delete_namespaced_pod(pods[0].metadata.name, self.ns,
                                                 grace_period_seconds=0 if kind == "pod-force" else None)
        self.kills[kind] += 1
        log("killed", kind=kind, kills=dict(self.kills))

    def freeze_pod(self, job: str, seconds: float) -> bool:
        """Freeze the job's running pod (all its containers) for `seconds`, then thaw it. False when
        there is none to freeze (between attempts, or pods that are not this host's processes)."""
        pid = runtime_pid(self.ns, job)
        pods = [p for p in self.jobs.pods(job) if p.metadata.deletion_timestamp is None]
        if pid is None or not pods:
            log("no runtime process to freeze (between attempts, or not the local cluster)")
            return False
        try:
            cg = pod_cgroup_of_pid(pid, pods[0].metadata.uid)
        except (OSError, ValueError) as exc:  # the process ended, or is not that pod's (a new attempt)
            log("pod not frozen", error=str(exc))
            return False
        freeze(cg)
        log("frozen", pod=pods[0].metadata.name, cgroup=cg.path, seconds=round(seconds, 1))
        try:
            time.sleep(seconds)
        finally:
            thaw(cg)
        return True

    def run(self, seconds: float, pause: tuple[float, float]) -> None:
        deadline = time.monotonic() + seconds
        while time.monotonic() < deadline:
            time.sleep(min(self.rng.uniform(*pause), max(0.0, deadline - time.monotonic())))
            if time.monotonic() < deadline:
                self.kill_one()
        if self.operator.process.poll() is not None:
            self.start_operator()

    def finish(self, timeout: float) -> dict[str, Counter]:
        """Both jobs past the last input batch plus the batches that close its window."""
        done = self.total + WINDOW + WATERMARK + 3
        out = {}
        for name in ("reference", "chaos"):
            self.jobs.wait_status(name, f"a checkpoint past batch {done}",
                                  lambda s: (s.get("latestCheckpoint") or {}).get("batch", -1) >= done,
                                  timeout=timeout, operator=self.operator)
            out[name] = canonical(read_committed(open_store(f"s3://{BUCKET}/{self.ns}", env=self.env),
                                                 JobRef(self.ns, name)))
        return out


def compare(got: Counter, want: Counter) -> tuple[int, int]:
    """(missing, duplicates or extra) rows of `got` against `want`, as multisets."""
    return sum((want - got).values()), sum((got - want).values())


def write_report(tally: dict) -> None:
    lines = [SECTION, "",
             f"`make chaos` (e2e/chaos.py) on the local cluster, {tally['when']}: "
             f"{tally['minutes']:g} minutes of kills, spec edits (upgrades), suspend/resume and re-creations "
             f"of the job, seed {tally['seed']}"
             + (" (a short run; the issue's figure is 20 minutes: `CHAOS_MINUTES=20 make chaos`)."
                if tally["minutes"] < 20 else "."), "",
             "| what | count |", "| --- | --- |"]
    lines += [f"| {'kill' if k in KILLS[:4] else 'act'}: {k} | {tally['kills'].get(k, 0)} |" for k in KILLS]
    lines += [f"| restarts (status.restarts) | {tally['restarts']} |",
              f"| of them local recoveries | {tally['localRecoveries']} |",
              f"| attempts (new pods) | {tally['attempts']} |",
              f"| input batches | {tally['batches']} |",
              f"| output rows compared | {tally['rows']} |",
              f"| missing vs failure-free run | {tally['missing']} |",
              f"| duplicates vs failure-free run | {tally['duplicates']} |",
              f"| reference = Python result | {tally['reference_exact']} |", "",
              f"Result: **{'PASS' if tally['ok'] else 'FAIL'}** ({tally['seconds']:.0f} s in all).", ""]
    text = REPORT.read_text() if REPORT.exists() else "# Reliability\n"
    section = "\n".join(lines)
    pattern = re.compile(rf"^{re.escape(SECTION)}\n.*?(?=^## |\Z)", re.S | re.M)
    text = pattern.sub(section + "\n", text) if pattern.search(text) else text.rstrip("\n") + "\n\n" + section
    REPORT.write_text(text)


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--minutes", type=float, default=float(os.environ.get("CHAOS_MINUTES", "20")))
    p.add_argument("--seed", type=int, default=int(os.environ.get("CHAOS_SEED", str(random.randrange(10**6)))))
    p.add_argument("--pause", type=float, nargs=2, default=(20.0, 60.0), metavar=("MIN", "MAX"),
                   help="seconds between kills (uniform)")
    p.add_argument("--batches", type=int, default=None,
                   help="input batches (default: about 0.4 per second of the chaos window, at least 60)")
    p.add_argument("--no-report", action="store_true", help="do not write docs/reliability.md")
    args = p.parse_args()
    if not os.environ.get("KUBECONFIG"):
        print("chaos: set KUBECONFIG (make chaos does: it runs make cluster-up first)", file=sys.stderr)
        return 2
    started, rng = time.monotonic(), random.Random(args.seed)
    api = config.new_client_from_config(config_file=os.environ["KUBECONFIG"])
    install_crd(client.ApiextensionsV1Api(api), yaml.safe_load(CRD_FILE.read_text()))
    apply_crds(client.ApiextensionsV1Api(api), PEERING_CRD_FILE)
    core = client.CoreV1Api(api)
    ns = f"chaos-{uuid.uuid4().hex[:6]}"
    core.create_namespace(client.V1Namespace(metadata=client.V1ObjectMeta(name=ns)))
    wait_for("the default service account", lambda: core.list_namespaced_service_account(ns).items, timeout=60)
    # Input for about the chaos window at one batch a second, less the downtime the kills cause.
    chaos = Chaos(api, ns, store_env(), rng, total_batches=args.batches or max(60, int(args.minutes * 60 * 0.4)))
    log("start", namespace=ns, seed=args.seed, minutes=args.minutes, batches=chaos.total)
    try:
        chaos.start()
        chaos.run(args.minutes * 60, tuple(args.pause))
        log("chaos over; waiting for both jobs to finish their input", kills=dict(chaos.kills))
        out = chaos.finish(timeout=900 + args.minutes * 30)
        status = chaos.jobs.status("chaos")
    finally:
        try:
            chaos.jobs.custom.delete_collection_namespaced_custom_object("sparkpoint.dev", "v1alpha1", ns,
                                                                         "streamingjobs")
            wait_for("jobs deleted", lambda: not chaos.jobs.pods("chaos") and not chaos.jobs.pods("reference"),
                     timeout=180)
        except Exception as exc:  # cleanup must not hide the result
            log("cleanup incomplete", error=str(exc))
        chaos.operator.stop()
        core.delete_namespace(ns)
    missing, duplicates = compare(out["chaos"], out["reference"])
    tally = {"when": time.strftime("%Y-%m-%d"), "minutes": args.minutes, "seed": args.seed,
             "kills": dict(chaos.kills), "restarts": status.get("restarts", 0) + chaos.before["restarts"],
             "localRecoveries": status.get("localRecoveries", 0) + chaos.before["localRecoveries"],
             "attempts": status.get("attempt", 0) + chaos.before["attempts"],
             "batches": chaos.total, "rows": sum(out["reference"].values()), "missing": missing,
             "duplicates": duplicates, "reference_exact": out["reference"] == expected_rows(chaos.total),
             "seconds": time.monotonic() - started}
    tally["ok"] = missing == 0 and duplicates == 0 and tally["reference_exact"]
    log("result", **tally)
    if not args.no_report:
        write_report(tally)
    return 0 if tally["ok"] else 1


if __name__ == "__main__":
    sys.exit(main())
