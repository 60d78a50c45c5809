"""The real node (the default node): containerd + runc, the kubelet and kube-proxy, started and stopped by
cluster.py. The configs and command lines are in node_config.py; here is what touches the host:
packages, sysctls, certificates, image imports, and the clean-up of containers on `down`.
"""

from __future__ import annotations

import json
import logging
import os
import re
import shutil
import signal
import socket
import ssl
import subprocess
import tomllib
import urllib.error
import urllib.request
from collections.abc import Callable
from pathlib import Path

import components as c
import node_config as nc
import pki

log = logging.getLogger("cluster")
COMPONENTS = ["containerd", "kubelet", "kube-proxy"]
# buildah images (`make image`) imported into containerd, and the extra names each gets there: the
# e2e suite's default image (kube_helpers.E2E_IMAGE, operator_jobs) and the image the example names
# (examples/streamingjob.yaml, applied unchanged) are the runtime image.
IMAGES = {"sparkpoint/operator:dev": [], "sparkpoint/runtime:dev": ["sparkpoint:e2e"]}


def release_names(repo: Path) -> dict[str, list[str]]:
    """`make image` also tags each image sparkpoint/<image>:<pyproject version>, the name the chart's
    appVersion and the examples use: containerd gets it too, so `helm install` and the example need
    no name of their own."""
    version = tomllib.loads((repo / "pyproject.toml").read_text())["project"]["version"]
    return {"sparkpoint/operator:dev": [f"sparkpoint/operator:{version}"],
            "sparkpoint/runtime:dev": [f"sparkpoint/runtime:{version}"]}


def runtime_aliases(repo: Path) -> list[str]:
    example = (repo / "examples" / "streamingjob.yaml").read_text()
    return IMAGES["sparkpoint/runtime:dev"] + re.findall(r"^\s*image:\s*[\"']?([^\s\"']+)", example, re.M)


def host_ip() -> str:
    """The address of the interface with the default route: pods reach the host (API server, MinIO)
    there, and the API server reaches the kubelet there. A UDP connect sends nothing."""
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as sock:
        try:
            sock.connect(("192.0.2.254", 9))
        except OSError:
            raise SystemExit("NODE=real needs a non-loopback IPv4 address with a route") from None
        return sock.getsockname()[0]


def versions() -> dict[str, str]:
    from cluster import read_versions
    return read_versions()


def node_bin(layout: c.Layout) -> Path:
    return layout.k8s_bin.parent.parent / f"k8s-node-{versions()['KUBERNETES_VERSION']}" / "bin"


def pause_dir(layout: c.Layout) -> tuple[Path, str]:
    version = versions()["PAUSE_IMAGE_VERSION"]
    return layout.k8s_bin.parent.parent / f"pause-{version}", f"docker.io/sparkpoint/pause:{version}"


def load_ports(paths: nc.NodePaths, free_port: Callable[[], int]) -> nc.NodePorts:
    saved = paths.root / "ports.json"
    if saved.exists():
        return nc.NodePorts(**json.loads(saved.read_text()))
    ports = nc.NodePorts(*(free_port() for _ in range(4)))
    saved.write_text(nc.ports_json(ports))
    return ports


def run(argv: list[str], timeout: float = 600) -> str:
    result = subprocess.run(argv, capture_output=True, text=True, timeout=timeout)
    if result.returncode != 0:
        raise SystemExit(f"{' '.join(argv[:4])} ... failed ({result.returncode}): {result.stderr.strip()[-2000:]}")
    return result.stdout


# --- host and certificates ------------------------------------------------------------------------

def prepare_host() -> None:
    """What the bridge and kube-proxy need from the kernel: bridged traffic through iptables (Services
    between pods on one bridge) and forwarding. Host-wide; both are the usual settings of a node."""
    if not Path("/proc/sys/net/bridge").exists() and shutil.which("modprobe"):
        subprocess.run(["modprobe", "br_netfilter"], capture_output=True)
    for key in ("net.ipv4.ip_forward", "net.bridge.bridge-nf-call-iptables"):
        Path("/proc/sys", *key.split(".")).write_text("1\n")


