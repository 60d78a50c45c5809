"""`kubectl sparkpoint history JOB`: port-forward to the chart's History Server (historyServer.enabled)
and say which of its applications are the job's attempts (docs/design.md §9, event logs).

The server is found by its Service's labels in the chart's namespace (`--server-namespace`); kubectl
forwards, as for `ui`."""

from __future__ import annotations

from typing import Any

COMPONENT = "history-server"
SELECTOR = f"app.kubernetes.io/name=sparkpoint,app.kubernetes.io/component={COMPONENT}"
DEFAULT_NAMESPACE = "sparkpoint-system"
PORT = 18080


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
