"""Run the real `sparkpoint` console entry point in a subprocess."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from typing import Any

CLI = [sys.executable, "-m", "sparkpoint.runtime.cli"]


def sparkpoint(*args: str, env: dict[str, str] | None = None, check: bool = True,
               timeout: float = 120) -> subprocess.CompletedProcess[str]:
    proc = subprocess.run([*CLI, *args], capture_output=True, text=True, timeout=timeout,
                          env={**os.environ, **(env or {})})
    if check and proc.returncode != 0:
        raise AssertionError(f"sparkpoint {' '.join(args)} exited {proc.returncode}: {proc.stderr}")
    return proc


def sparkpoint_json(*args: str, **kw: Any) -> Any:
    return json.loads(sparkpoint(*args, "--json", **kw).stdout)