def _cert_has_ip(crt: Path, ip: str) -> bool:
    out = subprocess.run(["openssl", "x509", "-noout", "-ext", "subjectAltName", "-in", str(crt)],
                         capture_output=True, text=True).stdout
    return f"IP Address:{ip}" in out


def ensure_certs(layout: c.Layout, ip: str) -> None:
    """The kubelet's serving certificate for the node address, kube-proxy's client certificate, and
    the API server's certificate valid for the node address too (pods reach it there through the
    `kubernetes` Service). A certificate made before without that address is made again (same CA)."""
    for stem in ("apiserver", "kubelet-serving"):
        crt = layout.pki / f"{stem}.crt"
        if crt.exists() and not _cert_has_ip(crt, ip):
            crt.unlink()
    pki.ensure_serving_cert(layout.pki, "apiserver", "kube-apiserver", extra_ips=(ip,))
    pki.ensure_serving_cert(layout.pki, "kubelet-serving", f"system:node:{layout.node_name}",
                            extra_ips=(ip,), extra_dns=(layout.node_name,))
    pki.ensure_client_cert(layout.pki, nc.KUBE_PROXY)
    path = layout.kubeconfig_for(nc.KUBE_PROXY)
    path.write_text(json.dumps(c.kubeconfig(layout, nc.KUBE_PROXY), indent=2))
    path.chmod(0o600)


def write_configs(layout: c.Layout, paths: nc.NodePaths, ports: nc.NodePorts) -> None:
    for directory in (paths.containerd_root, paths.containerd_state, paths.cni_conf_dir, paths.kubelet_dir,
                      paths.pod_logs, paths.imported):
        directory.mkdir(parents=True, exist_ok=True)
    write_if_changed(paths.containerd_config, nc.containerd_config(paths, pause_dir(layout)[1]))
    write_if_changed(paths.cni_conf_dir / "10-sparkpoint.conflist", json.dumps(nc.cni_conflist(paths), indent=2))
    # JSON is YAML: the kubelet and kube-proxy read these as YAML.
    write_if_changed(paths.kubelet_config, json.dumps(nc.kubelet_config(layout, paths, ports), indent=2))
    write_if_changed(paths.proxy_config, json.dumps(nc.proxy_config(layout, ports), indent=2))


def write_if_changed(path: Path, text: str) -> None:
    """kube-proxy exits when its config file is written ("content of the proxy server's configuration
    file was updated"), so an idempotent `up` must leave unchanged files alone."""
    if not path.exists() or path.read_text() != text:
        path.write_text(text)


def grant_apiserver_kubelet_access(layout: c.Layout) -> None:
    """The kubelet authorizes every request (logs, exec) through the API server: let the API server's
    own kubelet-client identity in, as kubeadm does, with the built-in role system:kubelet-api-admin."""
    body = {"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRoleBinding",
            "metadata": {"name": "sparkpoint:apiserver-kubelet-client"},
            "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": "system:kubelet-api-admin"},
            "subjects": [{"apiGroup": "rbac.authorization.k8s.io", "kind": "User", "name": c.APISERVER_KUBELET_CLIENT.user}]}
    api_create(layout, "/apis/rbac.authorization.k8s.io/v1/clusterrolebindings", body)


def api_create(layout: c.Layout, path: str, body: dict) -> None:
    """POST `body` to the collection `path` as the cluster admin; an object already there is replaced
    (an unconditional PUT, which RBAC objects allow), so an edited rule applies at the next `up`."""
    context = ssl.create_default_context(cafile=str(layout.pki / "ca.crt"))
    context.load_cert_chain(str(layout.pki / "admin.crt"), str(layout.pki / "admin.key"))

    def send(method: str, url: str) -> None:
        request = urllib.request.Request(url, data=json.dumps(body).encode(), method=method,
                                         headers={"Content-Type": "application/json"})
        urllib.request.urlopen(request, context=context, timeout=10).close()
    try:
        send("POST", layout.server_url + path)
    except urllib.error.HTTPError as error:
        if error.code != 409:
            raise
        send("PUT", f"{layout.server_url}{path}/{body['metadata']['name']}")


