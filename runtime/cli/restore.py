"""`sparkpoint restore --checkpoint ID|--savepoint NAME --to DIR` (default: latest checkpoint)."""

from __future__ import annotations

import argparse

from sparkpoint.runtime.checkpoint import restore
from sparkpoint.runtime.checkpoint.restore import choose_manifest

from .common import add_common, emit, human_bytes, open_from_args, progress_bar


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("restore", help="download and verify a checkpoint or savepoint into a directory")
    add_common(p)
    which = p.add_mutually_exclusive_group()
    which.add_argument("--checkpoint", help="checkpoint id (default: the latest completed)")
    which.add_argument("--savepoint", help="savepoint name")
    p.add_argument("--to", required=True, help="target directory (must be missing or empty)")
    p.add_argument("--workers", type=int, default=8, help="parallel downloads")
    p.set_defaults(handler=cmd_restore)


def cmd_restore(args: argparse.Namespace) -> int:
    store, job = open_from_args(args)
    manifest, _ = choose_manifest(store, job, args.checkpoint, args.savepoint)
    update, close = progress_bar(args, manifest.totals.bytes, "restore")
    try:
        res = restore(store, job, args.to, checkpoint_id=None if args.savepoint else manifest.id,
                      savepoint=args.savepoint, workers=args.workers, progress=update)
    finally:
        close()
    emit(args, {"id": res.manifest.id, "kind": res.manifest.kind, "batch_id": res.manifest.batch_id,
                "files": res.files, "bytes": res.bytes, "seconds": res.seconds, "to": args.to},
         f"restored {res.manifest.kind} {res.manifest.id} ({res.files} files, {human_bytes(res.bytes)}) "
         f"to {args.to} in {res.seconds:.2f}s")
    return 0
