#!/usr/bin/env bash
# kind on this machine, which has no Docker (`make e2e-kind`, e2e/kind/README.md): Debian's podman as
# kind's provider (KIND_EXPERIMENTAL_PROVIDER=podman), kind built from the Go module proxy, and the node
# image built here (build-node-image.sh). `up` creates the cluster unless it exists, loads the
# project's images, routes the host to kind's pod subnet through the node container (the suite's
# process reaches pods by IP, as on the local cluster), starts a MinIO on the host's address (pods
# reach it through the node's NAT; endpoint and credentials in .state/minio.json, mode 0600, for
# SPARKPOINT_E2E_MINIO) and provisions what examples/streamingjob.yaml names. `down` undoes all of it.
# Prints `export KUBECONFIG=<path>` last on `up`.
#   env: KIND_CLUSTER (sparkpoint-kind)
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
repo=$(cd "$here/../.." && pwd)
# shellcheck disable=SC1091
source "$repo/versions.env"
cache=${SPARKPOINT_CACHE:-$HOME/.cache/sparkpoint}
cluster=${KIND_CLUSTER:-sparkpoint-kind}
state="$repo/e2e/kind/.state"
log() { echo "[kind/local.sh $(date -u +%H:%M:%S)] $*" >&2; }
mkdir -p "$state"

kind_bin="$cache/kind-$KIND_VERSION/bin"
if [ ! -x "$kind_bin/kind" ]; then
  log "building kind $KIND_VERSION into $kind_bin (once per machine)"
  (cd /tmp && GOFLAGS=-buildvcs=false CGO_ENABLED=0 GOBIN="$kind_bin" nice go install -trimpath -ldflags "-s -w" \
    "sigs.k8s.io/kind@$KIND_VERSION") >&2
fi
kind() { "$kind_bin/kind" "$@"; }
export KIND_EXPERIMENTAL_PROVIDER=podman

# podman's defaults do not run here, each for a reason (README.md): its default ulimits (nofile and
# nproc 1048576) exceed root's hard limits, which root cannot raise without CAP_SYS_RESOURCE ("crun:
# setrlimit `RLIMIT_NOFILE`: Operation not permitted"); podman itself lowers nproc to 32768 for conmon,
# so no more than that; and crun 1.8.1 refuses this hybrid cgroup layout ("cgroups in hybrid mode not
# supported, drop all controllers from cgroupv2"), where runc works.
nproc=$(ulimit -Hu); [ "$nproc" = unlimited ] || [ "$nproc" -gt 32768 ] && nproc=32768
printf '[containers]\ndefault_ulimits = ["nofile=%s:%s", "nproc=%s:%s"]\n[engine]\nruntime = "runc"\n' \
  "$(ulimit -Hn)" "$(ulimit -Hn)" "$nproc" "$nproc" >"$state/containers.conf"
export CONTAINERS_CONF="$state/containers.conf"
command -v podman >/dev/null || { log "installing podman"; apt-get install -y -q --no-install-recommends podman >&2; }

pod_subnet=$(sed -n 's/^ *podSubnet: *//p' "$here/kind-config-local.yaml")
minio_pid="$state/pids/minio.pid"
# MinIO on the host's address (the interface with the default route); its pid where the suite's storage
# outage (e2e/test_alerting.py) finds the local cluster's, `<pid> <program>`; `local.sh minio` restarts it.
start_minio() {
  local host_ip access secret port minio
  host_ip=$(ip -4 route get 192.0.2.254 | sed -n 's/.* src \([0-9.]*\).*/\1/p')
  if [ ! -f "$state/minio.json" ]; then
    (umask 077 && printf '{"access_key": "kind-%s", "secret_key": "%s", "port": %s}\n' "$(openssl rand -hex 4)" \
      "$(openssl rand -hex 24)" "$(shuf -i 20000-40000 -n 1)" >"$state/minio.json")
  fi
  read -r access secret port < <(python3 -c 'import json, sys; m = json.load(open(sys.argv[1]))
print(m["access_key"], m["secret_key"], m["port"])' "$state/minio.json")
  python3 -c 'import json, sys; m = json.load(open(sys.argv[1])); m["endpoint"] = sys.argv[2]
open(sys.argv[1], "w").write(json.dumps(m))' "$state/minio.json" "http://$host_ip:$port"
  if ! { [ -f "$minio_pid" ] && kill -0 "$(cut -d' ' -f1 "$minio_pid")" 2>/dev/null; }; then
    mkdir -p "$state/minio-data" "$state/pids"
    minio=$("$repo/scripts/ensure-minio.sh")
    MINIO_ROOT_USER=$access MINIO_ROOT_PASSWORD=$secret MINIO_BROWSER=off setsid "$minio" \
      server --quiet --address "$host_ip:$port" "$state/minio-data" >>"$state/minio.log" 2>&1 </dev/null &
    echo "$! $minio" >"$minio_pid"
    for _ in $(seq 60); do curl -sf "http://$host_ip:$port/minio/health/live" >/dev/null && break; sleep 1; done
  fi
}

case "${1:-up}" in
  minio) start_minio; exit 0 ;;
  down)
    kind delete cluster --name "$cluster" >&2
    ip route del "$pod_subnet" 2>/dev/null || true
    if [ -f "$minio_pid" ]; then kill "$(cut -d' ' -f1 "$minio_pid")" 2>/dev/null || true; rm -f "$minio_pid"; fi
    exit 0 ;;
  up) ;;
  *) echo "usage: $0 [up|down|minio]" >&2; exit 2 ;;
