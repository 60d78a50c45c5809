"""`sparkpoint output read|files`: what the transactional sink committed (docs/design.md §6).

`read` prints exactly the committed rows, in batch order, one JSON object per line after a `#`
summary line (streamed: the output may be far larger than memory); `--json` prints one document
{"path", "head", "batches", "rows"} instead, for scripts (bound it with --limit). `files` lists the
committed store objects per batch, for tools that read Parquet themselves.
"""

from __future__ import annotations

import argparse
import itertools
import json
from typing import Any

from sparkpoint.runtime.sink.history_stream import HistoryStream
from sparkpoint.runtime.sink.lineage import head_checkpoint
from sparkpoint.runtime.sink.reader import as_file, committed_files, committed_history, iter_committed

from .common import add_common, emit, open_from_args


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("output", help="read what the transactional sink committed")
    commands = p.add_subparsers(dest="output_command", required=True, metavar="COMMAND")
    read = commands.add_parser("read", help="the committed rows, in batch order")
    files = commands.add_parser("files", help="the committed files per batch (store keys)")
    for parser in (read, files):
        add_common(parser)
        parser.add_argument("--path", default="default", help="the sink's job.sink.path (default: default)")
    read.add_argument("--limit", type=int, default=None, help="at most this many rows")
    read.set_defaults(handler=cmd_read)
    files.set_defaults(handler=cmd_files)


def _summary(store, job, path: str) -> dict[str, Any]:  # type: ignore[no-untyped-def]
    head, entries = committed_history(store, job, path)  # one walk for the summary and the rows
    batches = committed_files(store, job, path, entries)
    return {"path": path, "head": head_checkpoint(head), "batches": batches,
            "rows_committed": sum(int(b.get("rows") or 0) for b in batches)}


def cmd_read(args: argparse.Namespace) -> int:
    store, job = open_from_args(args)
    if args.json:  # the document lists every batch: it holds them
        summary = _summary(store, job, args.path)
        rows = itertools.islice(iter_committed(store, job, args.path, summary["batches"]), args.limit)
        print(json.dumps({**summary, "rows": list(rows)}))
        return 0
    history = HistoryStream(store, job, args.path)  # the rows streamed: memory of a segment, not the history
    s = history.summary
    span = f"batches {s.first}..{s.last}" if s.batches else "no batches"
    print(f"# {job} output {args.path!r}: {s.batches} committed ({span}), {s.rows} rows, head {s.head}", flush=True)
    files = (as_file(item) for item in history.items())
    for row in itertools.islice(iter_committed(store, job, args.path, files), args.limit):
        print(json.dumps(row, sort_keys=True))
    return 0


def cmd_files(args: argparse.Namespace) -> int:
    store, job = open_from_args(args)
    summary = _summary(store, job, args.path)
    emit(args, summary, lambda: "\n".join(
        f"batch {b['batch']}{'..' + str(b['lastBatch']) if 'lastBatch' in b else ''}: {b['rows']} rows, "
        f"{b['format']}: {' '.join(b['keys'])}" for b in summary["batches"])
        or "no committed output")
    return 0
