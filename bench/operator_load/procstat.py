"""CPU seconds and memory of a process from /proc (Linux): pure parsers."""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path

TICKS = os.sysconf("SC_CLK_TCK")


@dataclass(frozen=True)
class ProcSample:
    cpu_seconds: float  # user + system, this process only
    rss_bytes: int
    peak_rss_bytes: int  # VmHWM


def parse_stat_cpu(stat: str) -> float:
    """utime + stime of a /proc/<pid>/stat line, in seconds (the command may hold spaces)."""
    fields = stat.rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / TICKS


def parse_status_kib(status: str, key: str) -> int:
    for line in status.splitlines():
        if line.startswith(key + ":"):
            return int(line.split()[1])
    raise ValueError(f"{key} not in /proc status")


def sample(pid: int) -> ProcSample:
    proc = Path(f"/proc/{pid}")
    status = (proc / "status").read_text()
    return ProcSample(parse_stat_cpu((proc / "stat").read_text()), parse_status_kib(status, "VmRSS") * 1024,
                      parse_status_kib(status, "VmHWM") * 1024)


def load_average() -> float:
    return os.getloadavg()[0]


def cpu_of(pids: list[int]) -> float:
    """CPU seconds of these processes together (those that are gone count 0)."""
    total = 0.0
    for pid in pids:
        try:
            total += parse_stat_cpu(Path(f"/proc/{pid}/stat").read_text())
        except (FileNotFoundError, ProcessLookupError):
            continue
    return total
