#!/usr/bin/env bash
# Builds the pinned MinIO server once per machine into a versioned cache dir and prints its path.
set -euo pipefail
here=$(cd "$(dirname "$0")/.." && pwd)
# shellcheck disable=SC1091
source "$here/versions.env"
cache=${SPARKPOINT_CACHE:-$HOME/.cache/sparkpoint}
dir="$cache/minio-$MINIO_VERSION"
bin="$dir/bin/minio"
if [ ! -x "$bin" ]; then
  mkdir -p "$dir/bin"
  echo "building minio $MINIO_VERSION into $dir (first run on this machine only)" >&2
  start=$(date +%s)
  (cd "$(mktemp -d)" && GOBIN="$dir/bin" GOFLAGS=-mod=mod CGO_ENABLED=0 go install "github.com/minio/minio@$MINIO_VERSION") >&2
  echo "minio built in $(( $(date +%s) - start ))s" >&2
fi
echo "$bin"
