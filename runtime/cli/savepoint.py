"""`sparkpoint savepoint create|list|delete`."""

from __future__ import annotations

import argparse
from typing import Any

from sparkpoint.runtime.checkpoint import create_savepoint, delete_savepoint, list_savepoints

from .common import add_common, emit, human_bytes, open_from_args, timestamp


def register(sub: argparse._SubParsersAction) -> None:
    group = sub.add_parser("savepoint", help="self-contained copies that GC never deletes")
    cmds = group.add_subparsers(dest="savepoint_command", required=True, metavar="ACTION")

    create = cmds.add_parser("create", help="copy a checkpoint (default: the latest) into a savepoint")
    add_common(create)
    create.add_argument("name")
    create.add_argument("--checkpoint", help="checkpoint id to copy")
    create.set_defaults(handler=cmd_create)

    ls = cmds.add_parser("list", help="savepoints, oldest first")
    add_common(ls)
    ls.set_defaults(handler=cmd_list)

    delete = cmds.add_parser("delete", help="delete a savepoint and its objects")
    add_common(delete)
    delete.add_argument("name")
    delete.set_defaults(handler=cmd_delete)


def cmd_create(args: argparse.Namespace) -> int:
    store, job = open_from_args(args, writes=True)
    m = create_savepoint(store, job, args.name, args.checkpoint)
    emit(args, {"name": m.id, "source_checkpoint": m.source_checkpoint, "batch_id": m.batch_id,
                "files": m.totals.files, "bytes": m.totals.bytes},
         f"savepoint {m.id} created from {m.source_checkpoint} ({m.totals.files} files, "
         f"{human_bytes(m.totals.bytes)})")
    return 0


def cmd_list(args: argparse.Namespace) -> int:
    store, job = open_from_args(args)
    rows: list[dict[str, Any]] = [{"name": m.id, "source_checkpoint": m.source_checkpoint, "batch_id": m.batch_id,
             "files": m.totals.files, "bytes": m.totals.bytes, "created": m.completion_time}
            for m in list_savepoints(store, job)]
    emit(args, rows, lambda: "\n".join(
        f"{r['name']:<24} {r['source_checkpoint']:<12} {human_bytes(r['bytes']):>10}  {timestamp(r['created'])}"
        for r in rows) or f"no savepoints for {job}")
    return 0


def cmd_delete(args: argparse.Namespace) -> int:
    store, job = open_from_args(args)
    deleted = delete_savepoint(store, job, args.name)
    emit(args, {"name": args.name, "deleted_keys": deleted}, f"savepoint {args.name} deleted")
    return 0
