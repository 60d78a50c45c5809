"""`kubectl sparkpoint history JOB`: port-forward to the chart's History Server (historyServer.enabled)
and say which of its applications are the job's attempts (docs/design.md §9, event logs).

The server is found by its Service's labels in the chart's namespace (`--server-namespace`); kubectl
forwards, as for `ui`. With `--list` nothing is forwarded: the plugin asks the History Server's REST
API (`/api/v1/applications`) through the API server's pod proxy to a ready pod of the Service (RBAC
`pods/proxy` get in that namespace) and prints the job's applications, by the operator's attempt and in-place restart."""

from __future__ import annotations

import re
from typing import Any

COMPONENT = "history-server"
SELECTOR = f"app.kubernetes.io/name=sparkpoint,app.kubernetes.io/component={COMPONENT}"
DEFAULT_NAMESPACE = "sparkpoint-system"
PORT = 18080


def history_service_object(services: list[dict[str, Any]], namespace: str) -> dict[str, Any]:
    history_service(services, namespace)  # raises why there is none or which to choose
    return services[0]


def history_service(services: list[dict[str, Any]], namespace: str) -> tuple[str, int]:
    """(Service name, its `http` port) of the one History Server in `namespace`; a ValueError says
    why there is none or which to choose."""
    if not services:
        raise ValueError(f"no History Server Service in namespace {namespace} (install the chart with "
                         "historyServer.enabled=true, or give --server-namespace)")
    if len(services) > 1:
        names = sorted(s["metadata"]["name"] for s in services)
        raise ValueError(f"several History Servers in namespace {namespace}: {', '.join(names)} (give --service)")
    svc = services[0]
    ports = [p for p in (svc.get("spec") or {}).get("ports") or [] if p.get("name") == "http"]
    return svc["metadata"]["name"], int(ports[0]["port"]) if ports else PORT


def app_prefix(job: dict[str, Any]) -> str:
    meta = job.get("metadata") or {}
    return f"sparkpoint-{meta.get('namespace')}-{meta.get('name')}-attempt-"


def event_log_note(job: dict[str, Any]) -> str | None:
    spark = (job.get("spec") or {}).get("spark") or {}
    if ((spark.get("eventLog") or {}).get("enabled", True)) is False:
        name = (job.get("metadata") or {}).get("name", "?")
        return (f"note: streamingjob {name} has spec.spark.eventLog.enabled: false; only attempts from "
                "before that have logs")
    return None


def port_forward_argv(service: str, port: int, namespace: str, context: str | None, local_port: int) -> list[str]:
    if not 0 <= local_port <= 65535:
        raise ValueError(f"--port {local_port}: not a TCP port (0-65535; 0 picks a free one)")
    argv = ["kubectl", "port-forward", "--namespace", namespace, "--address", "127.0.0.1"]
    if context:
        argv += ["--context", context]
    return [*argv, f"svc/{service}", f"{local_port}:{port}"]


def _attempt_of(name: str, prefix: str) -> tuple[int, int] | None:
    """'<prefix>3' -> (3, 0), '<prefix>3-restart-2' -> (3, 2); None for another job's application."""
    if not name.startswith(prefix):
        return None
    m = re.fullmatch(r"(\d+)(?:-restart-(\d+))?", name[len(prefix):])
    return (int(m.group(1)), int(m.group(2) or 0)) if m else None


def job_applications(apps: list[dict[str, Any]], job: dict[str, Any]) -> list[dict[str, Any]]:
    """The job's applications of a History Server's /api/v1/applications answer, by attempt and restart,
    each with `attempt`, `restart` and its latest Spark attempt's `completed`, `startTime`, `duration`."""
    prefix, found = app_prefix(job), []
    for app in apps:
        run = _attempt_of(str(app.get("name", "")), prefix)
        if run is None:
            continue
        last = (app.get("attempts") or [{}])[0]
        found.append({"id": app.get("id"), "name": app.get("name"), "attempt": run[0], "restart": run[1],
                      "completed": bool(last.get("completed")), "startTime": last.get("startTime"),
                      "duration": last.get("duration")})
    return sorted(found, key=lambda a: (a["attempt"], a["restart"]))


def application_rows(apps: list[dict[str, Any]]) -> tuple[list[str], list[list[Any]]]:
    headers = ["ATTEMPT", "RESTART", "COMPLETED", "STARTED", "DURATION", "APPLICATION", "ID"]
    return headers, [[a["attempt"], a["restart"], str(a["completed"]).lower(), a["startTime"],
                      f"{int(a['duration'] or 0) // 1000}s", a["name"], a["id"]] for a in apps]
