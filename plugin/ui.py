"""`kubectl sparkpoint ui JOB`: port-forward to Spark's live UI of the job's current pod.

kubectl itself forwards (a plugin runs beside it, and its port-forward is the one users know:
the same kubeconfig, context and RBAC, pods/portforward); this module only says to what.
"""

from __future__ import annotations

import subprocess
import sys

from sparkpoint.runtime.spec import SPARK_UI_PORT


def ui_pod(job: dict) -> str:
    """The pod to forward to: the current attempt's (status.pod). A ValueError names why there is
    none: the UI turned off in the spec, or no pod yet."""
    name = (job.get("metadata") or {}).get("name", "?")
    ui = (((job.get("spec") or {}).get("spark") or {}).get("ui") or {})
    if ui.get("enabled", True) is False:
        raise ValueError(f"streamingjob {name} has spec.spark.ui.enabled: false (set it to true for a live UI)")
    pod = (job.get("status") or {}).get("pod")
    if not pod:
        phase = (job.get("status") or {}).get("phase", "Pending")
        raise ValueError(f"streamingjob {name} has no current pod (phase {phase})")
    return str(pod)


def port_forward_argv(pod: str, namespace: str, context: str | None, local_port: int,
                      address: str = "127.0.0.1") -> list[str]:
    if not 0 <= local_port <= 65535:
        raise ValueError(f"--port {local_port}: not a TCP port (0-65535; 0 picks a free one)")
    argv = ["kubectl", "port-forward", "--namespace", namespace, "--address", address]
    if context:
        argv += ["--context", context]
    return [*argv, f"pod/{pod}", f"{local_port}:{SPARK_UI_PORT}"]


def forward(argv: list[str]) -> int:
    """Run kubectl until it ends or Ctrl-C (then 0: stopping the forward is the normal way out)."""
    try:
        return subprocess.call(argv)
    except KeyboardInterrupt:
        return 0
    except FileNotFoundError:
        print("error: kubectl not found on PATH (the ui and history commands run `kubectl port-forward`)", file=sys.stderr)
        return 1
