"""Bring the local cluster up or down: `python e2e/local/cluster.py up|down|status`.

Every component runs as a detached process group with its pid in `<state>/pids/` and its
output in `<state>/logs/`. `up` starts only what is not already running, so it is idempotent;
its last stdout line is `export KUBECONFIG=<absolute path>` (a contract). `down` stops
everything it started, node agent first so that pod processes get their grace period.
"""

from __future__ import annotations

import argparse
import contextlib
import fnmatch
import json
import logging
import os
import signal
import socket
import ssl
import subprocess
import sys
import time
import urllib.error
import urllib.request
from collections.abc import Callable
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))

import components as c  # noqa: E402
import pki  # noqa: E402
from jsonlog import setup_logging  # noqa: E402

from harness.polling import WaitTimeout, wait_until  # noqa: E402  (the checkout is on the path: make venv)

log = logging.getLogger("cluster")
REPO = HERE.parent.parent
START_ORDER = ["etcd", "kube-apiserver", "kube-controller-manager", "kube-scheduler", "minio", "node-agent"]
# The real node (the default: real_node.py; kube-router enforces NetworkPolicy: network_policy.py), or
# with NODE=agent the node agent that runs pods as host processes (e2e/README.md says what still needs it).
REAL_NODE = ["containerd", "kubelet", "kube-proxy", "kube-router"]
DEFAULT_NODE = "real"


def components_of(layout: c.Layout) -> list[str]:
    return START_ORDER if layout.node == "agent" else [*START_ORDER[:-1], *REAL_NODE]


def read_versions() -> dict[str, str]:
    versions = {}
    for line in (REPO / "versions.env").read_text().splitlines():
        if "=" in line and not line.lstrip().startswith("#"):
            key, value = line.split("=", 1)
            versions[key.strip()] = value.strip()
    return versions


def default_state_dir() -> Path:
    return Path(os.environ.get("SPARKPOINT_E2E_STATE", HERE / ".state")).resolve()


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def load_layout(state: Path, node: str | None = None, nodes: int | None = None) -> c.Layout:
    """The layout of the cluster in `state`; ports are chosen once and then kept. `node` (agent or
    real) and `nodes` (how many real nodes) are those it was last brought up with unless given, and
    real and 1 for a new state dir."""
    versions = read_versions()
    cache = Path(os.environ.get("SPARKPOINT_CACHE", Path.home() / ".cache" / "sparkpoint"))
    saved = state / "cluster.json"
    if saved.exists():
        kept = json.loads(saved.read_text())
        ports = c.Ports(**kept["ports"])
        node = node or kept.get("node")
        nodes = nodes or kept.get("nodes")
    else:
        ports = c.Ports(*(free_port() for _ in range(6)))
    layout = c.Layout(
        state=state, repo=REPO, ports=ports,
        k8s_bin=cache / f"k8s-{versions['KUBERNETES_VERSION']}" / "bin",
        etcd_bin=cache / f"etcd-{versions['ETCD_VERSION']}" / "bin",
        node=node or DEFAULT_NODE, nodes=nodes or 1,
    )
    if layout.node == "real":
        import real_node
        layout.host_ip = real_node.host_ip()
    elif layout.node != "agent":
        raise SystemExit(f"NODE={layout.node!r}: agent or real")
    elif layout.nodes != 1:
        raise SystemExit("the node agent is one node: --nodes (NODES) needs the real node")
    return layout


def port_is_free(port: int) -> bool:
    with socket.socket() as sock:
        try:
            sock.bind(("127.0.0.1", port))
            return True
        except OSError:
            return False


def repick_taken_ports(layout: c.Layout) -> None:
    """On a cold start, ports kept from an earlier run that something else now holds are replaced."""
    if any(pid_alive(layout.pids / f"{name}.pid") for name in components_of(layout)):
        return
    for name, port in vars(layout.ports).items():
        if not port_is_free(port):
            setattr(layout.ports, name, free_port())
            log.info("port taken, picked another", extra={"port_of": name, "was": port})


# --- processes ------------------------------------------------------------------------------------

