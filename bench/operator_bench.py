"""Operator load benchmark: N StreamingJobs against stand-in runtimes on the local cluster.

One asyncio process plays the kubelet of a fake Node (bench/operator_load/fake_kubelet.py) and the
control API of every pod bound to it, each on its own 127.3.x.y address; the real node agent's
node is cordoned meanwhile, so the scheduler puts every job pod on the fake node. The operator
(`sparkpoint-operator --namespace <ns>`) runs as its own process; its CPU and RSS
come from /proc. Per scale: trigger lag (POST /checkpoints arrival minus one interval after the
previous trigger of that pod), operator CPU and RSS, and the time from a pod deletion to the
operator's next attempt.

    python bench/operator_bench.py                    # 100, 300, 1000 jobs (about 40 min on 2 cores)
    python bench/operator_bench.py --small            # 30 jobs, short window (a few minutes)
    python bench/operator_bench.py --jobs 100,300 --window 120

Brings the local cluster up if it is not (and down again afterwards); results go into the
operator-load section of docs/benchmarks.md and docs/img/operator-load.png, raw numbers into
<cluster state>/operator-load/.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import logging
import subprocess
import sys
import time
from dataclasses import replace
from pathlib import Path

import report  # bench/report.py (bench/ is on sys.path when this runs as a script)
import yaml
from operator_load import jobs, report_md, scenario
from operator_load.kubeapi import ApiError, KubeApi

from harness.polling import wait_until_async

REPO = Path(__file__).resolve().parents[1]
CLUSTER = [sys.executable, str(REPO / "e2e" / "local" / "cluster.py")]
STATE = REPO / "e2e" / "local" / ".state"
REAL_NODE = "sparkpoint-node"
log = logging.getLogger("operator-load")


def ensure_cluster() -> bool:
    """Bring the local cluster up; True if this call started it (so it is stopped again)."""
    was_up = subprocess.run([*CLUSTER, "status"], capture_output=True).returncode == 0
    if not was_up:
        subprocess.run([str(REPO / "e2e" / "local" / "build.sh")], check=True, stdout=subprocess.DEVNULL)
        subprocess.run([*CLUSTER, "up"], check=True, stdout=subprocess.DEVNULL)
    return not was_up


async def install_crds(api: KubeApi) -> None:
    path = "/apis/apiextensions.k8s.io/v1/customresourcedefinitions"
    # crds/ holds kopf's peering CRDs too: without them kopf pauses every watch (even --standalone).
    for crd_file in sorted((REPO / "crds").glob("*.yaml")):
        for doc in yaml.safe_load_all(crd_file.read_text()):
            if doc:
                await api.create(path, doc)

    async def established() -> bool:
        try:
            crd = await api.get(f"{path}/streamingjobs.sparkpoint.dev")
        except ApiError:
            return False
        return any(c["type"] == "Established" and c["status"] == "True"
                   for c in (crd.get("status") or {}).get("conditions") or [])
    if not await wait_until_async(established, timeout=60):
        raise SystemExit("the StreamingJob CRD did not become Established")


def ensure_bucket(store: dict[str, str]) -> None:
    from minio import Minio

    endpoint = store["endpoint"].removeprefix("http://")
    client = Minio(endpoint, access_key=store["access_key"], secret_key=store["secret_key"], secure=False)
    if not client.bucket_exists(jobs.BUCKET):
        client.make_bucket(jobs.BUCKET)


def cluster_pids() -> list[int]:
    """The API server's and etcd's pids (cluster.py keeps "<pid> <program>" per component)."""
    pids = []
    for name in ("kube-apiserver", "etcd"):
        with contextlib.suppress(FileNotFoundError, ValueError, IndexError):
            pids.append(int((STATE / "pids" / f"{name}.pid").read_text().split()[0]))
    return pids


async def set_unschedulable(api: KubeApi, node: str, value: bool) -> None:
    await api.merge_patch(f"/api/v1/nodes/{node}", {"spec": {"unschedulable": value or None}})


async def run_all(scales: list[int], base: scenario.Settings, out_dir: Path) -> list[dict]:
    api = KubeApi(STATE / "kubeconfig")
    results = []
    try:
        await install_crds(api)
        store = json.loads((STATE / "minio.json").read_text())
        ensure_bucket(store)
        await set_unschedulable(api, REAL_NODE, True)  # every job pod goes to the fake node
        for n in scales:
            namespace = f"sp-load-{n}-{int(time.time()) % 100000}"
            operator = scenario.OperatorProcess(REPO, STATE / "kubeconfig", namespace, metrics_port=19100,
                                                log_file=out_dir / f"operator-{n}.log")
            log.info("scale %d: namespace %s", n, namespace)
            result = await scenario.run(replace(base, jobs=n), api, operator, namespace, store, cluster_pids())
            doc = result.to_json()
            (out_dir / f"result-{n}.json").write_text(json.dumps(doc))
            log.info("scale %d done: %s", n, json.dumps(report_md.summary(doc)))
            results.append(doc)
    finally:
        await set_unschedulable(api, REAL_NODE, False)
        await api.close()
    return results


def write_report(results: list[dict], base: scenario.Settings) -> None:
    commit = subprocess.run(["git", "rev-parse", "--short", "HEAD"], capture_output=True, text=True,
                            cwd=REPO).stdout.strip()
    picture = report.plot("operator-load", "Operator: trigger lag and RSS vs number of jobs",
                          report_md.draw(results))
    section = "\n".join([
        report_md.START,
        "## Operator under load (`bench/operator_bench.py`, `make bench-operator`)",
        "",
        f"Measured {time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime())} at commit `{commit}` on 2 shared cores "
        f"(other work ran meanwhile: see the load averages). Each job: checkpoint interval {base.interval}, "
        f"restart backoff {base.backoff}, storage on the cluster's MinIO; its pod runs on a fake node whose "
        "stand-in runtimes answer the control API at once (checkpoints complete instantly), so the numbers "
        "are the operator's. The steady window starts once all jobs are Running; after it, pods are deleted "
        "one by one (`--small` runs 30 jobs, a 60 s window and 5 deletions).",
        "",
        report_md.table(results),
        "",
        report_md.verdict(results),
        "",
        picture,
        "",
        report_md.END,
    ])
    report.write_section(report_md.START, report_md.END, section)


def main(argv: list[str]) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--jobs", default="100,300,1000", help="comma-separated scales")
    p.add_argument("--window", type=float, default=180.0, help="steady-state seconds measured per scale")
    p.add_argument("--interval", default="10s", help="checkpoint.interval of every job")
    p.add_argument("--deletions", type=int, default=20)
    p.add_argument("--ramp-timeout", type=float, default=None,
                   help="measure after this many seconds even if not every job is Running yet")
    p.add_argument("--small", action="store_true", help="30 jobs, 60 s window")
    p.add_argument("--no-report", action="store_true", help="do not rewrite docs/benchmarks.md")
    p.add_argument("--report-only", action="store_true",
                   help="rewrite the report from the raw results kept by earlier runs (no cluster needed)")
    args = p.parse_args(argv)
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(levelname)s %(message)s")
    scales = [30] if args.small else [int(x) for x in args.jobs.split(",")]
    base = scenario.Settings(jobs=0, interval=args.interval, window=60.0 if args.small else args.window,
                             deletions=5 if args.small else args.deletions, ramp_timeout=args.ramp_timeout)
    out_dir = STATE / "operator-load"
    if args.report_only:
        saved = [json.loads(f.read_text()) for f in out_dir.glob("result-*.json")]
        write_report(sorted(saved, key=lambda r: r["jobs"]), replace(base, window=saved[0]["window_s"]))
        return 0
    started_cluster = ensure_cluster()
    out_dir.mkdir(parents=True, exist_ok=True)
    try:
        results = asyncio.run(run_all(scales, base, out_dir))
    finally:
        if started_cluster:
            subprocess.run([*CLUSTER, "down"], stdout=subprocess.DEVNULL)
    if not args.no_report:
        write_report(results, base)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
