"""Shared by the benchmarks: each one rewrites its own marked section of docs/benchmarks.md and
draws its plots into docs/img/ (PNG, linked from that section)."""

from __future__ import annotations

import json
import os
import re
import subprocess
from collections.abc import Callable
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[1]
DOC = REPO / "docs" / "benchmarks.md"
IMG = REPO / "docs" / "img"


def write_section(start: str, end: str, section: str, doc: Path = DOC) -> None:
    """Replace the text between the markers (inclusive), or append the section if they are missing."""
    doc.parent.mkdir(parents=True, exist_ok=True)
    text = doc.read_text() if doc.exists() else "# Benchmarks\n\n"
    if start in text and end in text:
        text = re.sub(re.escape(start) + ".*?" + re.escape(end), lambda _: section, text, flags=re.S)
    else:
        text = text.rstrip("\n") + "\n\n" + section + "\n"
    doc.write_text(text)


def plot(name: str, title: str, draw: Callable[[Any], None], size: tuple[float, float] = (7, 3.2)) -> str:
    """Draw with `draw(axes)` into docs/img/<name>.png; return the Markdown that shows it."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    IMG.mkdir(parents=True, exist_ok=True)
    fig, ax = plt.subplots(figsize=size)
    draw(ax)
    ax.set_title(title, fontsize=10)
    fig.tight_layout()
    fig.savefig(IMG / f"{name}.png", dpi=110)
    plt.close(fig)
    return f"![{title}](img/{name}.png)"


def log_events(path: Path, msg: str) -> list[dict[str, Any]]:
    """The runtime's structured log lines with this msg (a benchmark reads its figures from them)."""
    out = []
    for line in path.read_text(errors="replace").splitlines():
        if line.startswith("{") and f'"msg": "{msg}"' in line:
            try:
                out.append(json.loads(line))
            except ValueError:
                continue
    return out


def commit() -> str:
    """The checkout's short commit, which every section names."""
    return subprocess.run(["git", "rev-parse", "--short", "HEAD"], capture_output=True, text=True,
                          cwd=REPO).stdout.strip()


def publish(start: str, end: str, section: str, write: bool = True) -> int:
    """A benchmark's last step: print its section, put it into docs/benchmarks.md unless told not
    to (--no-write); main()'s exit code."""
    print(section)
    if write:
        write_section(start, end, section)
    return 0


def pinned() -> str:
    """Say so when the runs were held to some of the machine's cores (taskset), away from other work."""
    cpus = sorted(os.sched_getaffinity(0))
    return "" if len(cpus) == os.cpu_count() else f" (the runs pinned to CPU {', '.join(map(str, cpus))} with taskset)"