def pid_alive(pid_file: Path) -> int | None:
    """The pid in `pid_file` if that process still runs the program it was started as."""
    try:
        pid, program = pid_file.read_text().split(maxsplit=1)
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
        cmdline = Path(f"/proc/{pid}/cmdline").read_bytes().split(b"\0")
    except (FileNotFoundError, ValueError, IndexError):
        return None
    if state in ("Z", "X"):
        return None
    return int(pid) if cmdline[0].decode() == program.strip() else None


# Components this invocation started: for them, Popen.poll() is the authority on "still running"
# (a /proc look-up once reported a live, just-started server as gone in a CI run).
STARTED: dict[str, subprocess.Popen] = {}


def component_running(layout: c.Layout, name: str) -> bool:
    process = STARTED.get(name)
    if process is not None:
        return process.poll() is None
    return pid_alive(layout.pids / f"{name}.pid") is not None


def start(layout: c.Layout, name: str, argv: list[str], env: dict[str, str] | None = None,
          cwd: Path | None = None, preexec_fn: Callable[[], None] | None = None) -> None:
    pid_file = layout.pids / f"{name}.pid"
    if pid_alive(pid_file):
        log.info("already running", extra={"component": name})
        return
    out = open(layout.logs / f"{name}.log", "ab")  # noqa: SIM115 - handed to the child
    process = subprocess.Popen(argv, stdout=out, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
                               start_new_session=True, env=env, cwd=cwd, preexec_fn=preexec_fn)
    STARTED[name] = process
    pid_file.write_text(f"{process.pid} {argv[0]}\n")
    log.info("started", extra={"component": name, "pid": process.pid})


def stop(layout: c.Layout, name: str, grace: float) -> None:
    pid_file = layout.pids / f"{name}.pid"
    pid = pid_alive(pid_file)
    if pid is not None:
        signal_group(pid, signal.SIGTERM)
        deadline = time.monotonic() + grace
        while pid_alive(pid_file) and time.monotonic() < deadline:
            time.sleep(0.1)
        if pid_alive(pid_file):
            log.warning("did not stop in time, killing", extra={"component": name, "pid": pid})
            signal_group(pid, signal.SIGKILL)
        log.info("stopped", extra={"component": name, "pid": pid})
    pid_file.unlink(missing_ok=True)


def signal_group(pid: int, sig: int) -> None:
    with contextlib.suppress(ProcessLookupError):
        os.killpg(pid, sig)


def kill_leftover_pod_processes(layout: c.Layout) -> None:
    """Container processes whose node agent died without stopping them (pid files it wrote)."""
    for pid_file in (layout.state / "node").glob("pods/*/containers/*.pid"):
        try:
            pid = int(pid_file.read_text().split()[0])
            if Path(f"/proc/{pid}").exists():
                signal_group(pid, signal.SIGKILL)
                log.warning("killed leftover container process", extra={"pid": pid})
        except (ValueError, IndexError):
            pass


# --- health ---------------------------------------------------------------------------------------

def api_get(layout: c.Layout, path: str) -> tuple[int, bytes]:
    context = ssl.create_default_context(cafile=str(layout.pki / "ca.crt"))
    context.load_cert_chain(str(layout.pki / "admin.crt"), str(layout.pki / "admin.key"))
    try:
        with urllib.request.urlopen(layout.server_url + path, context=context, timeout=5) as response:
            return response.status, response.read()
    except urllib.error.HTTPError as error:
        return error.code, error.read()
    except OSError:
        return 0, b""


def wait_for(what: str, check: Callable[[], bool], timeout: float, layout: c.Layout, component: str) -> None:
    """harness.polling's wait, ending early (with the component's last log lines) if it exits."""
    def give_up() -> None:
        if component and not component_running(layout, component):
            log_file = layout.logs / f"{component}.log"
            tail = log_file.read_text(errors="replace").splitlines()[-15:] if log_file.exists() else []
            raise SystemExit(f"{component} exited while waiting for {what}; last lines of {log_file}:\n"
                             + "\n".join(tail))

    try:
        wait_until(check, timeout, what, give_up=give_up)
    except WaitTimeout:
        raise SystemExit(f"timed out after {timeout:.0f}s waiting for {what}; logs in {layout.logs}") from None


