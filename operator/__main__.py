"""`sparkpoint-operator` / `python -m sparkpoint.operator`: run the operator.

  sparkpoint-operator [--namespace NS ... | --all-namespaces] [--metrics-port 9100] [--upgrade-timeout 5m]
                      [--job-service-account NAME] [--driver-service-account NAME]

Talks to the API server of $KUBECONFIG (or the in-cluster service account). Replicas peer
through kopf's peering object `sparkpoint`: the one with the highest priority works, the others
stand by and take over when its heartbeat stops (each replica picks a random priority unless
--priority is given).
"""

from __future__ import annotations

import argparse
import importlib
import logging
import os
import random
import sys

import kopf

from sparkpoint import version
from sparkpoint.runtime.spec import parse_duration, ui_path_prefix

from .malloc import limit_arenas

PEERING_NAME = "sparkpoint"


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    p = argparse.ArgumentParser(prog="sparkpoint-operator", description=__doc__.splitlines()[0])
    scope = p.add_mutually_exclusive_group()
    scope.add_argument("--namespace", action="append", default=[], metavar="NS",
                       help="watch this namespace (repeatable)")
    scope.add_argument("--all-namespaces", action="store_true", help="watch every namespace")
    p.add_argument("--metrics-port", type=int, default=9100, help="serves /metrics and /healthz (default 9100)")
    p.add_argument("--upgrade-timeout", type=parse_duration, default=300.0, metavar="DURATION",
                   help="an upgraded job not Ready within this rolls back (default 5m)")
    p.add_argument("--job-service-account", default=None, metavar="NAME",
                   help="ServiceAccount of the job pods (it must exist in each job's namespace; "
                        "default: the namespace's `default`)")
    p.add_argument("--driver-service-account", default=None, metavar="NAME",
                   help="ServiceAccount of the pods of spark.master k8s jobs, whose driver starts executor pods "
                        "(it must exist in each such job's namespace with the RBAC Spark's backend needs; "
                        "default: the namespace's `default`)")
    p.add_argument("--ui-path-prefix", default=None, type=_ui_path_prefix, metavar="PATH",
                   help="jobs' live UI behind an Ingress at PATH/<namespace>/<job> (sets Spark's spark.ui.proxyBase; "
                        "the chart's uiIngress passes it)")
    p.add_argument("--hot-volume-host-path-prefix", default=os.environ.get("SPARKPOINT_HOST_PATH_PREFIX") or None,
                   metavar="PATH", help="allow checkpoint.hotVolume.hostPath under PATH only (default: "
                                        "$SPARKPOINT_HOST_PATH_PREFIX; unset: no hostPath hot volumes)")
    p.add_argument("--store-own-identity", action="store_true",
                   default=os.environ.get("SPARKPOINT_STORE_OWN_IDENTITY") == "true",
                   help="read the store of a job that names no storage Secret with the operator's own cloud "
                        "identity (web identity, container or instance credentials; docs/security.md). "
                        "Default: $SPARKPOINT_STORE_OWN_IDENTITY == true; off: such stores are not read")
    p.add_argument("--priority", type=int, default=None, help="peering priority (default: random)")
    p.add_argument("--standalone", action="store_true", help="no peering (a single replica)")
    p.add_argument("-v", "--verbose", action="store_true", help="debug logging")
    p.add_argument("--version", action="version", version=f"%(prog)s {version()}", help="print the version and exit")
    args = p.parse_args(argv)
    if not args.namespace and not args.all_namespaces:
        p.error("give --namespace NS (repeatable) or --all-namespaces")
    return args


def load_handlers() -> None:
    importlib.import_module("sparkpoint.operator.handlers")
    try:  # the StreamingJobSavepoint resource, when that part is installed
        importlib.import_module("sparkpoint.operator.savepoint.handlers")
    except ImportError as exc:  # that part missing (its folder or its module), not a broken import in it
        if exc.name not in ("sparkpoint.operator.savepoint", "sparkpoint.operator.savepoint.handlers"):
            raise


def _ui_path_prefix(value: str) -> str:
    try:
        return ui_path_prefix(value)
    except ValueError as exc:
        raise argparse.ArgumentTypeError(str(exc)) from None


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    limit_arenas()  # before kopf and the executors start their threads
    kopf.configure(verbose=args.verbose, log_format=kopf.LogFormat.JSON)
    logging.getLogger("sparkpoint").setLevel(logging.DEBUG if args.verbose else logging.INFO)
    if not args.verbose:  # one line per handled pod event is noise at 1,000 jobs
        logging.getLogger("kopf.objects").setLevel(logging.WARNING)
    load_handlers()
    kopf.run(
        clusterwide=args.all_namespaces,
        namespaces=args.namespace,
        standalone=args.standalone,
        # A peering name makes kopf wait for that peering object; a standalone replica has none.
        peering_name=None if args.standalone else PEERING_NAME,
        priority=args.priority if args.priority is not None else random.randint(1, 1_000_000),
        memo=kopf.Memo(metrics_port=args.metrics_port, namespaces=None if args.all_namespaces else args.namespace,
                       upgrade_timeout=args.upgrade_timeout, job_service_account=args.job_service_account,
                       driver_service_account=args.driver_service_account, ui_path_prefix=args.ui_path_prefix,
                       host_path_prefix=args.hot_volume_host_path_prefix,
                       store_own_identity=args.store_own_identity),
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
