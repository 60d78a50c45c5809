"""Least-privilege S3/MinIO policies for one job (issue 11; docs/security.md), as pure functions.

A job's keys live under <prefix>/<namespace>/<job>/ (layout.py). Roles:
  runtime  list, read and write the job's keys; delete only its own pending markers (pending/*),
           which a checkpoint removes once its manifest is committed; never checkpoint data
  gc       list, read and delete the job's keys; write only output GC's cursors
           (outputs/_gc-cursors.json, docs/design.md §7)
  job      runtime + gc in one credential (when spec.checkpoint.storage.secretRef is the only
           Secret; with spec.gc.secretRef the runtime gets `runtime`, the GC sidecar and the
           operator's deletions `gc`)
  history  list and read the job's Spark event logs (history/*) only: the chart's History Server
           mirror (`sparkpoint history sync`); one statement set per job it shows
  executor an executor uploading its own partitions' state and sink parts (issue 42; not given to
           any pod yet): list objects/, read objects/ and savepoints' object copies, write objects/
           and the sinks' staged batch folders (outputs/<path>/staging/attempt-<A>/batch-*); nothing
           else: no delete, no manifest, pending marker, fence, attempt claim, commit entry, snapshot,
           compaction record, Delta log, upsert marker or GC cursor. `*` matching '/' would let the
           staging grant reach the areas of a sink path nested inside a staging folder
           (`a/staging/attempt-1/batch-2`'s `_commits/`): explicit Deny statements refuse every
           output area below a `staging/attempt-` segment (`EXECUTOR_DENIED_AREAS`).
And one for the whole store (`store_history_policy`, the CLI without a job): the History Server mirror
that finds the jobs itself (`sparkpoint history sync` without --job): names one level down at any
depth (delimiter listings: namespaces, jobs) and list/read of `<prefix>/*/*/history/*`. IAM's `*`
also matches '/', so that pattern also admits any deeper key with a `/history/` segment (an output
path or a savepoint named `history`): name the jobs and combine per-job `history` policies where that
matters.
Shared by every job: list the store prefix's top level (the store's reachability probe; shows
namespace names only) and the conditional-write probe key <prefix>/.sparkpoint-check/*.

  python -m sparkpoint.runtime.store.access_policy s3://bucket/prefix NAMESPACE/JOB --role runtime
prints the policy JSON, for `mc admin policy create` or MinioAdmin.policy_add.
"""

from __future__ import annotations

import argparse
import json
from typing import Any

from .layout import JobRef

ROLES = ("runtime", "gc", "job", "history", "executor")
PROBE_DIR = ".sparkpoint-check"
# A sink path's areas besides staging/ (the sinks' keys.py, lineage, history, compaction, delta and
# upsert modules; output_gc's area list, which a test keeps this in step with). An executor writes none.
EXECUTOR_DENIED_AREAS = ("_commits", "_snapshots", "_compactions", "_delta_log", "upserts", "_gc")


def _join(*parts: str) -> str:
    return "/".join(p.strip("/") for p in parts if p.strip("/"))


