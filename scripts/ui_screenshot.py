"""Screenshot Spark's Structured Streaming tab of a running Sparkpoint job with headless Chromium
(Debian's `chromium` package) into docs/img/spark-ui-streaming.png (issue 30).

    .venv/bin/python scripts/ui_screenshot.py [--out docs/img/spark-ui-streaming.png] [--batches 40]

Runs the demo's windowed aggregation with the live UI on (the port the operator would set), waits
for some committed batches, finds the query's statistics page on /StreamingQuery/ and shoots it.
"""

from __future__ import annotations

import argparse
import re
import shutil
import socket
import subprocess
import sys
import tempfile
import urllib.request
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from harness.runtime_job import RuntimeProcess, WindowedJob, committed, wait_until  # noqa: E402
from sparkpoint.runtime.spec.rules import SPARK_UI_PORT_ENV  # noqa: E402


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--out", default=str(REPO / "docs" / "img" / "spark-ui-streaming.png"))
    p.add_argument("--batches", type=int, default=40, help="committed batches before the shot")
    args = p.parse_args()
    chromium = shutil.which("chromium") or shutil.which("chromium-browser")
    if not chromium:
        print("chromium not found: apt-get install chromium", file=sys.stderr)
        return 1
    with tempfile.TemporaryDirectory() as tmp:
        work = Path(tmp)
        job = WindowedJob(name="clicks", rows_per_batch=2000, keys=500, total_batches=100000, trigger="1s",
                          checkpoint_interval="10s")
        port = _free_port()
        proc = RuntimeProcess(job.write(work / "job.yaml", f"file://{work / 'store'}"), work / "pod",
                              work / "run.log", until_batch=None, env={SPARK_UI_PORT_ENV: str(port)}).start()
        try:
            wait_until(lambda: committed(work / "pod") >= args.batches, 900, f"{args.batches} batches", proc)
            with urllib.request.urlopen(f"http://127.0.0.1:{port}/StreamingQuery/", timeout=30) as resp:
                page = resp.read().decode(errors="replace")
            found = re.search(r'statistics/?\?id=([0-9a-f-]{36})', page)
            url = (f"http://127.0.0.1:{port}/StreamingQuery/statistics/?id={found.group(1)}" if found
                   else f"http://127.0.0.1:{port}/StreamingQuery/")
            subprocess.run([chromium, "--headless", "--no-sandbox", "--disable-gpu", "--hide-scrollbars",
                            f"--user-data-dir={work / 'chromium'}", "--window-size=1400,1800",
                            "--virtual-time-budget=10000", f"--screenshot={args.out}", url],
                           check=True, timeout=180, capture_output=True)
        finally:
            proc.kill()
    print(f"{url.replace(str(port), 'PORT')} -> {args.out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
