"""Where a run's cores went: CPU seconds by process kind, sampled from /proc.

The rounds compare batch durations on two shared cores, so a setup that makes another process busy
(MinIO receiving uploads, toxiproxy delaying every chunk, the runtime's Python hashing) slows the
JVM's batches without touching them. The sampler reads the cumulative user + system time of the
benchmark's servers and of every process under the run, once a second, so a run's CPU can be cut to
its measured window like its store requests.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from pathlib import Path

from . import store_requests

TICK = os.sysconf("SC_CLK_TCK")
KINDS = ("jvm", "runtime", "minio", "toxiproxy")  # runtime: every other process under the run (Python)


def parse_stat(text: str) -> tuple[str, int, int, float]:
    """comm, ppid, start time (ticks) and utime + stime (s) from /proc/<pid>/stat. comm may hold
    spaces and parentheses, so the fields after it are found from its last ')'."""
    head, _, rest = text.rpartition(")")
    comm = head.partition("(")[2]
    f = rest.split()
    # rest starts at field 3 (state): ppid is field 4, utime 14, stime 15, starttime 22
    return comm, int(f[1]), int(f[19]), (int(f[11]) + int(f[12])) / TICK


def processes(proc: Path = Path("/proc")) -> dict[int, tuple[str, int, int, float]]:
    out = {}
    for d in proc.iterdir():
        if d.name.isdigit():
            try:
                out[int(d.name)] = parse_stat((d / "stat").read_text())
            except (OSError, ValueError, IndexError):  # exited meanwhile
                continue
    return out


def descendants(procs: Mapping[int, tuple[str, int, int, float]], root: int) -> set[int]:
    children: dict[int, list[int]] = {}
    for pid, (_, ppid, _, _) in procs.items():
        children.setdefault(ppid, []).append(pid)
    out, todo = set(), [root]
    while todo:
        for c in children.get(todo.pop(), []):
            if c not in out:
                out.add(c)
                todo.append(c)
    return out


class CpuSampler:
    """Cumulative CPU seconds per kind since the sampler was made. `servers` maps a kind to the pid
    of a long-lived server (MinIO, toxiproxy), counted from its value at the start; every other
    descendant of `root` is counted whole, and keeps its last sampled value once it has exited (up to
    a second of its CPU before it exited is lost)."""

    def __init__(self, servers: Mapping[str, int], root: int | None = None, proc: Path = Path("/proc")) -> None:
        self.servers, self.root, self.proc = dict(servers), root if root is not None else os.getpid(), proc
        procs = processes(proc)
        self.base = {k: procs[pid][3] if pid in procs else 0.0 for k, pid in self.servers.items()}
        self.seen: dict[tuple[int, int], tuple[str, float]] = {}  # (pid, start) -> kind, CPU seconds
        self.last = {k: 0.0 for k in self.servers}
        # Processes that were already under the root before the run (the servers' own children, if
        # any, and anything else) are not the run's.
        self.before = {(pid, procs[pid][2]) for pid in descendants(procs, self.root)}

    def sample(self) -> dict[str, float]:
        procs = processes(self.proc)
        for kind, pid in self.servers.items():
            if pid in procs:
                self.last[kind] = procs[pid][3] - self.base[kind]
        server_pids = set(self.servers.values())
        for pid in descendants(procs, self.root) - server_pids:
            comm, _, start, cpu = procs[pid]
            if (pid, start) not in self.before:
                self.seen[(pid, start)] = ("jvm" if comm == "java" else "runtime", cpu)
        totals = {k: 0.0 for k in KINDS}
        totals.update(self.last)
        for kind, cpu in self.seen.values():
            totals[kind] += cpu
        return totals


def in_window(samples: list[tuple[float, Mapping[str, float]]], start: float, end: float) -> dict[str, float]:
    """CPU seconds per kind spent between two wall times (the run's measured batches)."""
    a, b = store_requests.at(samples, start, KINDS), store_requests.at(samples, end, KINDS)
    return {k: round(max(0.0, b[k] - a[k]), 3) for k in KINDS}
