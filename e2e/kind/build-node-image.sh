#!/usr/bin/env bash
# kind's node image, built here with buildah from the project's debootstrap base (no registry image):
#   localhost/sparkpoint/kind-node:<KUBERNETES_VERSION>-<KIND_NODE_REVISION>     (printed on stdout)
# Debian's systemd, containerd, runc and CNI plugins; kubelet, kubeadm and kubectl of the pinned release
# (e2e/local/build.sh node + kind); kind's own node files (entrypoint, systemd units) from the kind module
# at KIND_VERSION; and the images kubeadm starts (kube-apiserver, -controller-manager, -scheduler,
# kube-proxy, etcd, pause) as docker archives under /kind/images, imported by a oneshot unit before the
# kubelet starts. kubeadm's CoreDNS addon is skipped (no CoreDNS image here: e2e/kind/kind-config-local.yaml)
# and kindnet is replaced by a static bridge conflist. Skipped when the tag exists.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
repo=$(cd "$here/../.." && pwd)
# shellcheck disable=SC1091
source "$repo/versions.env"
tag="localhost/sparkpoint/kind-node:$KUBERNETES_VERSION-$KIND_NODE_REVISION"
if buildah inspect --type image "$tag" >/dev/null 2>&1; then echo "$tag"; exit 0; fi
log() { echo "[build-node-image $(date -u +%H:%M:%S)] $*" >&2; }

base=$("$repo/scripts/build-base.sh")
k8s_bin=$("$repo/e2e/local/build.sh" kubernetes)
etcd_bin=$("$repo/e2e/local/build.sh" etcd)
node_out=$("$repo/e2e/local/build.sh" node)
node_bin=$(echo "$node_out" | grep '/k8s-node-')
pause_dir=$(echo "$node_out" | grep '/pause-')
kind_bin=$("$repo/e2e/local/build.sh" kind)
kind_files=$(cd /tmp && GOFLAGS= go mod download -json "sigs.k8s.io/kind@$KIND_VERSION" | sed -n 's/.*"Dir": "\(.*\)".*/\1/p')/images/base/files
[ -d "$kind_files" ] || { log "kind $KIND_VERSION's node files not found"; exit 1; }

work=$(mktemp -d)
containers=()
cleanup() { for c in "${containers[@]}"; do buildah rm "$c" >/dev/null 2>&1 || true; done; rm -rf "$work"; }
trap cleanup EXIT
mkdir -p "$work/images"

# image_archive NAME REF CONTAINER: commit CONTAINER and write it as a docker archive named REF.
image_archive() {
  local image="localhost/sparkpoint/kind-part-$1:$KUBERNETES_VERSION"
  buildah commit --quiet "$3" "$image" >/dev/null
  buildah push --quiet "$image" "docker-archive:$work/images/$1.tar:$2"
  buildah rmi "$image" >/dev/null
}

# Static binaries alone (CGO_ENABLED=0 builds): kubeadm's static pods name them on PATH.
for component in kube-apiserver kube-controller-manager kube-scheduler etcd; do
  log "image $component"
  c=$(buildah from scratch); containers+=("$c")
  bin=$k8s_bin; [ "$component" = etcd ] && bin=$etcd_bin
  buildah copy --quiet "$c" "$bin/$component" /usr/local/bin/ >/dev/null
  buildah config --env PATH=/usr/local/bin "$c"
  ref=registry.k8s.io/$component:$KUBERNETES_VERSION
  [ "$component" = etcd ] && ref=registry.k8s.io/etcd:$ETCD_VERSION
  image_archive "$component" "$ref" "$c"
done
log "image kube-proxy (iptables from Debian)"
c=$(buildah from "$base"); containers+=("$c")
buildah run --isolation=chroot "$c" -- sh -c 'apt-get update -q && DEBIAN_FRONTEND=noninteractive apt-get install -y -q \
  --no-install-recommends iptables conntrack ipset kmod >/dev/null && rm -rf /var/lib/apt/lists/*' >&2
