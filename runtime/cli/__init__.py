"""The `sparkpoint` command: one argparse parser, one module per command group.

Each module in COMMAND_MODULES exposes `register(subparsers)`, which adds its sub-command(s) and
sets `handler=fn(args) -> int` as a default. Adding a command group is one line below.
"""

from __future__ import annotations

import argparse
import importlib
import sys

from sparkpoint import version

from .common import fail, setup_logging

COMMAND_MODULES = [
    "sparkpoint.runtime.cli.checkpoints",
    "sparkpoint.runtime.cli.restore",
    "sparkpoint.runtime.cli.savepoint",
    "sparkpoint.runtime.cli.gc",
    "sparkpoint.runtime.cli.output",
    "sparkpoint.runtime.cli.run",
    "sparkpoint.runtime.cli.executor",
    "sparkpoint.runtime.cli.history",
    "sparkpoint.runtime.cli.hot_volume",
    "sparkpoint.runtime.cli.validate",
]
# Entry points the operator's pods call, not users: they work as before but are left out of the
# top-level help (`sparkpoint executor --help` still describes them).
INTERNAL_COMMANDS = {"executor", "hot-volume"}


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="sparkpoint",
        description="Incremental, durable checkpoints for PySpark Structured Streaming.")
    parser.add_argument("-v", "--verbose", action="count", default=0, help="more logging (JSON lines on stderr)")
    parser.add_argument("--version", action="version", version=f"%(prog)s {version()}",
                        help="print the version and exit")
    sub = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")
    for name in COMMAND_MODULES:
        importlib.import_module(name).register(sub)
    # argparse lists a sub-command in the help through its choices actions only (no public way to hide one)
    sub._choices_actions = [a for a in sub._choices_actions if a.dest not in INTERNAL_COMMANDS]
    return parser


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    setup_logging(args.verbose)
    try:
        return int(args.handler(args) or 0)
    except KeyboardInterrupt:
        return 130
    except BrokenPipeError:  # e.g. `sparkpoint checkpoints show ID | head`
        sys.stderr.close()
        return 0
    except Exception as exc:  # one clear line, non-zero exit; tracebacks only with -vv
        if args.verbose >= 2:
            raise
        return fail(args, exc)


if __name__ == "__main__":
    sys.exit(main())
