"""`sparkpoint executor`: the entry of an executor pod that Spark's Kubernetes backend starts from
the job's image (container args `executor`); runtime/spark/executor_entry.py does the work."""

from __future__ import annotations

import argparse


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("executor", help="run a Spark executor in a pod started by Spark's Kubernetes backend "
                                        "(configured by its environment)")
    p.set_defaults(handler=cmd_executor)


def cmd_executor(args: argparse.Namespace) -> int:
    from sparkpoint.runtime.spark.executor_entry import run_executor  # only now: other commands need no Spark

    return run_executor()