# --- images ---------------------------------------------------------------------------------------

def _import_archive(paths: nc.NodePaths, archive: Path) -> None:
    run(nc.ctr(paths, "images", "import", str(archive)))


def import_images(layout: c.Layout, paths: nc.NodePaths) -> None:
    """The pause image and the project's buildah images (`make image`), each imported only when it
    changed since the last import (the buildah image id is remembered)."""
    directory, pause_image = pause_dir(layout)
    marker = paths.imported / "pause"
    if not marker.exists() or marker.read_text() != pause_image:
        _import_archive(paths, directory / "pause.tar")
        marker.write_text(pause_image)
    for name in IMAGES:
        aliases = runtime_aliases(layout.repo) if name == "sparkpoint/runtime:dev" else IMAGES[name]
        aliases = [*aliases, *(a for a in release_names(layout.repo)[name] if a not in aliases)]
        found = subprocess.run(["buildah", "inspect", "--type", "image", "--format", "{{.FromImageID}}",
                                f"localhost/{name}"], capture_output=True, text=True)
        if found.returncode != 0:
            log.warning("image not built (make image): pods naming it will not start", extra={"image": name})
            continue
        _import_buildah_image(paths, name, found.stdout.strip())
        for alias in aliases:  # every time: cheap, and an alias added since the import applies at once
            run(nc.ctr(paths, "images", "tag", "--force", f"docker.io/{name}", qualified(alias)))


def _import_buildah_image(paths: nc.NodePaths, name: str, image_id: str) -> None:
    """buildah's `name` into containerd as docker.io/<name>, unless that image id is there already."""
    marker = paths.imported / name.replace("/", "_")
    if not marker.exists() or marker.read_text() != image_id:
        archive = paths.root / "import.tar"
        archive.unlink(missing_ok=True)
        log.info("importing image into containerd", extra={"image": name, "id": image_id[:12]})
        run(["buildah", "push", "--quiet", f"localhost/{name}", f"docker-archive:{archive}:docker.io/{name}"])
        try:
            _import_archive(paths, archive)
        finally:
            archive.unlink(missing_ok=True)
        marker.write_text(image_id)


def import_image(layout: c.Layout, name: str) -> None:
    """A user's buildah image (`make own-job-image`) into the running node's containerd, as `name`:
    the recipe of README.md's "Your own job on a cluster" on this cluster."""
    found = subprocess.run(["buildah", "inspect", "--type", "image", "--format", "{{.FromImageID}}",
                            f"localhost/{name}"], capture_output=True, text=True)
    if found.returncode != 0:
        raise SystemExit(f"{name} is not in buildah's store (build it first: make own-job-image)")
    paths = nc.node_paths(layout)
    paths.imported.mkdir(parents=True, exist_ok=True)
    _import_buildah_image(paths, name, found.stdout.strip())
    if qualified(name) != f"docker.io/{name}":  # a name with a registry host: containerd's CRI looks that up
        run(nc.ctr(paths, "images", "tag", "--force", f"docker.io/{name}", qualified(name)))


def qualified(image: str) -> str:
    """The name containerd's CRI looks an image up by: docker.io/library/x:t for x:t, as Docker does."""
    first, _, rest = image.partition("/")
    if rest and ("." in first or ":" in first or first == "localhost"):
        return image
    return f"docker.io/{image}" if rest else f"docker.io/library/{image}"


# --- start and stop -------------------------------------------------------------------------------

StartFn = Callable[..., None]
WaitFn = Callable[..., None]


