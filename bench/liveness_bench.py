"""The operator's liveness poll (operator/liveness_poll.py, issue 43) without a cluster: how soon a frozen
runtime is given up, and what the poll costs the operator's process.

    python bench/liveness_bench.py notice --lost-after 10 --trials 5
    python bench/liveness_bench.py cost --jobs 1000 --period 5 --seconds 30

`notice`: the operator's own Reconciler, its poll and machine.decide against a real HTTP server process
(the stand-in runtime below) frozen with SIGSTOP at a random moment of a round's wait; each round decides
as reconcile does and sleeps what the decision says. Prints freeze -> first unanswered request sent and
freeze -> AttemptLost. `cost`: that many jobs' loops in LivenessPoll.wait at once, each polling one
stand-in server every `period` seconds and nothing else (the worst case: no triggers restart the
period); prints polls a second and the process's CPU per poll. Results go to stdout only; the numbers in
docs/benchmarks.md ("Noticing a frozen runtime") were written by hand from them.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import random
import signal
import socket
import subprocess
import sys
import time
from typing import Any

from sparkpoint.operator.decisions.liveness import of_pod, poll_period
from sparkpoint.operator.decisions.machine import decide, spec_key
from sparkpoint.operator.decisions.model import Emit, Observed, PodObs
from sparkpoint.operator.liveness_poll import Target
from sparkpoint.operator.reconcile import Reconciler
from sparkpoint.operator.runtime_client import RuntimeClient
from sparkpoint.runtime.spec import parse_spec

SERVER = """
import http.server, sys
class H(http.server.BaseHTTPRequestHandler):
    def do_GET(self):
        body = b'{"status": "ok", "phase": "running"}'
        self.send_response(200); self.send_header("Content-Length", str(len(body))); self.end_headers()
        self.wfile.write(body)
    def log_message(self, *a): pass
s = http.server.ThreadingHTTPServer(("127.0.0.1", int(sys.argv[1])), H)
print("up", flush=True)
s.serve_forever()
"""
KEY = ("bench", "job")
POD = PodObs(name="job-1", attempt=1, phase="Running", ready=True, ip="127.0.0.1")


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def server(port: int) -> subprocess.Popen[bytes]:
    proc = subprocess.Popen([sys.executable, "-c", SERVER, str(port)], stdout=subprocess.PIPE)
    assert proc.stdout is not None and proc.stdout.readline().strip() == b"up"
    return proc


async def notice_once(lost_after: float, interval: float) -> tuple[float, float, float]:
    spec = parse_spec({"job": {"entrypoint": "m:f"}, "checkpoint": {"interval": f"{interval:g}s"},
                       "restart": {"lostAfter": f"{lost_after:g}s"}})
    now = time.time()
    status: dict[str, Any] = {"phase": "Running", "attempt": 1, "pod": "job-1", "tracking": {
        "runningSince": now, "podSeen": True, "podReady": True, "stableSpec": spec_key(spec), "lastTriggerAt": now}}
    port = free_port()
    proc = server(port)
    rec = Reconciler(kube=None, client=RuntimeClient(timeout=5.0), metrics=None, post_event=None)  # type: ignore[arg-type]
    rec.poll.aim(KEY, Target(POD.name, f"http://127.0.0.1:{port}", poll_period(lost_after)))
    rec._note_liveness(KEY, POD.name, None)  # the last round's answer
    frozen: list[float] = []
    asyncio.get_running_loop().call_later(random.uniform(0, interval), lambda: (
        os.kill(proc.pid, signal.SIGSTOP), frozen.append(time.time())))
    try:
        delay = interval  # until the next checkpoint trigger's round
        while True:
            await rec.poll.wait(KEY, asyncio.Event(), None, delay)
            live = of_pod(rec._liveness.get(KEY), POD.name)
            d = decide(Observed(spec=spec, generation=1, status=status, pods=[POD], now=time.time(), name="job",
                                runtime_silent_since=live.silent_since if live else None,
                                runtime_unreachable_since=live.unreachable_since if live else None))
            if any(isinstance(a, Emit) and a.reason == "AttemptLost" for a in d.actions):
                assert live is not None and live.silent_since is not None
                return frozen[0], live.silent_since, time.time()
            delay = d.requeue_after
    finally:
        await rec.client.close()
        os.kill(proc.pid, signal.SIGCONT)
        proc.kill()
        proc.wait()


async def cost(jobs: int, period: float, seconds: float) -> None:
    port = free_port()
    proc = server(port)
    rec = Reconciler(kube=None, client=RuntimeClient(timeout=5.0), metrics=None, post_event=None)  # type: ignore[arg-type]

    async def job(i: int) -> None:
        key = ("bench", f"job-{i}")
        rec.poll.aim(key, Target(POD.name, f"http://127.0.0.1:{port}", period))
        await asyncio.sleep(period * i / jobs)  # spread as the jobs' loops would be
        end = time.monotonic() + seconds
        while (left := end - time.monotonic()) > 0:
            await rec.poll.wait(key, asyncio.Event(), None, left)
    try:
        cpu0, t0 = time.process_time(), time.perf_counter()
        await asyncio.gather(*(job(i) for i in range(jobs)))
        cpu, wall = time.process_time() - cpu0, time.perf_counter() - t0
    finally:
        await rec.client.close()
        proc.kill()
        proc.wait()
    print(f"{jobs} jobs polled every {period:g} s for {wall:.0f} s: {rec.poll.polls / wall:.0f} polls/s, "
          f"{cpu / wall:.3f} cores, {cpu / max(1, rec.poll.polls) * 1e3:.3f} ms CPU per poll; "
          f"load {os.getloadavg()[0]:.1f}")


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    sub = p.add_subparsers(dest="what", required=True)
    n = sub.add_parser("notice")
    n.add_argument("--lost-after", type=float, default=10.0)
    n.add_argument("--interval", type=float, default=10.0, help="the job's checkpoint interval (s)")
    n.add_argument("--trials", type=int, default=5)
    c = sub.add_parser("cost")
    c.add_argument("--jobs", type=int, default=1000)
    c.add_argument("--period", type=float, default=5.0)
    c.add_argument("--seconds", type=float, default=30.0)
    args = p.parse_args(argv)
    if args.what == "cost":
        asyncio.run(cost(args.jobs, args.period, args.seconds))
        return 0
    for _ in range(args.trials):
        frozen, since, lost = asyncio.run(notice_once(args.lost_after, args.interval))
        print(f"lostAfter {args.lost_after:g}s: freeze -> first unanswered request sent {since - frozen:.2f} s, "
              f"-> given up {lost - frozen:.2f} s; load {os.getloadavg()[0]:.1f}", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
