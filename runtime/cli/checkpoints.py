"""`sparkpoint checkpoints create|list|show|verify`."""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import Any

from sparkpoint.runtime.checkpoint import (
    CheckpointWriter,
    HashCache,
    list_checkpoints,
    load_manifest,
    read_fence,
    verify,
)

from .common import add_common, duration, emit, human_bytes, open_from_args, progress_bar, timestamp

DEFAULT_REUSE_WINDOW = 300.0


def register(sub: argparse._SubParsersAction) -> None:
    group = sub.add_parser("checkpoints", help="take, list, show and verify checkpoints")
    cmds = group.add_subparsers(dest="checkpoints_command", required=True, metavar="ACTION")

    create = cmds.add_parser("create", help="checkpoint any directory (incremental)")
    add_common(create)
    create.add_argument("--from", dest="source", required=True, help="directory to checkpoint")
    create.add_argument("--batch-id", type=int, default=None, help="Spark batch id to record")
    create.add_argument("--job-uid", default="cli", help="job uid to record in the manifest")
    create.add_argument("--hash-cache", default=None, help="persist the hash cache in this file")
    create.add_argument("--workers", type=int, default=8, help="parallel uploads")
    create.add_argument("--reuse-window", type=duration, default=DEFAULT_REUSE_WINDOW,
                        help="reuse objects no checkpoint references only if younger than this (default "
                             "5m; 0s: never). Recorded in the store: `gc` then needs a grace of at least "
                             "twice the largest window")
    create.set_defaults(handler=cmd_create)

    ls = cmds.add_parser("list", help="completed checkpoints, oldest first")
    add_common(ls)
    ls.set_defaults(handler=cmd_list)

    show = cmds.add_parser("show", help="print a checkpoint manifest")
    add_common(show)
    show.add_argument("id")
    show.set_defaults(handler=cmd_show)

    ver = cmds.add_parser("verify", help="check every object exists and its sha256 and crc32 match (exit 1 if not)")
    add_common(ver)
    ver.add_argument("id")
    ver.add_argument("--quick", action="store_true", help="existence and size only, no download")
    ver.set_defaults(handler=cmd_verify)


def cmd_create(args: argparse.Namespace) -> int:
    store, job = open_from_args(args, writes=True)
    source = Path(args.source)
    total = sum(p.stat().st_size for p in source.rglob("*") if p.is_file()) if source.is_dir() else 0
    writer = CheckpointWriter(store, job, attempt=read_fence(store, job), job_uid=args.job_uid,
                              hash_cache=HashCache(args.hash_cache), upload_workers=args.workers,
                              reuse_window_seconds=args.reuse_window)
    update, close = progress_bar(args, total, "upload")
    try:
        res = writer.take_checkpoint(source, batch_id=args.batch_id, progress=update)
    finally:
        close()
    emit(args, res.summary(), lambda: (
        f"{res.id}: {res.files} files, {human_bytes(res.bytes)}; uploaded {res.uploaded_objects} objects "
        f"({human_bytes(res.new_bytes)}), reused {human_bytes(res.reused_bytes)} in {res.total_seconds:.2f}s"))
    return 0


def cmd_list(args: argparse.Namespace) -> int:
    store, job = open_from_args(args)
    manifests = list_checkpoints(store, job)
    rows: list[dict[str, Any]] = [{"id": m.id, "batch_id": m.batch_id, "attempt": m.attempt, "files": m.totals.files,
             "bytes": m.totals.bytes, "new_bytes": m.totals.new_bytes, "completion_time": m.completion_time}
            for m in manifests]

    def table() -> str:
        if not rows:
            return f"no checkpoints for {job}"
        lines = [f"{'ID':<12} {'BATCH':>6} {'FILES':>6} {'BYTES':>10} {'NEW':>10}  COMPLETED"]
        lines += [f"{r['id']:<12} {r['batch_id'] if r['batch_id'] is not None else '-':>6} {r['files']:>6} "
                  f"{human_bytes(r['bytes']):>10} {human_bytes(r['new_bytes']):>10}  "
                  f"{timestamp(r['completion_time'])}" for r in rows]
        return "\n".join(lines)
    emit(args, rows, table)
    return 0


def cmd_show(args: argparse.Namespace) -> int:
    store, job = open_from_args(args)
    manifest = load_manifest(store, job, args.id)
    emit(args, manifest, lambda: manifest.model_dump_json(indent=2))
    return 0


def cmd_verify(args: argparse.Namespace) -> int:
    store, job = open_from_args(args)
    res = verify(store, job, args.id, deep=not args.quick)
    emit(args, {"id": res.id, "ok": res.ok, "objects": res.objects, "bytes": res.bytes, "problems": res.problems},
         lambda: f"{res.id}: OK, {res.objects} objects verified" if res.ok
         else "\n".join([f"{res.id}: {len(res.problems)} problem(s)", *res.problems]))
    return 0 if res.ok else 1