def start(layout: c.Layout, start_component: StartFn, wait_for: WaitFn, free_port: Callable[[], int]) -> None:
    """containerd, the images, the kubelet, kube-proxy. The caller waits for the Node to be Ready."""
    if os.geteuid() != 0:
        raise SystemExit("the real node (the default node) needs root: containerd, the kubelet and kube-proxy "
                         "set sysctls, iptables chains and a bridge for the whole host. Run as root, or "
                         "`NODE=agent make cluster-up` for the node agent (pods as host processes)")
    binaries = node_bin(layout)
    if not (binaries / "kubelet").exists():
        raise SystemExit(f"{binaries}/kubelet is missing: run e2e/local/build.sh first (make cluster-up does)")
    repo = layout.repo
    run([str(repo / "scripts" / "ensure-node-packages.sh")], timeout=1800)
    paths = nc.node_paths(layout)
    paths.root.mkdir(parents=True, exist_ok=True)
    ports = load_ports(paths, free_port)
    prepare_host()
    grant_apiserver_kubelet_access(layout)
    write_configs(layout, paths, ports)
    start_component(layout, "containerd", nc.containerd_command(paths))
    wait_for("containerd to answer", lambda: subprocess.run(
        nc.ctr(paths, "version"), capture_output=True).returncode == 0, 60, layout, "containerd")
    import_images(layout, paths)
    start_component(layout, "kubelet", nc.kubelet_command(layout, paths, binaries, layout.host_ip))
    start_component(layout, "kube-proxy", nc.proxy_command(paths, binaries))
    # The Node's Ready condition outlives a restarted kubelet by the lease grace period: wait for the
    # kubelet itself, so that `up` returns with a node that runs pods.
    wait_for("the kubelet's healthz", lambda: _healthy(f"http://127.0.0.1:{ports.kubelet_healthz}/healthz"),
             60, layout, "kubelet")


def _healthy(url: str) -> bool:
    try:
        with urllib.request.urlopen(url, timeout=2) as response:
            return response.status == 200
    except OSError:
        return False


def stop(layout: c.Layout, stop_component: Callable[..., None]) -> None:
    """kube-proxy and the kubelet, then every container (the kubelet does not stop them when it exits),
    containerd and any shim left behind. Pods stay in the API; the next `up` runs them again."""
    paths = nc.node_paths(layout)
    stop_component(layout, "kube-proxy", grace=15)
    stop_component(layout, "kubelet", grace=30)
    kill_containers(paths)
    stop_component(layout, "containerd", grace=30)
    kill_shims(paths)
    if (node_bin(layout) / "kube-proxy").exists() and paths.proxy_config.exists():
        # Removes kube-proxy's iptables chains, which would otherwise outlive the cluster.
        subprocess.run([*nc.proxy_command(paths, node_bin(layout)), "--cleanup"], capture_output=True, timeout=60)


def containerd_answers(paths: nc.NodePaths) -> bool:
    return paths.socket.exists() and subprocess.run(nc.ctr(paths, "version"), capture_output=True).returncode == 0


def kill_containers(paths: nc.NodePaths) -> None:
    """Every container of the node's containerd, killed and deleted (the kubelet leaves them running)."""
    if not containerd_answers(paths):
        return
    tasks = subprocess.run(nc.ctr(paths, "tasks", "ls", "-q"), capture_output=True, text=True).stdout.split()
    for task in tasks:
        subprocess.run(nc.ctr(paths, "tasks", "kill", "--all", "--signal", "SIGKILL", task), capture_output=True)
    for task in tasks:
        subprocess.run(nc.ctr(paths, "tasks", "delete", "--force", task), capture_output=True, timeout=60)


def kill_shims(paths: nc.NodePaths) -> None:
    """containerd-shim-runc-v2 processes started by our containerd (their command line names our socket)."""
    needle = str(paths.socket).encode()
    for proc in Path("/proc").iterdir():
        if not proc.name.isdigit():
            continue
        try:
            cmdline = (proc / "cmdline").read_bytes()
        except OSError:
            continue
        if b"containerd-shim" in cmdline and needle in cmdline:
            try:
                os.kill(int(proc.name), signal.SIGKILL)
                log.warning("killed leftover shim", extra={"pid": int(proc.name)})
            except ProcessLookupError:
                pass


def unmount_under(root: Path) -> None:
    """Before the state dir is deleted: no overlay or netns mount of ours may stay mounted inside it."""
    prefix = str(root.resolve()) + "/"
    mounts = [line.split()[1] for line in Path("/proc/self/mounts").read_text().splitlines()]
    for mount in sorted((m for m in mounts if m.startswith(prefix)), key=len, reverse=True):
        subprocess.run(["umount", "-l", mount], capture_output=True)
