"""`sparkpoint history sync [--job NS/NAME ...] --dest DIR [--once]`: mirror jobs' Spark event
logs from the store into the directory Spark's History Server reads (service/history_sync.py; the
chart's History Server runs it as a sidecar). `sparkpoint history server --log-dir DIR`: Spark's
History Server over that directory (spark/history_server.py)."""

from __future__ import annotations

import argparse
import json
import signal
import threading
from pathlib import Path

from sparkpoint.runtime.service.history_sync import HistoryMirror
from sparkpoint.runtime.store import JobRef, StoreError, open_store

from .common import add_common, duration


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("history", help="Spark event logs for the History Server")
    group = p.add_subparsers(dest="history_command", required=True, metavar="SUBCOMMAND")
    s = group.add_parser("sync", help="mirror jobs' event logs (history/) into a local directory")
    add_common(s, job=False)
    s.add_argument("--job", action="append", help="NAMESPACE/NAME (repeatable); none: every job of the store, "
                                                   "found again at each pass")
    s.add_argument("--dest", required=True, help="the History Server's spark.history.fs.logDirectory")
    s.add_argument("--interval", type=duration, default=30.0, help="time between syncs (default 30s)")
    s.add_argument("--once", action="store_true", help="one sync, then exit")
    s.set_defaults(handler=cmd_sync)
    h = group.add_parser("server", help="run Spark's History Server over a local log directory")
    h.add_argument("--log-dir", required=True, help="the directory `history sync --dest` fills")
    h.add_argument("--port", type=int, default=18080, help="UI and REST API port (default 18080)")
    h.add_argument("--heap", default="512m", help="the JVM's -Xmx (default 512m)")
    h.set_defaults(handler=cmd_server)


def cmd_sync(args: argparse.Namespace) -> int:
    if not args.store:
        raise StoreError("no store given: use --store s3://bucket/prefix or file:///path (or $SPARKPOINT_STORE)")
    jobs = [JobRef.parse(j) for j in args.job] if args.job else None
    mirror = HistoryMirror(open_store(args.store), jobs, Path(args.dest))
    stop = threading.Event()
    if not args.once:
        for sig in (signal.SIGTERM, signal.SIGINT):
            signal.signal(sig, lambda *_: stop.set())
    while True:
        r = mirror.sync()
        print(json.dumps({"downloaded": r.downloaded, "downloadedBytes": r.downloaded_bytes, "removed": r.removed,
                          "jobs": r.jobs, "applications": r.applications, "errors": r.errors}), flush=True)
        if args.once:
            return 1 if r.errors else 0
        if stop.wait(args.interval):
            return 0


def cmd_server(args: argparse.Namespace) -> int:
    from sparkpoint.runtime.spark.history_server import run

    return run(args.log_dir, args.port, args.heap)
