#!/usr/bin/env bash
# `make own-job-image`: builds a job's image FROM the runtime image with buildah, as users build
# theirs with docker (README.md, "Your own job on a cluster"; examples/own-job/Dockerfile).
#   OWN_JOB_DIR    the build context with the Dockerfile (default examples/own-job)
#   OWN_JOB_IMAGE  the image's name (default sparkpoint/own-job:dev, which the local cluster runs)
#   RUNTIME_IMAGE  the image it builds FROM (default sparkpoint/runtime:<pyproject version>, which
#                  `make image` tags); it must be in buildah's store: nothing is pulled.
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/ensure-buildah.sh
version=$(sed -n 's/^version = "\(.*\)"$/\1/p' pyproject.toml)
dir=${OWN_JOB_DIR:-examples/own-job}
image=${OWN_JOB_IMAGE:-sparkpoint/own-job:dev}
runtime=${RUNTIME_IMAGE:-sparkpoint/runtime:$version}
if ! buildah inspect --type image "$runtime" >/dev/null 2>&1; then
  echo "$runtime is not in buildah's store: run \`make image\` (or pull it from your registry)" >&2
  exit 1
fi
# The host's CA bundle (it may trust a TLS-intercepting egress proxy) for pip inside the build.
tls=()
host_ca=${PIP_CERT:-/etc/ssl/certs/ca-certificates.crt}
if [ -f "$host_ca" ]; then
  tls=(--volume "$host_ca:/run/sparkpoint-host-ca.crt:ro" --build-arg PIP_CERT=/run/sparkpoint-host-ca.crt)
fi
start=$SECONDS
buildah build --isolation=chroot --pull=never --layers --build-arg "RUNTIME_IMAGE=$runtime" \
  "${tls[@]}" --tag "$image" "$dir"
echo "built $image FROM $runtime in $((SECONDS - start)) s"
