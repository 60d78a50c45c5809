#!/usr/bin/env bash
# Builds the pinned helm CLI once per machine into a versioned cache dir and prints its path.
# Safe to run concurrently (a background build in `make test` and a test fixture): one builds,
# the other waits on the lock and then finds the binary.
set -euo pipefail
here=$(cd "$(dirname "$0")/.." && pwd)
# shellcheck disable=SC1091
source "$here/versions.env"
cache=${SPARKPOINT_CACHE:-$HOME/.cache/sparkpoint}
dir="$cache/helm-$HELM_VERSION"
bin="$dir/bin/helm"
mkdir -p "$dir"
exec 9>"$dir/.lock"
flock 9
if [ ! -x "$bin" ]; then
  mkdir -p "$dir/bin"
  echo "building helm $HELM_VERSION into $dir (first run on this machine only)" >&2
  start=$(date +%s)
  # Build to a temp name and rename, so an interrupted build never leaves a half-written binary.
  (cd "$(mktemp -d)" && GOBIN="$dir/bin.tmp" GOFLAGS="-mod=mod -buildvcs=false" CGO_ENABLED=0 \
    nice go install -trimpath -ldflags "-s -w -X helm.sh/helm/v3/internal/version.version=$HELM_VERSION" \
    "helm.sh/helm/v3/cmd/helm@$HELM_VERSION") >&2
  mv "$dir/bin.tmp/helm" "$bin" && rmdir "$dir/bin.tmp"
  echo "$(( $(date +%s) - start ))" >"$dir/build-seconds"
  echo "helm built in $(cat "$dir/build-seconds")s" >&2
fi
echo "$bin"