esac

# kind mounts the host's /lib/modules into the node (read-only); this VM's kernel has no modules dir.
[ -d /lib/modules ] || mkdir -p /lib/modules
image=$("$here/build-node-image.sh")
if ! kind get clusters 2>/dev/null | grep -qx "$cluster"; then
  sed "s/@ETCD_VERSION@/$ETCD_VERSION/; s/^name: .*/name: $cluster/" "$here/kind-config-local.yaml" >"$state/kind-config.yaml"
  start=$SECONDS
  rm -f "$state"/loaded-*
  kind create cluster --name "$cluster" --image "$image" --config "$state/kind-config.yaml" --retain -v 1 >&2
  log "cluster created in $((SECONDS - start)) s"
fi
kind get kubeconfig --name "$cluster" >"$state/kubeconfig"
export KUBECONFIG="$state/kubeconfig"
node_ip=$(podman inspect -f '{{range .NetworkSettings.Networks}}{{.IPAddress}}{{end}}' "$cluster-control-plane")
ip route replace "$pod_subnet" via "$node_ip"

start_minio
# The bucket and Secret examples/streamingjob.yaml names, as the local cluster's `up` makes them.
(cd "$repo/e2e/local" && "$repo/.venv/bin/python" -c '
import json, sys
import provision
minio = json.load(open(sys.argv[1]))
provision.ensure_bucket(minio)
data = provision.secret_data(minio)
print("\n".join(f"{k}={v}" for k, v in data.items()))' "$state/minio.json") >"$state/example.env"
kubectl -n default create secret generic sparkpoint-storage --from-env-file="$state/example.env" --dry-run=client -o yaml \
  | kubectl apply -f - >/dev/null
rm -f "$state/example.env"
# The project's images (make image) under the names the suite and the example use, as containerd's CRI
# names them (docker.io/library/x for x).
load() {
  local id marker="$state/loaded-${2//[\/:]/_}" archive="$state/load.tar"
  id=$(buildah inspect --type image --format '{{.FromImageID}}' "localhost/$1")
  [ -f "$marker" ] && [ "$(cat "$marker")" = "$id" ] && return 0  # loaded since its last build
  buildah push --quiet "localhost/$1" "docker-archive:$archive:$2" >&2
  kind load image-archive --name "$cluster" "$archive" >&2
  rm -f "$archive"
  echo "$id" >"$marker"
}
load sparkpoint/operator:dev docker.io/sparkpoint/operator:dev
load sparkpoint/runtime:dev docker.io/sparkpoint/runtime:dev
load sparkpoint/runtime:dev docker.io/library/sparkpoint:e2e
# The release names (sparkpoint/<image>:<pyproject version>: the chart's and the example's defaults).
version=$(sed -n 's/^version = "\(.*\)"$/\1/p' "$repo/pyproject.toml")
load sparkpoint/runtime:dev "docker.io/sparkpoint/runtime:$version"
load sparkpoint/operator:dev "docker.io/sparkpoint/operator:$version"
[ -f "$state/loaded-pause" ] || { kind load image-archive --name "$cluster" "$cache/pause-$PAUSE_IMAGE_VERSION/pause.tar" >&2 \
  && touch "$state/loaded-pause"; }  # with sparkpoint/root-probe (e2e/test_real_node.py)
echo "export KUBECONFIG=$state/kubeconfig"
