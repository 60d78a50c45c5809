#!/usr/bin/env bash
# Builds etcd, the Kubernetes control plane (kube-apiserver, kube-controller-manager,
# kube-scheduler) and the real node's binaries (kubelet, kube-proxy, the pause image) at the
# versions pinned in versions.env, from the Go module proxy, into
#   ${SPARKPOINT_CACHE:-~/.cache/sparkpoint}/etcd-<version>/bin
#   ${SPARKPOINT_CACHE:-~/.cache/sparkpoint}/k8s-<version>/bin
#   ${SPARKPOINT_CACHE:-~/.cache/sparkpoint}/k8s-node-<version>/bin, pause-<version>/,
#   kube-router-<version>/bin (the real node's NetworkPolicy engine)
# Each is skipped when already built (a .complete marker is written last). Prints the built
# dirs on stdout; progress and timings go to stderr.
#
# How: a wrapper Go module of ours (gowrappers/) requires the upstream module at the pinned
# release. Upstream go.mod files replace their sibling/staging modules with relative paths
# (./staging/src/k8s.io/api, ../api) that do not exist in a downloaded module, so we copy each
# such replace line and point it at the published version of that module instead.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
repo=$(cd "$here/../.." && pwd)
# shellcheck disable=SC1091
source "$repo/versions.env"
cache=${SPARKPOINT_CACHE:-$HOME/.cache/sparkpoint}
# Fully qualified: containerd's CRI normalizes image names to docker.io/..., and must find it.
PAUSE_IMAGE=docker.io/sparkpoint/pause:$PAUSE_IMAGE_VERSION
export GOFLAGS="${GOFLAGS:--buildvcs=false} -p=${BUILD_PARALLELISM:-2}"
export CGO_ENABLED=0

log() { echo "[build.sh $(date -u +%H:%M:%S)] $*" >&2; }

# upstream_gomod DIR MODULE VERSION -> path of the downloaded go.mod (DIR has no go.mod yet)
upstream_gomod() {
  (cd "$1" && go mod download -json "$2@$3") | sed -n 's/.*"GoMod": "\(.*\)".*/\1/p'
}