def node_ready(layout: c.Layout, name: str | None = None) -> bool:
    status, body = api_get(layout, f"/api/v1/nodes/{name or layout.node_name}")
    if status != 200:
        return False
    conditions = json.loads(body).get("status", {}).get("conditions", [])
    return any(cond["type"] == "Ready" and cond["status"] == "True" for cond in conditions)


# --- commands -------------------------------------------------------------------------------------

def up(state: Path, nodes: int | None) -> None:
    started = time.monotonic()
    layout = load_layout(state, os.environ.get("NODE") or None, nodes)
    other_node = REAL_NODE if layout.node == "agent" else ["node-agent"]
    if any(pid_alive(layout.pids / f"{name}.pid") for name in other_node):
        raise SystemExit(f"the cluster in {state} runs the other kind of node: `cluster.py down` first")
    for binary in [layout.etcd_bin / "etcd", layout.k8s_bin / "kube-apiserver"]:
        if not binary.exists():
            raise SystemExit(f"{binary} is missing: run e2e/local/build.sh first (make cluster-up does)")
    for directory in (layout.logs, layout.pids, layout.state / "kubeconfigs"):
        directory.mkdir(parents=True, exist_ok=True)
    repick_taken_ports(layout)
    (state / "cluster.json").write_text(layout.to_json())
    pki.ensure_all(layout.pki, c.CLIENTS)
    if layout.node == "real":
        import real_node
        real_node.ensure_certs(layout, layout.host_ip)
    for identity in c.CLIENTS:
        path = layout.kubeconfig_for(identity)
        path.write_text(json.dumps(c.kubeconfig(layout, identity), indent=2))
        path.chmod(0o600)

    start(layout, "etcd", c.etcd_command(layout))
    start(layout, "kube-apiserver", c.apiserver_command(layout))
    wait_for("the API server to be ready", lambda: api_get(layout, "/readyz")[0] == 200, 120,
             layout, "kube-apiserver")
    start(layout, "kube-controller-manager", c.controller_manager_command(layout))
    start(layout, "kube-scheduler", c.scheduler_command(layout))
    start_minio(layout)
    if layout.node == "real":
        import network_policy
        import real_node
        real_node.start(layout, start, wait_for, free_port)
        network_policy.start(layout, start, wait_for)
        node_process = "kubelet"
    else:
        agent_env = dict(os.environ, PYTHONPATH=str(HERE), **connector_jars_env())
        start(layout, "node-agent", c.node_agent_command(layout), env=agent_env, cwd=HERE)
        node_process = "node-agent"
    wait_for(f"node {layout.node_name} to be Ready", lambda: node_ready(layout), 60, layout, node_process)
    if layout.node == "real":
        import extra_node
        extra_node.up(layout, start, stop, wait_for, free_port, pid_alive, node_ready)
    wait_for("the default service account", lambda: api_get(
        layout, "/api/v1/namespaces/default/serviceaccounts/default")[0] == 200, 60,
        layout, "kube-controller-manager")
    provision_example_storage(layout)
    if os.environ.get("KAFKA") == "1":
        start_kafka(layout)
    log.info("cluster up", extra={"seconds": round(time.monotonic() - started, 1),
                                  "server": layout.server_url})
    print(f"export KUBECONFIG={layout.admin_kubeconfig}")


def connector_jars_env() -> dict[str, str]:
    """SPARKPOINT_SPARK_JARS_DIR for the node agent, which hands it to its pods: the runtime image
    sets it (Spark's Kafka connector, /opt/sparkpoint/jars), and agent pods run the virtualenv in the
    image's place. Without the cached jars (no network) pods just lack the connector."""
    from harness.kafka_server import jars_dir

    try:
        return {"SPARKPOINT_SPARK_JARS_DIR": str(jars_dir("spark-kafka"))}
    except subprocess.CalledProcessError as error:
        log.warning("no Kafka connector jars for pods", extra={"error": (error.stderr or "")[-300:]})
        return {}


def start_kafka(layout: c.Layout) -> str:
    """The Kafka broker beside MinIO (kafka_broker.py), reachable where pods reach MinIO."""
    import kafka_broker

    return kafka_broker.start(layout, start, wait_for, lambda name: component_running(layout, name), port_is_free)


