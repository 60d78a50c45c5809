#!/usr/bin/env bash
# The real node's runtime (make cluster-up, e2e/local/real_node.py): Debian's containerd,
# runc and CNI plugins (bookworm: 1.6.20, 1.1.5, 1.1.1), plus iptables for kube-proxy and the
# bridge plugin, and ipset for kube-router's policy controller (network_policy.py). Installs whatever
# is missing, silently when nothing is. The packages' systemd service is never used: the cluster
# runs its own containerd with its own root, state and socket.
set -euo pipefail
wanted=(containerd runc containernetworking-plugins iptables ipset)
missing=()
for pkg in "${wanted[@]}"; do
  dpkg-query -W -f='${Status}' "$pkg" 2>/dev/null | grep -q 'install ok installed' || missing+=("$pkg")
done
[ ${#missing[@]} -eq 0 ] && exit 0
echo "installing Debian packages for the real node: ${missing[*]}" >&2
if [ "$(id -u)" = 0 ]; then SUDO=""; else SUDO="sudo"; fi
export DEBIAN_FRONTEND=noninteractive
install() { $SUDO apt-get -o DPkg::Lock::Timeout=900 install -y -q --no-install-recommends "${missing[@]}" >&2; }
install || { $SUDO apt-get update -q >&2; install; }
