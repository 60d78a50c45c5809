"""`sparkpoint run JOB.yaml [--supervise]`: run a streaming job with durable checkpoints."""

from __future__ import annotations

import argparse
import logging
import os
import sys
from pathlib import Path

from sparkpoint.runtime.spec import (
    STANDBY_ENV,
    STANDBY_INTERVAL_ENV,
    STANDBY_WARMUP_ENV,
    SpecError,
    load_job_file,
)

from ..service.control_token import TokenError, check_bind, resolve_token
from .common import duration


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("run", help="run a streaming job (JOB.yaml = a StreamingJob spec or manifest)")
    p.add_argument("job_file", metavar="JOB.yaml")
    p.add_argument("--supervise", action="store_true",
                   help="restart on crash with backoff (spec.restart), from the latest checkpoint")
    p.add_argument("--work-dir", default=os.environ.get("SPARKPOINT_WORK_DIR"),
                   help="local dir for the hot checkpoint dir (default ./.work/NAMESPACE/NAME)")
    p.add_argument("--host", default=None,
                   help="control API address (default $POD_IP when a token is set, else 127.0.0.1)")
    p.add_argument("--port", type=int, default=int(os.environ.get("SPARKPOINT_PORT", "8080")),
                   help="control API port (default 8080; 0 picks a free one)")
    p.add_argument("--metrics-port", type=int, default=None,
                   help="also serve /metrics alone on this port (9091 in a pod; default: none)")
    p.add_argument("--token-file", default=None,
                   help="the control API's bearer token (default $SPARKPOINT_CONTROL_TOKEN_FILE, "
                        "then $SPARKPOINT_CONTROL_TOKEN; none: no authentication, loopback only)")
    p.add_argument("--insecure-no-auth", action="store_true",
                   help="allow a non-loopback --host without a token (anyone who reaches it can stop the job)")
    p.add_argument("--until-batch", type=int, default=None,
                   help="drain (final checkpoint, exit 0) once this batch has committed")
    p.add_argument("--grace", type=duration, default=25.0, help="drain time limit on stop/SIGTERM")
    p.add_argument("--external-triggers", action="store_true",
                   help="checkpoints are triggered over the control API (the operator does); the own "
                        "interval timer only runs after two intervals without a request")
    p.add_argument("--full-upload", action="store_true",
                   help="upload every file at every checkpoint, reusing nothing: the benchmarks' "
                        "non-incremental baseline, not for jobs")
    p.add_argument("--serial-start", action="store_true",
                   help="start the JVM after the restore, not beside it: the benchmarks' baseline of the "
                        "cold path (bench/cold_start_bench.py), not for jobs")
    p.add_argument("--standby", action="store_true",
                   default=os.environ.get(STANDBY_ENV, "").lower() in ("1", "true"),
                   help="start as a standby: JVM and SparkSession up, the newest checkpoint's objects "
                        "fetched as checkpoints complete, no attempt claimed and nothing written until "
                        f"POST /promote (default ${STANDBY_ENV})")
    p.add_argument("--standby-interval", type=duration, default=os.environ.get(STANDBY_INTERVAL_ENV, "2s"),
                   help=f"a standby's time between two looks at the store (default ${STANDBY_INTERVAL_ENV}, "
                        "else 2s)")
    p.add_argument("--standby-warmup", action="store_true",
                   default=os.environ.get(STANDBY_WARMUP_ENV, "").lower() in ("1", "true"),
                   help="a standby runs the job's query once before any promotion, from a scratch checkpoint "
                        "into a sink that writes nothing, so the promoted query starts on a warm JVM; it reads "
                        f"the job's sources as a new query would (default ${STANDBY_WARMUP_ENV})")
    p.add_argument("--name", default=None, help="override the job name (default metadata.name or file stem)")
    p.add_argument("--namespace", default=None, help="override the namespace")
    p.set_defaults(handler=cmd_run)


def cmd_run(args: argparse.Namespace) -> int:
    logging.getLogger("sparkpoint").setLevel(logging.INFO if args.verbose < 2 else logging.DEBUG)
    try:
        ident, spec = load_job_file(args.job_file)
        if args.name or args.namespace:
            ident = ident.model_copy(update={k: v for k, v in
                                             (("name", args.name), ("namespace", args.namespace)) if v})
    except SpecError as exc:
        print(f"sparkpoint run: invalid job file: {exc}", file=sys.stderr)
        return 2
    try:
        args.token = resolve_token(args.token_file, os.environ)
        if args.host is None:
            args.host = os.environ.get("POD_IP", "127.0.0.1") if args.token else "127.0.0.1"
        check_bind(args.host, args.token, args.insecure_no_auth)
    except TokenError as exc:
        print(f"sparkpoint run: {exc}", file=sys.stderr)
        return 2
    # job.pythonPath entries are relative to the job file, so an example runs from any directory.
    base = Path(args.job_file).absolute().parent
    spec.job.python_path = [str((base / p).resolve()) for p in spec.job.python_path]
    work_dir = Path(args.work_dir or Path(".work") / ident.namespace / ident.name)
    if args.supervise:
        from ..service.supervisor import supervise

        return supervise(child_command(args, work_dir), spec.restart)
    return run_once(ident, spec, args, work_dir)