def provision_example_storage(layout: c.Layout) -> None:
    """The bucket and the storage Secret that examples/streamingjob.yaml uses (see provision.py)."""
    import provision

    minio = json.loads((layout.state / "minio.json").read_text())
    provision.provision(provision.admin_api(layout.server_url, layout.pki), minio)


def start_minio(layout: c.Layout) -> None:
    import minio_component

    minio_component.start(layout, start, wait_for, free_port)


def down(state: Path, purge: bool) -> None:
    layout = load_layout(state)
    if layout.pids.exists():
        if layout.node == "real":
            import extra_node
            import network_policy
            import real_node
            extra_node.down(layout, stop, pid_alive)
            network_policy.stop(layout, stop)
            real_node.stop(layout, stop)
        else:
            stop(layout, "node-agent", grace=60)
            kill_leftover_pod_processes(layout)
        stop(layout, "kafka", grace=15)
        for name in reversed(START_ORDER[:-1]):
            stop(layout, name, grace=15)
    if purge:
        if layout.node == "real":
            import real_node
            real_node.unmount_under(state)
        subprocess.run(["rm", "-rf", str(state)], check=True)
        log.info("state removed", extra={"state": str(state)})
    log.info("cluster down")


def status(state: Path) -> int:
    layout = load_layout(state)
    running = {name: pid_alive(layout.pids / f"{name}.pid") for name in components_of(layout)}
    optional = {"kafka": pid_alive(layout.pids / "kafka.pid")}  # KAFKA=1 or `cluster.py kafka` only
    extra = {}
    if layout.node == "real":
        import extra_node
        import extra_node_config
        for node in extra_node_config.extra_nodes(layout.nodes):
            extra[node.name] = extra_node.status(layout, node, pid_alive)
            running.update(extra[node.name]["components"])
    print(json.dumps({"components": {**running, **optional}, "nodes": [layout.node_name, *extra],
                      "extra_nodes": extra, "server": layout.server_url,
                      "kubeconfig": str(layout.admin_kubeconfig)}, indent=2))
    return 0 if all(running.values()) else 1


def import_image(layout: c.Layout, image: str | None) -> None:
    if not image:
        raise SystemExit("import-image needs the image's name")
    if layout.node == "real":
        import real_node
        real_node.import_image(layout, image)
    elif not fnmatch.fnmatch(image.removeprefix("localhost/"), "sparkpoint/*:dev"):
        raise SystemExit(f"the node agent runs only sparkpoint/*:dev images (image mode), not {image}")
    log.info("image available to the cluster's pods", extra={"image": image, "node": layout.node})


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("command", choices=["up", "down", "status", "stop-minio", "kafka", "import-image"],
                        help="stop-minio: stop only MinIO, as a storage outage (`up` starts it again); "
                             "kafka: start the Kafka broker of a running cluster (KAFKA=1 up does too), "
                             "print its bootstrap address; import-image IMAGE: a buildah image into the "
                             "real node's containerd (the node agent runs sparkpoint/*:dev from buildah's store)")
    parser.add_argument("image", nargs="?", help="import-image: the buildah image, e.g. sparkpoint/own-job:dev")
    parser.add_argument("--state", type=Path, default=default_state_dir())
    parser.add_argument("--purge", action="store_true", help="down: also delete the state dir")
    parser.add_argument("--nodes", type=int, default=int(os.environ.get("NODES") or 0) or None,
                        help="up: how many real nodes (default: as last brought up, 1 for a new state "
                             "dir; env NODES); node 2 runs in a network namespace of its own (extra_node.py)")
    args = parser.parse_args()
    setup_logging()
    state = args.state.resolve()
    if args.command == "up":
        up(state, args.nodes)
    elif args.command == "down":
        down(state, args.purge)
    elif args.command == "kafka":
        print(start_kafka(load_layout(state)))
    elif args.command == "import-image":
        import_image(load_layout(state), args.image)
    elif args.command == "stop-minio":
        stop(load_layout(state), "minio", grace=15)
        log.info("minio stopped (`up` starts it again)")
    else:
        return status(state)
    return 0


if __name__ == "__main__":
    sys.exit(main())
