"""The plugin's command line: kubectl's common flags (--kubeconfig, --context, -n, -A; before or after
the command), -o on the commands that read, durations like kubectl's, and JOB as NAME or NAMESPACE/NAME.
cli.py runs what it parses."""

from __future__ import annotations

import argparse

from sparkpoint import version
from sparkpoint.runtime.spec import parse_duration

from . import format as fmt
from . import history, ui

# The commands that print objects take -o; those that change something or stream do not.
READ_COMMANDS = ("list", "status", "checkpoints", "executors", "events", "history", "savepoint")
OUTPUTS = ("name", *fmt.OUTPUTS)
JOB_HELP = "the StreamingJob: NAME, or NAMESPACE/NAME"


def duration(text: str) -> float:
    """Seconds, as a plain number or a duration like kubectl's: 30s, 5m, 1h."""
    try:
        return float(text)
    except ValueError:
        pass
    try:
        return parse_duration(text)
    except ValueError as exc:
        raise argparse.ArgumentTypeError(str(exc)) from None


def _connection(default) -> argparse.ArgumentParser:
    common = argparse.ArgumentParser(add_help=False)
    common.add_argument("--kubeconfig", default=default, metavar="FILE",
                        help="the kubeconfig file (default: $KUBECONFIG, else ~/.kube/config)")
    common.add_argument("--context", default=default, help="the kubeconfig context to use")
    common.add_argument("-n", "--namespace", default=default,
                        help="the namespace (default: the context's, else default)")
    return common


def _output(default) -> argparse.ArgumentParser:
    out = argparse.ArgumentParser(add_help=False)
    out.add_argument("-o", "--output", default=default, choices=OUTPUTS,
                     help="name, json, yaml, or wide (more table columns)")
    return out


