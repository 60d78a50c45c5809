#!/usr/bin/env bash
# Builds the pinned Prometheus server once per machine into a versioned cache dir and prints its path.
# Debian's prometheus package (scripts/ensure-prometheus.sh, for promtool) is built without
# kubernetes_sd_configs, which the alerting e2e test needs; this build has only that discovery
# (plus file and http, always present) and no embedded web UI: the HTTP API is all the test uses.
set -euo pipefail
here=$(cd "$(dirname "$0")/.." && pwd)
# shellcheck disable=SC1091
source "$here/versions.env"
cache=${SPARKPOINT_CACHE:-$HOME/.cache/sparkpoint}
dir="$cache/prometheus-$PROMETHEUS_MODULE_VERSION"
bin="$dir/bin/prometheus"
if [ ! -x "$bin" ]; then
  mkdir -p "$dir/bin"
  echo "building prometheus $PROMETHEUS_MODULE_VERSION into $dir (first run on this machine only)" >&2
  start=$(date +%s)
  module="github.com/prometheus/prometheus@$PROMETHEUS_MODULE_VERSION"
  src=$(cd "$(mktemp -d)" && go mod download -json "$module" | sed -n 's/.*"Dir": "\(.*\)".*/\1/p')
  # The release's go.work names folders its module zip leaves out: build the module on its own.
  (cd "$src" && GOWORK=off CGO_ENABLED=0 go build -trimpath -tags remove_all_sd,enable_kubernetes_sd \
     -o "$bin.tmp" ./cmd/prometheus) >&2
  mv "$bin.tmp" "$bin"
  echo "prometheus built in $(( $(date +%s) - start ))s" >&2
fi
echo "$bin"
