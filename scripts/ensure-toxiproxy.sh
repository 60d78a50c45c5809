#!/usr/bin/env bash
# Builds the pinned toxiproxy server (latency injection for the peer benchmarks) once per machine
# into a versioned cache dir and prints its path.
set -euo pipefail
here=$(cd "$(dirname "$0")/.." && pwd)
# shellcheck disable=SC1091
source "$here/versions.env"
cache=${SPARKPOINT_CACHE:-$HOME/.cache/sparkpoint}
dir="$cache/toxiproxy-$TOXIPROXY_VERSION"
bin="$dir/bin/toxiproxy-server"
if [ ! -x "$bin" ]; then
  mkdir -p "$dir/bin"
  echo "building toxiproxy $TOXIPROXY_VERSION into $dir (first run on this machine only)" >&2
  # Since v2.6 the server's package is cmd/server (was cmd/toxiproxy-server); go install names it `server`.
  (cd "$(mktemp -d)" && GOBIN="$dir/bin" GOFLAGS=-mod=mod CGO_ENABLED=0 \
    go install "github.com/Shopify/toxiproxy/v2/cmd/server@$TOXIPROXY_VERSION") >&2
  mv "$dir/bin/server" "$bin"
fi
echo "$bin"
