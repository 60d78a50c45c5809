"""Recovery through the operator on the local cluster's real node (issue 43): a fault to the first
new batch the next attempt commits, as a user of the job feels it. Faults: `delete` (the active pod
deleted), `kill` (its runtime process SIGKILLed: the container restarts in place) and `freeze` (the
pod's processes frozen with the cgroup freezer, as a node that stops answering; the operator gives
the attempt up after spec.restart.lostAfter and the zombie is thawed afterwards). Variants: `cold`
(a new pod per attempt), `standby` (spec.standby.enabled: the operator promotes the job's standby
pod; skipped when the installed CRD has no such field) and `warm` (a standby with spec.standby.warmup:
it ran the job's query once before its promotion; not in the default run). Flink's kill -> records flowing again
(bench/peers/recovery.py) runs in the same run against the cluster's MinIO when `--flink` is given
and Flink is installed (scripts/ensure-flink.sh).

The cluster is $KUBECONFIG's, else the local one, brought up (and down again) as
bench/executor_bench.py does. Every 0.5 s the bench reads the job's pods and each runtime's GET /status (pods are reachable from
the host on the local cluster): `noticed` = the next attempt's pod exists (or the standby's
/status names the new attempt), `restored` = a runtime of the new attempt answers with its restore,
`first batch` = its latestCommittedBatch passed the restored batch.

    python bench/recovery_bench.py                          # 5 faults per case, docs/benchmarks.md
    python bench/recovery_bench.py --faults 2 --faults-kinds delete --no-write
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import time
import urllib.request
import uuid
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO / "e2e"))  # the e2e suite's helpers (kube_helpers, operator_jobs, local.freezer)

import report  # noqa: E402  (bench/ is on sys.path when this runs as a script)

START, END = "<!-- recovery-bench:start -->", "<!-- recovery-bench:end -->"
POLL = 0.5
STANDBY_VARIANTS = ("standby", "warm")  # spec.standby.enabled; `warm` also spec.standby.warmup
CONTROL_PORT = 8080  # operator/kube/builders.py CONTROL_PORT


def runtime_status(pod: Any, token: str | None) -> dict[str, Any] | None:
    """The runtime's GET /status, with the job's control token (the operator's Secret
    `<job>-control-token`: the bench reads it as the operator does)."""
    ip = pod.status.pod_ip if pod.status else None
    if not ip or not token:
        return None
    req = urllib.request.Request(f"http://{ip}:{CONTROL_PORT}/status", headers={"Authorization": f"Bearer {token}"})
    try:
        with urllib.request.urlopen(req, timeout=1.0) as resp:
            return json.loads(resp.read())
    except (OSError, ValueError):
        return None


def restarts(pod: Any) -> int:
    statuses = (pod.status.container_statuses if pod.status else None) or []
    return sum(c.restart_count for c in statuses if c.name == "runtime")


def first_new_batch(doc: dict[str, Any] | None, old_attempt: int, same_pod: bool) -> tuple[bool, bool]:
    """(restored, committed) for one runtime's /status after the fault: a runtime of a newer attempt
    (or, for a process restarted in place, any answer: the old process is dead) that restored and
    then committed a batch past the restored one."""
    if not doc or doc.get("attempt") is None:  # a standby still following, or not answering
        return False, False
    if not same_pod and doc["attempt"] <= old_attempt:
        return False, False
    restore = doc.get("restore")
    if not restore:
        return False, False
    committed = doc.get("latestCommittedBatch")
    return True, committed is not None and committed > (restore.get("batchId") if restore.get("batchId") is not None else -1)


class Case:
    """One job of one variant, faulted `faults` times in a row."""

    def __init__(self, jobs: Any, name: str, variant: str, lost_after: float):
        self.jobs, self.name, self.variant, self.lost_after = jobs, name, variant, lost_after
        self._token: str | None = None

    def token(self) -> str | None:
        if self._token is None:
            import base64

            from kubernetes.client.rest import ApiException
            try:
                secret = self.jobs.core.read_namespaced_secret(f"{self.name}-control-token", self.jobs.namespace)
                self._token = base64.b64decode((secret.data or {})["token"]).decode()
            except (ApiException, KeyError):
                return None
        return self._token

    def active(self) -> tuple[Any, dict[str, Any]]:
        from kube_helpers import wait_for

        def ready():
            st = self.jobs.status(self.name)
            # the attempt's pod: `<job>-<n>`, or a promoted standby's `<job>-<n>-standby`; its runtime says so
            pod, doc = next(((p, d) for p in self.jobs.pods(self.name) if p.metadata.deletion_timestamp is None
                             and (d := runtime_status(p, self.token())) and d.get("attempt") == st.get("attempt")),
                            (None, None))
            ok = doc and doc.get("latestCheckpoint") \
                and doc.get("latestCommittedBatch") is not None and st.get("phase") == "Running"
            if ok and self.variant in STANDBY_VARIANTS:
                sb = st.get("standby") or {}
                ok = bool(sb.get("ready")) and sb.get("behindCheckpoints", 1) == 0
            return (pod, st) if ok else None
        return wait_for(f"{self.name}: an attempt running with a checkpoint", ready, timeout=900, interval=1.0)

    def fault(self, kind: str, timeout: float = 600) -> dict[str, Any]:
        from local.freezer import freeze, pod_cgroup_of_pid, thaw
        from test_operator_recovery import runtime_pid

        pod, st = self.active()
        old_attempt, old_pod, old_restarts = st["attempt"], pod.metadata.name, restarts(pod)
        cg = None
        t0 = time.monotonic()
        if kind == "delete":
            self.jobs.core.delete_namespaced_pod(old_pod, self.jobs.namespace)
        elif kind == "kill":
            pid = runtime_pid(self.jobs.namespace, self.name, pod.metadata.uid)
            assert pid, "no runtime process on this host (not the local cluster's real node)"
            os.kill(pid, 9)
        elif kind == "freeze":
            pid = runtime_pid(self.jobs.namespace, self.name, pod.metadata.uid)
            assert pid, "no runtime process on this host (not the local cluster's real node)"
            cg = pod_cgroup_of_pid(pid, pod.metadata.uid)
            freeze(cg)
        marks: dict[str, float] = {}
        phases: Any = None
        try:
            while "first_batch" not in marks:
                now = time.monotonic() - t0
                if now > timeout:
                    raise TimeoutError(f"{self.name}: no new batch {timeout:.0f} s after a {kind}")
                if (self.jobs.status(self.name).get("attempt") or 0) > old_attempt:
                    marks.setdefault("noticed", now)  # the operator acted: a new pod or a promotion
                for p in self.jobs.pods(self.name):
                    same = p.metadata.name == old_pod
                    if same and (kind != "kill" or restarts(p) <= old_restarts):
                        continue  # the faulted attempt (a killed runtime's answers count once it restarted)
                    doc = runtime_status(p, self.token())
                    restored, committed = first_new_batch(doc, old_attempt, same)
                    if restored:
                        marks.setdefault("restored", now)
                    if committed:
                        marks["first_batch"] = now
                        phases = (doc or {}).get("startPhases")  # where the new runtime's start went
                        break
                time.sleep(POLL)
        finally:
            if cg is not None:
                thaw(cg)
        after = self.jobs.status(self.name)
        return {"variant": self.variant, "fault": kind, "attempt": [old_attempt, after.get("attempt")],
                "lastFailure": (after.get("lastFailure") or {}).get("reason"), **{k: round(v, 2) for k, v in marks.items()},
                "startPhases": phases}


def standby_supported(api_client: Any) -> bool:
    from kubernetes import client

    crd = client.ApiextensionsV1Api(api_client).read_custom_resource_definition("streamingjobs.sparkpoint.dev")
    props = crd.spec.versions[0].schema.open_apiv3_schema.properties["spec"].properties
    return "standby" in props


def run_cases(args: argparse.Namespace) -> list[dict[str, Any]]:
    from kube_helpers import STATE_DIR, OperatorProcess, exists, wait_for
    from kubernetes import client, config
    from operator_jobs import Jobs

    api_client = config.new_client_from_config(config_file=os.environ["KUBECONFIG"])
    core = client.CoreV1Api(api_client)
    store_env = _store_env()
    variants = [v for v in args.variants.split(",") if v not in STANDBY_VARIANTS or standby_supported(api_client)]
    results: list[dict[str, Any]] = []
    for variant in variants:
        ns = f"recovery-bench-{variant}-{uuid.uuid4().hex[:5]}"
        core.create_namespace(client.V1Namespace(metadata=client.V1ObjectMeta(name=ns)))
        wait_for("the default service account", lambda ns=ns: exists(
            lambda: core.read_namespaced_service_account("default", ns)), timeout=60)
        op = OperatorProcess(ns, STATE_DIR / "operator" / f"{ns}.log")
        op.start()
        jobs = Jobs(api_client, ns, store_env)
        over = {"job.args": {"rows_per_batch": args.keys, "keys": args.keys, "window": "1 hour",
                             "watermark": "10 seconds", "payload_bytes": args.payload},
                "spark.resources": {"cpu": "500m", "memory": args.memory}, "spark.shufflePartitions": 4,
                "checkpoint.interval": args.interval, "restart.lostAfter": f"{args.lost_after:g}s",
                "restart.maxRestarts": 100}
        if variant in STANDBY_VARIANTS:  # `warm`: the standby runs the query once before a promotion
            over["standby"] = {"enabled": True, **({"warmup": True} if variant == "warm" else {})}
        jobs.create("rec", **over)
        case = Case(jobs, "rec", variant, args.lost_after)
        try:
            for kind in args.kinds.split(","):
                for i in range(args.faults):
                    r = case.fault(kind)
                    r["round"] = i
                    print(json.dumps(r), flush=True)
                    results.append(r)
        finally:
            try:
                jobs.delete_all(timeout=300)
            finally:
                op.stop()
                core.delete_namespace(ns)
    return results


def _store_env() -> dict[str, str]:
    from kube_helpers import MINIO_INFO

    info = json.loads(MINIO_INFO.read_text())
    from sparkpoint.runtime.store import open_store

    env = {"SPARKPOINT_S3_ENDPOINT": info["endpoint"], "AWS_ACCESS_KEY_ID": info["access_key"],
           "AWS_SECRET_ACCESS_KEY": info["secret_key"]}
    from operator_jobs import BUCKET
    open_store(f"s3://{BUCKET}", env=env).create_bucket()
    return env


def summary(results: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """One row per (fault, variant): the median and range of each mark."""
    rows = []
    for fault in dict.fromkeys(r["fault"] for r in results):
        for variant in dict.fromkeys(r["variant"] for r in results):
            got = [r for r in results if r["fault"] == fault and r["variant"] == variant]
            if not got:
                continue
            row: dict[str, Any] = {"fault": fault, "variant": variant, "n": len(got)}
            for mark in ("noticed", "restored", "first_batch"):
                vals = [r[mark] for r in got if mark in r]
                row[mark] = (statistics.median(vals), min(vals), max(vals)) if vals else None
            rows.append(row)
    return rows


def render(results: list[dict[str, Any]], args: argparse.Namespace, load: str, flink: dict[str, Any] | None) -> str:
    def cell(v: tuple[float, float, float] | None, what: str = "n/a") -> str:
        return f"{v[0]:.1f} ({v[1]:.1f}-{v[2]:.1f})" if v else what
    lines = [START,
             f"Measured {time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime())} at commit `{report.commit()}` through the "
             f"operator (a host process) on the local cluster's real node: the windowed example with {args.keys} keys "
             f"and {args.payload} bytes of payload each in a 1-hour window, Spark local[2] in a pod with "
             f"{args.memory}, 4 shuffle partitions, checkpoints every {args.interval}, restart.lostAfter "
             f"{args.lost_after:g}s; {args.faults} faults per case in a row. Load average (2 cores): {load}. Each "
             "cell: median (min-max) seconds since the fault.", "",
             "| fault | variant | faults | next attempt noticed | restored | first new batch committed |",
             "| --- | --- | ---: | ---: | ---: | ---: |"]
    for row in summary(results):
        lines.append(f"| {row['fault']} | {row['variant']} | {row['n']} | {cell(row['noticed'], 'in place' if row['fault'] == 'kill' else 'n/a')} | "
                     f"{cell(row['restored'])} | {cell(row['first_batch'])} |")
    if flink:
        first = [r["first_new_batch_s"] for r in flink.get("restarts", [])]
        lines += ["", f"Flink in the same run (bench/peers/recovery.py: a MiniCluster SIGKILLed after its first "
                      f"checkpoint to the cluster's MinIO, restarted from it): process start -> records flowing "
                      f"again {', '.join(f'{x:.1f}' for x in first)} s."]
    lines += ["", report.plot("recovery-timeline", "Fault -> first new batch (median s)", lambda ax: _draw(ax, results),
                              size=(7, 0.5 + 0.45 * max(1, len(summary(results))))), END]
    return "\n".join(lines)


def _draw(ax: Any, results: list[dict[str, Any]]) -> None:
    rows = summary(results)
    labels = [f"{r['fault']} / {r['variant']}" for r in rows]
    left = [0.0] * len(rows)
    for mark, color in (("noticed", "#bbbbbb"), ("restored", "#7aa6d6"), ("first_batch", "#2f6db5")):
        vals = [(r[mark][0] if r[mark] else 0.0) for r in rows]
        widths = [max(0.0, v - lft) for v, lft in zip(vals, left, strict=True)]
        ax.barh(labels, widths, left=left, color=color, label=mark.replace("_", " "))
        left = [lft + w for lft, w in zip(left, widths, strict=True)]
    ax.set_xlabel("seconds since the fault")
    ax.legend(fontsize=7, loc="lower right")


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--faults", type=int, default=5)
    p.add_argument("--kinds", default="delete,kill,freeze")
    p.add_argument("--variants", default="cold,standby")
    p.add_argument("--keys", type=int, default=50_000)
    p.add_argument("--payload", type=int, default=256)
    p.add_argument("--memory", default="2Gi")
    p.add_argument("--interval", default="10s")
    p.add_argument("--lost-after", type=float, default=10.0)
    p.add_argument("--flink", action="store_true", help="Flink's kill -> records flowing in the same run")
    p.add_argument("--no-write", action="store_true")
    p.add_argument("--out", type=Path, default=Path("/tmp/recovery-bench.json"))
    p.add_argument("--small", action="store_true", help="2 faults of delete and kill, 5,000 keys (same code paths)")
    args = p.parse_args(argv)
    if args.small:
        args.faults, args.kinds, args.keys = 2, "delete,kill", 5_000
    import signal

    from executor_bench import ensure_cluster

    signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))  # a stopped run still deletes its jobs and namespaces

    started = ensure_cluster()
    if started is None:
        return 0  # ensure_cluster said why
    try:
        results = run_cases(args)
        args.out.write_text(json.dumps({"results": results}, indent=1))  # kept if Flink's part fails
    finally:
        if started:
            import subprocess

            subprocess.run([sys.executable, str(REPO / "e2e" / "local" / "cluster.py"), "down"], check=False)
    flink = _flink(args) if args.flink else None
    args.out.write_text(json.dumps({"results": results, "flink": flink}, indent=1))
    load = f"{os.getloadavg()[0]:.1f} at the end"
    section = render(results, args, load, flink)
    return report.publish(START, END, section, write=not args.no_write)


def _flink(args: argparse.Namespace) -> dict[str, Any] | None:
    import tempfile

    from peers import flink as flink_peer
    from peers import recovery
    from peers.common import Context

    d = flink_peer.flink_dir()
    if d is None:
        print("recovery_bench: Flink is not installed (scripts/ensure-flink.sh); its row is left out", file=sys.stderr)
        return None
    env = _store_env()
    os.environ.update(env)  # peers/recovery.py opens the store from the environment
    from operator_jobs import BUCKET
    ctx = Context(base=Path(tempfile.mkdtemp(prefix="recovery-flink-")), bucket=BUCKET,
                  endpoint=env["SPARKPOINT_S3_ENDPOINT"], env=env)
    job_args = ["--rows", str(args.keys), "--keys", str(args.keys), "--batches", "100000",
                "--payload-bytes", str(args.payload), "--interval", args.interval, "--parallelism", "1"]
    return recovery.flink(ctx, str(d / "venv" / "bin" / "python"), str(d / "plugins"), job_args, "recovery-bench-flink")


if __name__ == "__main__":
    sys.exit(main())