def parser() -> argparse.ArgumentParser:
    # The flags go before or after the command, as with kubectl; a subcommand's copy must not
    # overwrite one given before it, hence SUPPRESS there.
    p = argparse.ArgumentParser(prog="kubectl sparkpoint", parents=[_connection(None), _output(None)],
                                description="Inspect and steer Sparkpoint StreamingJobs.")
    p.add_argument("--version", action="version", version=f"kubectl-sparkpoint {version()}",
                   help="print the version and exit")
    common, reads = [_connection(argparse.SUPPRESS)], [_connection(argparse.SUPPRESS), _output(argparse.SUPPRESS)]
    sub = p.add_subparsers(dest="command", required=True, metavar="COMMAND")
    lst = sub.add_parser("list", parents=reads, help="StreamingJobs with phase, latest checkpoint, restarts")
    lst.add_argument("-A", "--all-namespaces", action="store_true", help="the jobs of every namespace")
    for name, text, parents in (("status", "a job's phase, attempt, latest checkpoint, conditions", reads),
                                ("checkpoints", "a job's recent checkpoints and savepoints", reads),
                                ("executors", "a job's Spark executor pods (spark.master k8s), every attempt's", reads),
                                ("suspend", "stop the job with a savepoint (spec.state: suspended)", common),
                                ("resume", "start a suspended job again (spec.state: running)", common),
                                ("checkpoint", "take a checkpoint now (bumps spec.checkpoint.triggerNonce)", common),
                                ("restart", "restart the job from its latest checkpoint (bumps spec.restartNonce)",
                                 common)):
        sub.add_parser(name, parents=parents, help=text).add_argument("job", metavar="JOB", help=JOB_HELP)
    evs = sub.add_parser("events", parents=reads,
                         help="Events of a job and of its pods and savepoints (of every job without JOB), oldest first")
    evs.add_argument("job", metavar="JOB", nargs="?", help=JOB_HELP + " (none: every Sparkpoint resource's Events)")
    evs.add_argument("-A", "--all-namespaces", action="store_true", help="Events of every namespace")
    evs.add_argument("--since", type=duration, default=None, metavar="DURATION",
                     help="only Events seen within this long (e.g. 5m, 1h)")
    sp = sub.add_parser("savepoint", parents=reads, help="take a savepoint (a StreamingJobSavepoint) and wait")
    sp.add_argument("job", metavar="JOB", help=JOB_HELP)
    sp.add_argument("--name", help="the StreamingJobSavepoint's name (and the savepoint's); default generated")
    sp.add_argument("--timeout", type=duration, default=600.0, metavar="DURATION",
                    help="how long to wait: seconds or a duration like 10m (default 10m)")
    sp.add_argument("--no-wait", action="store_true", help="create it and return")
    rs = sub.add_parser("restore", parents=common, help="set spec.restoreFrom to a checkpoint or savepoint")
    rs.add_argument("job", metavar="JOB", help=JOB_HELP)
    rs.add_argument("--from", dest="source", required=True, help="chk-NNNNNN or a savepoint name")
    rc = sub.add_parser("rescale", parents=common,
                        help="change spark.shufflePartitions (repartitions the state) and/or executors.instances")
    rc.add_argument("job", metavar="JOB", help=JOB_HELP)
    rc.add_argument("--partitions", type=int, help="the new spec.spark.shufflePartitions")
    rc.add_argument("--executors", type=int, help="the new spec.spark.executors.instances (spark.master k8s; "
                    "a job with executors.dynamic refuses a fixed count: edit dynamic.min/max instead)")
    lg = sub.add_parser("logs", parents=common, help="the runtime container's log of the job's current pod")
    lg.add_argument("job", metavar="JOB", help=JOB_HELP)
    lg.add_argument("-f", "--follow", action="store_true", help="stream the log until Ctrl-C")
    lg.add_argument("--tail", type=int, default=None, metavar="N", help="only the last N lines")
    lg.add_argument("--since", type=duration, default=None, metavar="DURATION",
                    help="only lines written within this long (e.g. 5m)")
    sui = sub.add_parser("ui", parents=common, help="port-forward to Spark's live UI of the job's current pod")
    sui.add_argument("job", metavar="JOB", help=JOB_HELP)
    sui.add_argument("--port", type=int, default=ui.SPARK_UI_PORT,
                     help=f"the local port (default {ui.SPARK_UI_PORT}; 0 picks a free one)")
    hs = sub.add_parser("history", parents=reads,
                        help="port-forward to the chart's History Server and name the job's attempts there")
    hs.add_argument("job", metavar="JOB", help=JOB_HELP)
    hs.add_argument("--port", type=int, default=history.PORT,
                    help=f"the local port (default {history.PORT}; 0 picks a free one)")
    hs.add_argument("--server-namespace", default=history.DEFAULT_NAMESPACE,
                    help=f"the chart's namespace (default {history.DEFAULT_NAMESPACE})")
    hs.add_argument("--service", default=None, help="the History Server's Service (default: found by its labels)")
    hs.add_argument("--server-url", default=None, metavar="URL",
                    help="with --list: the History Server's address when you reach it directly (an Ingress, your own "
                         "forward) instead of through the API server")
    hs.add_argument("--list", action="store_true",
                    help="no port-forward: print the job's applications (through the API server's pod proxy)")
    return p


def resolve_job(args: argparse.Namespace) -> None:
    """JOB as NAMESPACE/NAME sets the namespace (a different -n is an error, not a silent pick)."""
    job = getattr(args, "job", None)
    if not job or "/" not in job:
        return
    namespace, _, name = job.partition("/")
    if not namespace or not name or "/" in name:
        raise ValueError(f"JOB {job!r}: give NAME or NAMESPACE/NAME")
    if args.namespace and args.namespace != namespace:
        raise ValueError(f"JOB {job!r} names namespace {namespace}, but -n/--namespace says {args.namespace}")
    args.namespace, args.job = namespace, name


def check_output(args: argparse.Namespace) -> None:
    if args.output and args.command not in READ_COMMANDS:
        raise ValueError(f"-o/--output: `{args.command}` prints no object (it applies to {', '.join(READ_COMMANDS)})")
    if args.output == "wide" and args.command != "list":
        args.output = None  # tables are as wide as they get elsewhere, as with kubectl
