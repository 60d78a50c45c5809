"""Entry point: `PYTHONPATH=e2e/local python -m node_agent --kubeconfig ... --node-name ...`."""

from __future__ import annotations

import argparse
import os
import shutil
import signal
import subprocess
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))  # the agent's modules import each other by plain name
sys.path.insert(0, str(HERE.parent))  # jsonlog

from agent import Agent  # noqa: E402
from image_mode import LocalImages  # noqa: E402
from jsonlog import setup_logging  # noqa: E402
from kube import KubeClient  # noqa: E402
from podspec import PASSTHROUGH_ENV, SYSTEM_PATH  # noqa: E402
from worker import AgentContext  # noqa: E402


def main() -> int:
    parser = argparse.ArgumentParser(description="node agent of the local e2e cluster")
    parser.add_argument("--kubeconfig", type=Path, required=True)
    parser.add_argument("--node-name", required=True)
    parser.add_argument("--state-dir", type=Path, required=True)
    parser.add_argument("--apiserver-port", type=int, required=True)
    parser.add_argument("--venv-bin", type=Path, required=True)
    parser.add_argument("--serving-cert", type=Path, help="TLS certificate of the container-log endpoint")
    parser.add_argument("--serving-key", type=Path)
    parser.add_argument("--backoff-base", type=float, default=1.0,
                        help="first restart delay in seconds (the kubelet uses 10)")
    parser.add_argument("--backoff-cap", type=float, default=30.0,
                        help="longest restart delay in seconds (the kubelet uses 300)")
    args = parser.parse_args()
    setup_logging()
    probe = subprocess.run(["unshare", "--mount", "--propagation", "private", "true"], capture_output=True, text=True)
    if probe.returncode != 0:
        print(f"node agent: cannot create mount namespaces (needs root or CAP_SYS_ADMIN): {probe.stderr.strip()}",
              file=sys.stderr)
        return 2
    client = KubeClient(args.kubeconfig)
    base_env = {k: os.environ[k] for k in PASSTHROUGH_ENV if k in os.environ}
    base_env.update({
        "PATH": f"{args.venv_bin}:{SYSTEM_PATH}", "HOME": "/root",
        "KUBERNETES_SERVICE_HOST": "127.0.0.1", "KUBERNETES_SERVICE_PORT": str(args.apiserver_port),
        "KUBERNETES_SERVICE_PORT_HTTPS": str(args.apiserver_port),
    })
    ctx = AgentContext(
        client=client, node_name=args.node_name, host_ip="127.0.0.1",
        pods_dir=args.state_dir / "pods", logs_dir=args.state_dir / "logs", venv_bin=args.venv_bin,
        apiserver_port=args.apiserver_port, ca_bundle=Path(client.ca_file).read_bytes(),
        backoff_base=args.backoff_base, backoff_cap=args.backoff_cap, base_env=base_env,
        # Image mode (image_mode.py) needs buildah; without it every container uses the virtualenv.
        images=LocalImages() if shutil.which("buildah") else None,
    )
    agent = Agent(ctx, client.get("/version")["gitVersion"])
    if args.serving_cert:
        agent.serve_logs(args.serving_cert, args.serving_key, Path(client.ca_file))
    for sig in (signal.SIGTERM, signal.SIGINT):
        signal.signal(sig, lambda *_: agent.stopping.set())
    agent.run()
    return 0


if __name__ == "__main__":
    sys.exit(main())