buildah copy --quiet "$c" "$node_bin/kube-proxy" /usr/local/bin/ >/dev/null
image_archive kube-proxy "registry.k8s.io/kube-proxy:$KUBERNETES_VERSION" "$c"
cp "$pause_dir/pause.tar" "$work/images/pause.tar"

log "node image"
c=$(buildah from "$base"); containers+=("$c")
buildah run --isolation=chroot "$c" -- sh -c 'apt-get update -q && DEBIAN_FRONTEND=noninteractive apt-get install -y -q \
  --no-install-recommends systemd systemd-sysv dbus containerd runc containernetworking-plugins iptables conntrack \
  ipset iproute2 ethtool util-linux mount kmod procps libseccomp2 socat >/dev/null && rm -rf /var/lib/apt/lists/*' >&2
for f in usr/local/bin/entrypoint etc/systemd/system/kubelet.service etc/systemd/system/kubelet.slice \
         etc/systemd/system/undo-mount-hacks.service etc/systemd/system/kubelet.service.d/10-kubeadm.conf \
         etc/systemd/system/kubelet.service.d/11-kind.conf etc/default/kubelet etc/crictl.yaml \
         etc/sysctl.d/10-network-security.conf etc/sysctl.d/10-network-magic.conf kind/bin/undo-mount-hacks.sh \
         kind/bin/mount-product-files.sh kind/bin/create-kubelet-cgroup-v2.sh; do
  buildah copy --quiet "$c" "$kind_files/$f" "/$f" >/dev/null
done
for b in kubelet; do buildah copy --quiet "$c" "$node_bin/$b" /usr/bin/ >/dev/null; done
buildah copy --quiet "$c" "$kind_bin/kubectl" /usr/bin/ >/dev/null
buildah copy --quiet "$c" "$kind_bin/kubeadm" /usr/local/lib/kubeadm >/dev/null  # /usr/bin/kubeadm waits for the images
buildah copy --quiet "$c" "$work/images" /kind/images >/dev/null
buildah copy --quiet "$c" "$here/node-files/" / >/dev/null
echo "$KUBERNETES_VERSION" >"$work/version"; buildah copy --quiet "$c" "$work/version" /kind/version >/dev/null
buildah run --isolation=chroot "$c" -- sh -euc '
  chmod 755 /usr/local/bin/entrypoint /kind/bin/*.sh /usr/bin/kubelet /usr/bin/kubeadm /usr/local/lib/kubeadm /usr/bin/kubectl
  sed -i "s|@PAUSE_IMAGE@|docker.io/sparkpoint/pause:'"$PAUSE_IMAGE_VERSION"'|" /etc/containerd/config.toml /etc/systemd/system/sparkpoint-images.service
  find /lib/systemd/system/sysinit.target.wants/ -name "systemd-tmpfiles-setup.service" -delete
  rm -f /lib/systemd/system/multi-user.target.wants/* /etc/systemd/system/*.wants/* \
    /lib/systemd/system/local-fs.target.wants/* /lib/systemd/system/sockets.target.wants/*udev* \
    /lib/systemd/system/sockets.target.wants/*initctl* /lib/systemd/system/basic.target.wants/*
  echo "ReadKMsg=no" >> /etc/systemd/journald.conf
  systemctl enable kubelet.service containerd.service undo-mount-hacks.service sparkpoint-images.service
  systemctl mask systemd-binfmt.service
  mkdir -p /etc/kubernetes/manifests' >&2
buildah config --env container=docker --stop-signal SIGRTMIN+3 --cmd '' \
  --entrypoint '["/usr/local/bin/entrypoint", "/sbin/init"]' \
  --label "io.sparkpoint.kind-node=$KUBERNETES_VERSION-$KIND_NODE_REVISION" "$c"
buildah commit --quiet "$c" "$tag" >/dev/null
log "built $tag"
echo "$tag"
