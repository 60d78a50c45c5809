"""`sparkpoint gc --retain N --grace DURATION [--once] [--dry-run]`; without --once, the sidecar loop.

Each pass collects checkpoint data first, then the sinks' output garbage (sink/output_gc.py), which
keeps what the checkpoints the first part left still need, and for a delta sink what its table
still needs within `--delta-retention` (sink/delta_vacuum.py): the pass is the table's vacuum; with
--history-retain also the Spark event logs of old attempts (checkpoint/history_gc.py)."""

from __future__ import annotations

import argparse
import json
import os
import signal
import sys
import threading

from sparkpoint.runtime.checkpoint import gc_pass
from sparkpoint.runtime.checkpoint.gc_loop import PinsFile, record, record_output, run_loop
from sparkpoint.runtime.checkpoint.history_gc import history_gc_pass
from sparkpoint.runtime.sink.delta_vacuum import DEFAULT_RETENTION_SECONDS
from sparkpoint.runtime.sink.output_gc import output_gc_pass

from .common import add_common, duration, emit, human_bytes, open_from_args


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("gc", help="delete checkpoints beyond retention and unreferenced objects")
    add_common(p)
    p.add_argument("--retain", type=int, required=True, help="completed checkpoints to keep (>= 1)")
    p.add_argument("--grace", type=duration, required=True,
                   help="never delete an unreferenced object younger than this (e.g. 10m)")
    p.add_argument("--pending-timeout", type=duration, default=3600.0,
                   help="pending markers older than this are abandoned (default 1h)")
    p.add_argument("--delta-retention", type=duration, default=DEFAULT_RETENTION_SECONDS,
                   help="a delta sink's table keeps files a commit removed for this long (default 168h)")
    p.add_argument("--pin", action="append", default=[], help="checkpoint id to keep regardless (repeatable)")
    p.add_argument("--pins-file", default=None,
                   help="a JSON list of more checkpoint ids to keep, read again at every pass (the operator's)")
    p.add_argument("--history-retain", type=int, default=None,
                   help="keep the event logs (history/) of this many newest attempts and the current one "
                        "(>= 1; default: history/ is not collected)")
    p.add_argument("--once", action="store_true", help="one pass, then exit")
    p.add_argument("--dry-run", action="store_true", help="report what would be deleted, delete nothing")
    p.add_argument("--interval", type=duration, default=60.0, help="time between passes in loop mode")
    p.add_argument("--metrics-port", type=int, default=None, help="serve Prometheus metrics (loop mode)")
    p.set_defaults(handler=cmd_gc)


def _summary(r, out, hist) -> dict:  # type: ignore[no-untyped-def]
    d = r.to_dict()
    d["deleted_manifests"] = list(r.deleted_manifests)
    d["output"] = out.to_dict()
    if hist is not None:
        d["history"] = hist.to_dict()
    return d


def _history(store, job, args):  # type: ignore[no-untyped-def]
    if args.history_retain is None:
        return None
    return history_gc_pass(store, job, retain_attempts=args.history_retain, grace_seconds=args.grace,
                           dry_run=args.dry_run)


def _history_text(hist) -> str:  # type: ignore[no-untyped-def]
    if hist is None:
        return ""
    return (f"; history: kept attempts {hist.kept_attempts}, deleted {hist.deleted_files} files "
            f"({human_bytes(hist.deleted_bytes)})")


def _output_text(out) -> str:  # type: ignore[no-untyped-def]
    return (f"; output: {len(out.deleted_entries)} entries, {out.deleted_files} files "
            f"({human_bytes(out.deleted_bytes)}), live {human_bytes(out.live_bytes)}")


def cmd_gc(args: argparse.Namespace) -> int:
    # A delta path's full pass reads the log's checkpoint with pyarrow (sink/delta_log_read.py): its
    # default jemalloc pool costs this process about 10 MiB more peak RSS than the system allocator.
    os.environ.setdefault("ARROW_DEFAULT_MEMORY_POOL", "system")
    if args.history_retain is not None and args.history_retain < 1:
        raise ValueError("--history-retain must be at least 1 (the current attempt's log is always kept)")
    store, job = open_from_args(args)
    options = dict(retain=args.retain, grace_seconds=args.grace,
                   pending_timeout_seconds=args.pending_timeout, dry_run=args.dry_run)
    if args.once:
        r = gc_pass(store, job, pins=[*args.pin, *PinsFile(args.pins_file)()], **options)
        record(job, r)
        out = output_gc_pass(store, job, grace_seconds=args.grace, dry_run=args.dry_run,
                             delta_retention_seconds=args.delta_retention)
        record_output(job, out)
        hist = _history(store, job, args)
        emit(args, _summary(r, out, hist), lambda: (
            f"{'would delete' if r.dry_run else 'deleted'} {len(r.deleted_manifests)} manifests, "
            f"{r.deleted_objects} objects ({human_bytes(r.deleted_bytes)}); kept {len(r.kept_checkpoints)} "
            f"checkpoints, live {human_bytes(r.live_bytes)}, orphan {human_bytes(r.orphan_bytes)}"
            + _output_text(out) + _history_text(hist)))
        return 0
    if args.metrics_port:
        from prometheus_client import start_http_server

        # The pod's own address, as the runtime's control API: pods that share the host's network
        # (the local cluster) then never contend for the port. GC goes on without its metrics
        # rather than crash-loop (a crash-looping sidecar keeps the job's pod from being Ready).
        try:
            start_http_server(args.metrics_port, addr=os.environ.get("POD_IP", "0.0.0.0"))
        except OSError as exc:
            print(json.dumps({"warning": f"gc metrics not served on port {args.metrics_port}: {exc}"}),
                  file=sys.stderr, flush=True)
    pins_file = PinsFile(args.pins_file)
    stop = threading.Event()
    for sig in (signal.SIGTERM, signal.SIGINT):
        signal.signal(sig, lambda *_: stop.set())

    def report(r) -> None:  # type: ignore[no-untyped-def]
        # Inside the loop's error handling: a failed output pass is logged and counted like a failed pass.
        out = output_gc_pass(store, job, grace_seconds=args.grace, dry_run=args.dry_run,
                             delta_retention_seconds=args.delta_retention)
        record_output(job, out)
        hist = _history(store, job, args)
        print(json.dumps(_summary(r, out, hist)) if args.json else
              f"gc: deleted {r.deleted_objects} objects ({human_bytes(r.deleted_bytes)})" + _output_text(out)
              + _history_text(hist), flush=True)
    run_loop(store, job, interval_seconds=args.interval, stop=stop, on_result=report,
             pins=lambda: [*args.pin, *pins_file()], **options)
    return 0
