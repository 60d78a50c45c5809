"""Shared CLI plumbing: store/job options, JSON output, progress bars, JSON-lines logging."""

from __future__ import annotations

import argparse
import json
import logging
import os
import sys
from collections.abc import Callable
from datetime import UTC, datetime
from typing import Any

from sparkpoint.runtime.spec import parse_duration
from sparkpoint.runtime.store import JobRef, ObjectStore, StoreError, open_store

_STD_ATTRS = set(logging.LogRecord("", 0, "", 0, "", None, None).__dict__) | {"message", "asctime"}


class JsonFormatter(logging.Formatter):
    def format(self, record: logging.LogRecord) -> str:
        entry: dict[str, Any] = {"ts": round(record.created, 3), "level": record.levelname.lower(),
                                 "logger": record.name, "msg": record.getMessage()}
        entry.update({k: v for k, v in record.__dict__.items() if k not in _STD_ATTRS})
        if record.exc_info:
            entry["exc"] = self.formatException(record.exc_info)
        return json.dumps(entry, default=str)


def setup_logging(verbosity: int) -> None:
    handler = logging.StreamHandler(sys.stderr)
    handler.setFormatter(JsonFormatter())
    root = logging.getLogger()
    root.handlers[:] = [handler]
    root.setLevel(logging.WARNING if verbosity == 0 else logging.INFO if verbosity == 1 else logging.DEBUG)
    for noisy in ("urllib3", "botocore"):
        logging.getLogger(noisy).setLevel(logging.WARNING)


def add_common(parser: argparse.ArgumentParser, *, job: bool = True) -> None:
    parser.add_argument("--store", default=os.environ.get("SPARKPOINT_STORE"),
                        help="s3://bucket/prefix (endpoint and credentials from the environment) or "
                             "file:///path; default $SPARKPOINT_STORE")
    if job:
        parser.add_argument("--job", default=os.environ.get("SPARKPOINT_JOB"),
                            help="NAMESPACE/NAME; default $SPARKPOINT_JOB")
    parser.add_argument("--json", action="store_true", help="print one JSON document on stdout")
    parser.add_argument("--no-progress", action="store_true", help="no progress bar")


def open_from_args(args: argparse.Namespace, *, writes: bool = False) -> tuple[ObjectStore, JobRef]:
    if not args.store:
        raise StoreError("no store given: use --store s3://bucket/prefix or file:///path (or $SPARKPOINT_STORE)")
    if not getattr(args, "job", None):
        raise ValueError("no job given: use --job NAMESPACE/NAME (or $SPARKPOINT_JOB)")
    job = JobRef.parse(args.job)
    store = open_store(args.store)
    store.check(writes=writes)
    return store, job


def duration(text: str) -> float:
    """argparse type: '30s', '5m', '1h', '250ms', or plain seconds."""
    try:
        return float(text) if text.replace(".", "", 1).isdigit() else parse_duration(text)
    except ValueError as exc:
        raise argparse.ArgumentTypeError(str(exc)) from None


def progress_bar(args: argparse.Namespace, total: int, desc: str) -> tuple[Callable[[int], None], Callable[[], None]]:
    """A byte-counting tqdm bar on stderr (off with --no-progress, --json, or a non-TTY stderr)."""
    # Imported here: importing tqdm (~0.1 s, it reads package metadata) is a third of a CLI start.
    from tqdm import tqdm

    disable = True if (args.no_progress or args.json) else None
    bar = tqdm(total=total, desc=desc, unit="B", unit_scale=True, unit_divisor=1024, disable=disable,
               file=sys.stderr, leave=False)

    def advance(n: int) -> None:
        bar.update(n)

    return advance, bar.close


def timestamp(value: datetime) -> str:
    """A time as the CLI prints it: ISO 8601 in UTC with its Z, to the second. A time without a zone
    (none is written so, but a hand-made manifest may hold one) is taken as UTC, as the runtime writes."""
    aware = value if value.tzinfo is not None else value.replace(tzinfo=UTC)
    return aware.astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def _default(value: Any) -> Any:
    if isinstance(value, datetime):  # --json keeps the fraction; the zone is always there
        return (value if value.tzinfo is not None else value.replace(tzinfo=UTC)).isoformat()
    if hasattr(value, "model_dump"):
        return value.model_dump(mode="json")
    raise TypeError(f"not JSON serialisable: {type(value).__name__}")


def emit(args: argparse.Namespace, data: Any, human: str | Callable[[], str]) -> None:
    if args.json:
        print(json.dumps(data, default=_default, indent=None))
    else:
        print(human() if callable(human) else human)


def fail(args: argparse.Namespace, exc: BaseException) -> int:
    message = str(exc) or type(exc).__name__
    if getattr(args, "json", False):
        print(json.dumps({"error": message, "type": type(exc).__name__}))
    print(f"sparkpoint: error: {message}", file=sys.stderr)
    return 1


def human_bytes(n: float) -> str:
    for unit in ("B", "KiB", "MiB", "GiB"):
        if abs(n) < 1024 or unit == "GiB":
            return f"{n:.0f} {unit}" if unit == "B" else f"{n:.1f} {unit}"
        n /= 1024
    return f"{n:.1f} TiB"