def child_command(args: argparse.Namespace, work_dir: Path) -> list[str]:
    """The same `run` without --supervise, for the supervisor to start (and restart)."""
    cmd = [sys.executable, "-m", "sparkpoint.runtime.cli", *(["-v"] * args.verbose), "run",
           str(Path(args.job_file).absolute()), "--work-dir", str(work_dir.absolute()),
           "--host", args.host, "--port", str(args.port), "--grace", str(args.grace)]
    # The token itself never goes on a command line (visible in ps): the child reads the same
    # file or inherits the same environment.
    if args.token_file:
        cmd += ["--token-file", args.token_file]
    if args.metrics_port is not None:
        cmd += ["--metrics-port", str(args.metrics_port)]
    if args.insecure_no_auth:
        cmd.append("--insecure-no-auth")
    if args.until_batch is not None:
        cmd += ["--until-batch", str(args.until_batch)]
    if args.external_triggers:
        cmd.append("--external-triggers")
    if args.full_upload:
        cmd.append("--full-upload")
    if args.serial_start:
        cmd.append("--serial-start")
    if args.standby:  # a restart after the promotion starts as the attempt (standby.py)
        cmd += ["--standby", "--standby-interval", str(args.standby_interval)]
        cmd += ["--standby-warmup"] if args.standby_warmup else []
    if args.name:
        cmd += ["--name", args.name]
    if args.namespace:
        cmd += ["--namespace", args.namespace]
    return cmd


TERMINATION_LOG_ENV = "SPARKPOINT_TERMINATION_LOG"  # the operator sets /dev/termination-log


def restore_failure(exc: Exception) -> dict:
    """Exit 3's message for the operator: which points could not be restored (it blames exactly
    those), the reason label, and the error text (bounded: the kubelet keeps 4 KiB)."""
    points = getattr(exc, "points", None)
    return {"restoreFailed": {"points": list(points) if points is not None else None,
                              "reason": getattr(exc, "reason", "other"), "error": str(exc)[:1500]}}


def run_failure(exc: BaseException, uid: int | None = None) -> dict:
    """Exit 1's message for the operator, which names known causes (operator/decisions/failure_causes.py): the
    error's own lines without stack frames (a Py4J error carries Spark's whole Java stack; the cause,
    e.g. a Kubernetes API refusal, is in its first lines), bounded, and the uid the runtime ran as."""
    lines = [line for line in str(exc).splitlines()
             if line.strip() and not line.lstrip().startswith(("at ", "File ", "... "))]
    text = f"{type(exc).__name__}: " + "\n".join(lines)
    return {"runFailed": {"error": text[:1500], "uid": os.getuid() if uid is None else uid}}


def write_termination_message(path: str | None, doc: dict) -> None:
    """The container's termination message (Kubernetes shows it in the pod's status); best effort."""
    if not path:
        return
    import json
    try:
        Path(path).write_text(json.dumps(doc))
    except OSError as exc:
        logging.getLogger("sparkpoint.runtime").warning("termination message not written",
                                                        extra={"path": path, "error": str(exc)})


def run_once(ident, spec, args: argparse.Namespace, work_dir: Path) -> int:  # type: ignore[no-untyped-def]
    from ..checkpoint.restore import RestoreError
    from ..service.runner import (
        EXIT_BAD_INPUT,
        EXIT_FAILED,
        EXIT_RESCALE,
        EXIT_RESTORE,
        JobRuntime,
        RunOptions,
    )
    from ..spark.entrypoint import EntrypointError
    from ..spark.rescale import RescaleError
    from ..store import StoreError

    runtime = JobRuntime(ident, spec, RunOptions(work_dir=work_dir, host=args.host, port=args.port,
                                                 token=args.token, metrics_port=args.metrics_port,
                                                 until_batch=args.until_batch, grace_seconds=args.grace,
                                                 external_triggers=args.external_triggers,
                                                 full_upload=args.full_upload, serial_start=args.serial_start,
                                                 standby=args.standby, standby_interval=args.standby_interval,
                                                 standby_warmup=args.standby_warmup))
    log = logging.getLogger("sparkpoint.runtime")
    try:
        return runtime.run()
    except EntrypointError as exc:
        print(f"sparkpoint run: {exc}", file=sys.stderr)
        return EXIT_BAD_INPUT
    except RestoreError as exc:
        print(f"sparkpoint run: restore failed: {exc}", file=sys.stderr)
        log.error("restore failed", extra={"error": str(exc)})
        write_termination_message(os.environ.get(TERMINATION_LOG_ENV), restore_failure(exc))
        return EXIT_RESTORE
    except RescaleError as exc:  # the operator rolls an upgrade back to the old partition count
        print(f"sparkpoint run: {exc}", file=sys.stderr)
        log.error("rescale failed", extra=exc.to_json())
        write_termination_message(os.environ.get(TERMINATION_LOG_ENV), {"rescaleFailed": exc.to_json()})
        return EXIT_RESCALE
    except StoreError as exc:
        print(f"sparkpoint run: store error: {exc}", file=sys.stderr)
        return EXIT_FAILED
    except Exception as exc:  # the CLI prints it and exits 1; the operator reads the cause from here
        write_termination_message(os.environ.get(TERMINATION_LOG_ENV), run_failure(exc))
        raise
