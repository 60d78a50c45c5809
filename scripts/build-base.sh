#!/usr/bin/env bash
# The local base image for `make image`: Debian bookworm (minbase) with Debian's Python 3.11 and
# its venv module, made by debootstrap, committed into buildah's store as
#   localhost/sparkpoint/base-bookworm:$BASE_IMAGE_VERSION
# and printed on stdout. The debootstrapped rootfs is cached as a tarball under
# $SPARKPOINT_CACHE/base-$BASE_IMAGE_VERSION, so a wiped buildah store is refilled in seconds.
# Users build from the official python:3.11-slim-bookworm instead (the Dockerfile's default).
set -euo pipefail
cd "$(dirname "$0")/.."
# shellcheck disable=SC1091
source versions.env
cache="${SPARKPOINT_CACHE:-$HOME/.cache/sparkpoint}/base-$BASE_IMAGE_VERSION"
tag="localhost/sparkpoint/base-bookworm:$BASE_IMAGE_VERSION"
mirror="${DEBIAN_MIRROR:-http://deb.debian.org/debian}"

if buildah inspect --type image "$tag" >/dev/null 2>&1; then echo "$tag"; exit 0; fi
if [ ! -f "$cache/rootfs.tar" ]; then
  mkdir -p "$cache"
  work=$(mktemp -d "$cache/tmp.XXXXXX")
  trap 'rm -rf "$work"' EXIT
  echo "debootstrap bookworm into $work (a few minutes)" >&2
  debootstrap --variant=minbase --include=python3,python3-venv,ca-certificates \
    bookworm "$work/rootfs" "$mirror" >&2
  cat > "$work/rootfs/etc/apt/sources.list" <<SOURCES
deb $mirror bookworm main
deb $mirror bookworm-updates main
deb http://deb.debian.org/debian-security bookworm-security main
SOURCES
  # What a container base does not need: package lists and downloaded .debs, logs, the
  # host's resolver and hostname (the runtime provides its own).
  rm -rf "$work/rootfs/var/lib/apt/lists/"* "$work/rootfs/var/cache/apt/"*.bin \
    "$work/rootfs/var/cache/apt/archives/"*.deb "$work/rootfs/var/log/"*.log \
    "$work/rootfs/etc/resolv.conf" "$work/rootfs/etc/hostname"
  tar --numeric-owner -C "$work/rootfs" -cf "$work/rootfs.tar" .
  mv "$work/rootfs.tar" "$cache/rootfs.tar"
fi
container=$(buildah from scratch)
trap 'buildah rm "$container" >/dev/null 2>&1 || true' EXIT
buildah add --quiet "$container" "$cache/rootfs.tar" / >/dev/null
buildah config --env PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin \
  --env LANG=C.UTF-8 --cmd python3 \
  --label org.opencontainers.image.title=sparkpoint-base-bookworm \
  --label org.opencontainers.image.description="Debian bookworm minbase with Python 3.11 (debootstrap)" \
  --label org.opencontainers.image.version="$BASE_IMAGE_VERSION" "$container"
buildah commit --quiet --rm "$container" "$tag" >/dev/null
trap - EXIT
echo "$tag"
