#!/usr/bin/env bash
# buildah (builds and runs OCI images without a container engine) and debootstrap (makes the
# local base image from Debian packages). Idempotent: installs only what is missing.
set -euo pipefail
missing=()
command -v buildah >/dev/null 2>&1 || missing+=(buildah)
command -v debootstrap >/dev/null 2>&1 || missing+=(debootstrap)
[ ${#missing[@]} -eq 0 ] && exit 0
echo "installing ${missing[*]}" >&2
if [ "$(id -u)" = 0 ]; then SUDO=""; else SUDO="sudo"; fi
$SUDO apt-get -o DPkg::Lock::Timeout=900 update -q >&2
$SUDO apt-get -o DPkg::Lock::Timeout=900 install -y -q --no-install-recommends "${missing[@]}" >&2
