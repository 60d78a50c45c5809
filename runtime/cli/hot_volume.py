"""`sparkpoint hot-volume remove-job --root DIR --namespace NS --job NAME --uid UID`: delete a deleted
StreamingJob's directory from a shared hot volume. The operator's finalizer runs it in a pod that
mounts the volume, once the job's pods are gone (runtime/service/job_dirs.py, docs/design.md §9)."""

from __future__ import annotations

import argparse
import json
from pathlib import Path

# The directory was not there: distinct from "removed" (exit 0) and "something stayed" (exit 1). The
# operator's finalizer reads it from the cleanup pod's exit code (operator/kube/hot_cleanup.py ABSENT_EXIT).
ABSENT_EXIT = 3


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("hot-volume", help="directories of deleted jobs on a shared hot volume")
    verbs = p.add_subparsers(dest="verb", required=True, metavar="VERB")
    rm = verbs.add_parser("remove-job", help="delete <root>/<namespace>/<job>/<uid> (the job must be deleted and "
                                             "its pods gone); exit 1 if something stayed, "
                                             f"{ABSENT_EXIT} if the directory was not there")
    rm.add_argument("--root", required=True, help="where the hot volume is mounted")
    rm.add_argument("--namespace", required=True)
    rm.add_argument("--job", required=True, help="the StreamingJob's name")
    rm.add_argument("--uid", required=True, help="the deleted StreamingJob's uid")
    rm.add_argument("--json", action="store_true", help="print one JSON document on stdout")
    rm.set_defaults(handler=cmd_remove_job)


def cmd_remove_job(args: argparse.Namespace) -> int:
    from sparkpoint.runtime.service.job_dirs import remove_job_dir

    result = remove_job_dir(Path(args.root), args.namespace, args.job, args.uid)
    doc = {"dir": f"{args.namespace}/{args.job}/{args.uid}", **result.to_json()}
    if args.json:
        print(json.dumps(doc))
    elif result.left:
        print(f"left on the volume: {result.left}")
    elif result.absent:
        print(f"not there: {doc['dir']} (nothing removed)")
    else:
        print(f"removed {', '.join(result.removed)}")
    if result.left:
        return 1
    return ABSENT_EXIT if result.absent else 0