def job_policy(bucket: str, prefix: str, job: JobRef, role: str) -> dict[str, Any]:
    if role not in ROLES:
        raise ValueError(f"role must be one of {ROLES}, not {role!r}")
    root = _join(prefix, job.root)
    top = _join(prefix)
    if role == "history":
        return {"Version": "2012-10-17", "Statement": [
            {"Sid": "ListTheJobsEventLogs", "Effect": "Allow", "Action": ["s3:ListBucket"],
             "Resource": [f"arn:aws:s3:::{bucket}"], "Condition": {"StringLike": {"s3:prefix": [f"{root}/history/*"]}}},
            {"Sid": "ReadTheJobsEventLogs", "Effect": "Allow", "Action": ["s3:GetObject"],
             "Resource": [f"arn:aws:s3:::{bucket}/{root}/history/*"]}]}
    if role == "executor":
        return _executor_policy(bucket, top, root)
    bucket_arn, objects = f"arn:aws:s3:::{bucket}", f"arn:aws:s3:::{bucket}/{root}/*"
    statements: list[dict[str, Any]] = [
        {"Sid": "ListTheJobsKeys", "Effect": "Allow", "Action": ["s3:ListBucket"], "Resource": [bucket_arn],
         "Condition": {"StringLike": {"s3:prefix": [f"{root}/*"]}}},
        _top_level_listing(bucket, top),
        {"Sid": "ReadTheJobsKeys", "Effect": "Allow", "Action": ["s3:GetObject"], "Resource": [objects]},
    ]
    if role in ("runtime", "job"):
        statements += [
            {"Sid": "WriteTheJobsKeys", "Effect": "Allow", "Action": ["s3:PutObject"], "Resource": [objects]},
            _probe(bucket, top),
        ]
    if role == "runtime":
        statements.append({"Sid": "DropOwnPendingMarkers", "Effect": "Allow", "Action": ["s3:DeleteObject"],
                           "Resource": [f"arn:aws:s3:::{bucket}/{root}/pending/*"]})
    if role in ("gc", "job"):
        statements.append({"Sid": "DeleteTheJobsKeys", "Effect": "Allow", "Action": ["s3:DeleteObject"],
                           "Resource": [objects]})
    if role == "gc":  # the cursor each output pass leaves for the next (runtime/sink/gc_cursor.py)
        statements.append({"Sid": "WriteOutputGcCursors", "Effect": "Allow", "Action": ["s3:PutObject"],
                           "Resource": [f"arn:aws:s3:::{bucket}/{root}/outputs/_gc-cursors.json"]})
    return {"Version": "2012-10-17", "Statement": statements}


def _top_level_listing(bucket: str, top: str) -> dict[str, Any]:
    # With the delimiter only: the names one level down (namespaces), never every job's keys.
    return {"Sid": "ListTheStoreTopLevel", "Effect": "Allow", "Action": ["s3:ListBucket"],
            "Resource": [f"arn:aws:s3:::{bucket}"],
            "Condition": {"StringEquals": {"s3:prefix": [f"{top}/" if top else ""], "s3:delimiter": ["/"]}}}


def _probe(bucket: str, top: str) -> dict[str, Any]:
    """The conditional-write probe of a writer's store check (s3.py, CONDITIONAL_PROBE_KEY)."""
    return {"Sid": "ConditionalWriteProbe", "Effect": "Allow", "Action": ["s3:GetObject", "s3:PutObject"],
            "Resource": [f"arn:aws:s3:::{bucket}/{_join(top, PROBE_DIR)}/*"]}


def _executor_policy(bucket: str, top: str, root: str) -> dict[str, Any]:
    """Uploads of content-addressed objects and staged sink parts, reads of what a restore fetches.
    The driver claims the checkpoint id (pending marker), checks the fence and commits (manifest, commit
    entry): none of that is granted. PutObject cannot be limited to creates: an executor could
    overwrite an object or a staged part (a restore's CRC check catches different bytes in an object)."""
    arn = f"arn:aws:s3:::{bucket}/{root}"
    staged = f"{arn}/outputs/*/staging/attempt-*"
    return {"Version": "2012-10-17", "Statement": [
        # The upload plan's one listing of objects/ (plan.py), and nothing else of the job.
        {"Sid": "ListTheJobsObjects", "Effect": "Allow", "Action": ["s3:ListBucket"],
         "Resource": [f"arn:aws:s3:::{bucket}"], "Condition": {"StringLike": {"s3:prefix": [f"{root}/objects/*"]}}},
        # A restore from a checkpoint or a savepoint (whose copies live under savepoints/<name>/objects/;
        # a savepoint's name has no '/', so only its objects match): the driver hands out the file list.
        {"Sid": "ReadRestoredObjects", "Effect": "Allow", "Action": ["s3:GetObject"],
         "Resource": [f"{arn}/objects/*", f"{arn}/savepoints/*/objects/*"]},
        {"Sid": "UploadObjectsAndStagedBatches", "Effect": "Allow", "Action": ["s3:PutObject"],
         "Resource": [f"{arn}/objects/*", f"{staged}/batch-*"]},
        # `*` matches '/': a sink path nested in a staging folder (`a/staging/attempt-1/batch-2`, or
        # `a/staging/attempt-1` for an upsert marker `upserts/batch-…`) would put its commit entries
        # and markers under the grant above. A staged part's key has no area segment after
        # `staging/attempt-`, so these deny only such nested paths' areas; an explicit Deny wins.
        {"Sid": "NoOutputAreaBelowAStagingFolder", "Effect": "Deny", "Action": ["s3:PutObject"],
         "Resource": [f"{staged}/{area}/*" for area in EXECUTOR_DENIED_AREAS]},
        _top_level_listing(bucket, top),
        _probe(bucket, top),
    ]}


