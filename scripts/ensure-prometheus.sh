#!/usr/bin/env bash
# promtool (alert rule unit tests) and the prometheus server (the alerting e2e test) come from
# Debian's `prometheus` package (bookworm: 2.42). Installs it when either binary is missing.
# The package's service is never started by us (no systemd in CI); the tests start their own server.
set -euo pipefail
if command -v promtool >/dev/null 2>&1 && command -v prometheus >/dev/null 2>&1; then exit 0; fi
echo "installing Debian's prometheus package (promtool, prometheus)" >&2
if [ "$(id -u)" = 0 ]; then SUDO=""; else SUDO="sudo"; fi
export DEBIAN_FRONTEND=noninteractive
$SUDO apt-get -o DPkg::Lock::Timeout=900 install -y -q --no-install-recommends prometheus >&2 || {
  $SUDO apt-get update -q >&2
  $SUDO apt-get -o DPkg::Lock::Timeout=900 install -y -q --no-install-recommends prometheus >&2
}