# replace_lines GOMOD STAGING_VERSION: every relative replace of GOMOD rewritten to
# "path => path version", where version is the one GOMOD requires, or STAGING_VERSION when
# it requires the v0.0.0 placeholder (Kubernetes staging modules).
replace_lines() {
  awk -v staging="$2" '
    /^require[ (]/ { inreq = ($0 ~ /\($/); if (!inreq && NF >= 3) req[$2] = $3; next }
    inreq && /^\)/ { inreq = 0; next }
    inreq && NF >= 2 && $1 !~ /^\/\// { req[$1] = $2; next }
    /=> *\.\.?\// {
      line = $0; sub(/^replace[ \t]+/, "", line); split(line, f, /[ \t]+/)
      path = (f[1] == "") ? f[2] : f[1]
      if (path in req) v = req[path]
      else if ($0 ~ /staging\/src\//) v = "v0.0.0"
      else next                                      # FORBIDDEN_DEPENDENCY guards etc.
      if (v == "v0.0.0") v = staging
      printf "\t%s => %s %s\n", path, path, v
    }' "$1"
}

# write_gomod DIR MODULE VERSION STAGING_VERSION
write_gomod() {
  local dir=$1 module=$2 version=$3 staging=$4 upstream godebug
  upstream=$(upstream_gomod "$dir" "$module" "$version")
  [ -f "$upstream" ] || { log "could not download $module@$version"; exit 1; }
  godebug=$(grep -E '^godebug ' "$upstream" || true)
  {
    echo "module sparkpoint.dev/e2e/wrapper"
    echo
    echo "go $(go env GOVERSION | sed 's/^go//')"
    [ -n "$godebug" ] && echo "$godebug"
    echo
    echo "require $module $version"
    echo
    echo "replace ("
    replace_lines "$upstream" "$staging"
    echo ")"
  } >"$dir/go.mod"
  (cd "$dir" && go mod tidy) >&2
}

build_etcd() {
  local out="$cache/etcd-$ETCD_VERSION" src start
  [ -f "$out/.complete" ] && { echo "$out/bin"; return; }
  log "building etcd $ETCD_VERSION into $out (once per machine)"
  start=$(date +%s)
  src="$out/src"; rm -rf "$src"; mkdir -p "$src" "$out/bin"
  cp "$here/gowrappers/etcd/main.go" "$src/"
  write_gomod "$src" go.etcd.io/etcd/server/v3 "$ETCD_VERSION" "$ETCD_VERSION"
  (cd "$src" && nice go build -trimpath -o "$out/bin/etcd" \
    -ldflags "-s -w -X go.etcd.io/etcd/api/v3/version.GitSHA=release-$ETCD_VERSION" .) >&2
  echo "$(( $(date +%s) - start ))" >"$out/build-seconds"
  touch "$out/.complete"
  log "etcd built in $(cat "$out/build-seconds")s"
  echo "$out/bin"
}

# k8s_ldflags: /version reports the pinned release; the commit is unknown for a proxy build, so say so.
k8s_ldflags() {
  local pkg=k8s.io/component-base/version major minor patch
  IFS=. read -r major minor patch <<<"${KUBERNETES_VERSION#v}"
  echo "-s -w -X $pkg.gitVersion=$KUBERNETES_VERSION -X $pkg.gitMajor=$major -X $pkg.gitMinor=$minor" \
    "-X $pkg.gitTreeState=clean -X $pkg.gitCommit=module-proxy-$KUBERNETES_VERSION" \
    "-X $pkg.buildDate=$(date -u +%Y-%m-%dT%H:%M:%SZ)"
}

# build_k8s_set NAME WRAPPERS COMPONENT...: one wrapper module (gowrappers/WRAPPERS) requiring
# k8s.io/kubernetes at the pinned version, one binary per component, into $cache/NAME-<version>/bin.
build_k8s_set() {
  local name=$1 wrappers=$2; shift 2
  local out="$cache/$name-$KUBERNETES_VERSION" src start minor patch component ldflags
  [ -f "$out/.complete" ] && { echo "$out/bin"; return; }
  IFS=. read -r _ minor patch <<<"${KUBERNETES_VERSION#v}"
  log "building Kubernetes $KUBERNETES_VERSION $* into $out (once per machine)"
  start=$(date +%s)
  src="$out/src"; rm -rf "$src"; mkdir -p "$src" "$out/bin"
  cp -r "$here/gowrappers/$wrappers/." "$src/"
  write_gomod "$src" k8s.io/kubernetes "$KUBERNETES_VERSION" "v0.$minor.$patch"
  ldflags=$(k8s_ldflags)
  for component in "$@"; do
    log "go build $component"
    (cd "$src" && nice go build -trimpath -o "$out/bin/$component" -ldflags "$ldflags" \
      "./$component") >&2
  done
  echo "$(( $(date +%s) - start ))" >"$out/build-seconds"
  touch "$out/.complete"
  log "Kubernetes $* built in $(cat "$out/build-seconds")s"
  echo "$out/bin"
}

build_kubernetes() {
  build_k8s_set k8s kubernetes kube-apiserver kube-controller-manager kube-scheduler
}

# The real node (the default node, e2e/local/real_node.py): the kubelet and kube-proxy from the same
# module and version as the control plane, and the pause image: our static gowrappers/pause alone
# in a docker archive for `ctr images import`, written with tar (no image tool needed here).
build_node() {
  build_k8s_set k8s-node kubernetes-node kubelet kube-proxy
  local out="$cache/pause-$PAUSE_IMAGE_VERSION" work layer_sha config_sha
  [ -f "$out/.complete" ] && { echo "$out"; return; }
  log "building the pause image $PAUSE_IMAGE_VERSION into $out"
  rm -rf "$out"; mkdir -p "$out/src"; work="$out/archive"; mkdir -p "$work/layer"
  cp "$here/gowrappers/pause/main.go" "$out/src/"
  printf 'module sparkpoint.dev/e2e/pause\n\ngo %s\n' "$(go env GOVERSION | sed 's/^go//')" >"$out/src/go.mod"
  (cd "$out/src" && go build -trimpath -ldflags "-s -w" -o "$work/layer/pause" .) >&2
  tar -C "$work/layer" --owner=0 --group=0 --numeric-owner --mtime=@0 -cf "$work/layer.tar" pause
  layer_sha=$(sha256sum "$work/layer.tar" | cut -d' ' -f1)
  # Two images on that layer: the pause image (uid 65535) and root-probe, the same binary with no
  # USER (root), for the e2e test that the kubelet refuses runAsNonRoot with a root image.
  local manifest="" name user configs=()
  for name in "$PAUSE_IMAGE" "docker.io/sparkpoint/root-probe:$PAUSE_IMAGE_VERSION"; do
    user=$([ "$name" = "$PAUSE_IMAGE" ] && echo ',"User":"65535:65535"' || true)
    printf '{"architecture":"amd64","os":"linux","config":{"Entrypoint":["/pause"]%s},"rootfs":{"type":"layers","diff_ids":["sha256:%s"]}}' \
      "$user" "$layer_sha" >"$work/config.json"
    config_sha=$(sha256sum "$work/config.json" | cut -d' ' -f1)
    mv "$work/config.json" "$work/$config_sha.json"; configs+=("$config_sha.json")
    manifest+="${manifest:+,}{\"Config\":\"$config_sha.json\",\"RepoTags\":[\"$name\"],\"Layers\":[\"layer.tar\"]}"
  done
  echo "[$manifest]" >"$work/manifest.json"
  tar -C "$work" --owner=0 --group=0 --numeric-owner --mtime=@0 -cf "$out/pause.tar" \
    manifest.json "${configs[@]}" layer.tar
  rm -rf "$work"
  touch "$out/.complete"
  echo "$out"
}

# The real node's NetworkPolicy engine (e2e/local/network_policy.py): kube-router, of which only the
# network-policy controller runs. Its go.mod has no relative replaces, so `go install module@version`
# builds it as released; the version variable is what `kube-router --version` prints.
build_kube_router() {
  local out="$cache/kube-router-$KUBE_ROUTER_VERSION" start
  [ -f "$out/.complete" ] && { echo "$out/bin"; return; }
  log "building kube-router $KUBE_ROUTER_VERSION into $out (once per machine)"
  start=$(date +%s)
  rm -rf "$out"; mkdir -p "$out/bin"
  (cd "$out" && GOBIN="$out/bin" nice go install -trimpath -ldflags "-s -w \
    -X github.com/cloudnativelabs/kube-router/v2/pkg/version.Version=$KUBE_ROUTER_VERSION \
    -X github.com/cloudnativelabs/kube-router/v2/pkg/version.BuildDate=$(date -u +%Y-%m-%dT%H:%M:%SZ)" \
    "github.com/cloudnativelabs/kube-router/v2/cmd/kube-router@$KUBE_ROUTER_VERSION") >&2
  echo "$(( $(date +%s) - start ))" >"$out/build-seconds"
  touch "$out/.complete"
  log "kube-router built in $(cat "$out/build-seconds")s"
  echo "$out/bin"
}

# One builder at a time per cache (a background build and `make e2e` may both call this):
# the second waits, then finds the .complete markers and skips.
mkdir -p "$cache"
exec 9>"$cache/.e2e-build.lock"
flock 9

case "${1:-all}" in
  etcd) build_etcd ;;
  kubernetes) build_kubernetes ;;
  node) build_node; build_kube_router ;;
  kube-router) build_kube_router ;;
  # kind's node image (e2e/kind/build-node-image.sh): kubeadm and kubectl run inside the node.
  kind) build_k8s_set k8s-kind kubernetes-kind kubeadm kubectl ;;
  all) build_etcd; build_kubernetes; build_node; build_kube_router ;;
  *) echo "usage: $0 [all|etcd|kubernetes|node|kube-router|kind]" >&2; exit 2 ;;
esac