def store_history_policy(bucket: str, prefix: str) -> dict[str, Any]:
    """Every job's event logs of the store, and the names that find the jobs (see the module's doc).
    A store at the bucket's root has no prefix to bound the patterns: they would admit every
    `*/*/history/*` key of the whole bucket (other applications' included), so that is refused."""
    top = _join(prefix)
    if not top:
        raise ValueError(f"a store-wide history policy needs a store prefix (s3://{bucket}/<prefix>): at the "
                         "bucket's root it would admit the whole bucket; name the jobs instead "
                         "(NAMESPACE/JOB --role history, one policy per job)")
    bucket_arn, logs = f"arn:aws:s3:::{bucket}", _join(top, "*/*/history/*")
    return {"Version": "2012-10-17", "Statement": [
        {"Sid": "ListNamespaces", "Effect": "Allow", "Action": ["s3:ListBucket"], "Resource": [bucket_arn],
         "Condition": {"StringEquals": {"s3:prefix": [f"{top}/" if top else ""], "s3:delimiter": ["/"]}}},
        {"Sid": "ListJobsOfANamespace", "Effect": "Allow", "Action": ["s3:ListBucket"], "Resource": [bucket_arn],
         "Condition": {"StringLike": {"s3:prefix": [_join(top, "*") + "/"]}, "StringEquals": {"s3:delimiter": ["/"]}}},
        {"Sid": "ListEventLogs", "Effect": "Allow", "Action": ["s3:ListBucket"], "Resource": [bucket_arn],
         "Condition": {"StringLike": {"s3:prefix": [logs]}}},
        {"Sid": "ReadEventLogs", "Effect": "Allow", "Action": ["s3:GetObject"], "Resource": [f"{bucket_arn}/{logs}"]}]}


def split_url(url: str) -> tuple[str, str]:
    if not url.startswith("s3://"):
        raise ValueError(f"store URL must be s3://bucket[/prefix], not {url!r}")
    bucket, _, prefix = url[len("s3://"):].partition("/")
    return bucket, prefix.strip("/")


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m sparkpoint.runtime.store.access_policy",
                                description="print a job's least-privilege S3 policy")
    p.add_argument("store", help="s3://bucket[/prefix] (spec.checkpoint.storage.url)")
    p.add_argument("job", nargs="?", help="NAMESPACE/NAME (omitted with --role history: every job's event logs)")
    p.add_argument("--role", choices=ROLES, default="job")
    args = p.parse_args(argv)
    bucket, prefix = split_url(args.store)
    if args.job is None and args.role != "history":
        p.error("a job is needed for every role but history")
    try:
        doc = store_history_policy(bucket, prefix) if args.job is None else \
            job_policy(bucket, prefix, JobRef.parse(args.job), args.role)
    except ValueError as exc:
        p.error(str(exc))
    print(json.dumps(doc, indent=2))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
