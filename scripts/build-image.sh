#!/usr/bin/env bash
# `make image`: builds the Dockerfile's two targets with buildah (no container engine needed) on
# the local Debian base (scripts/build-base.sh) and tags them in buildah's local store as
#   sparkpoint/operator:dev   sparkpoint/runtime:dev          (a contract: tests and e2e use them)
# and also under the release names sparkpoint/operator:<version> and sparkpoint/runtime:<version>, the
# version pyproject.toml's: the names the chart's appVersion, the CRD's default spec.image and the
# examples use (one name and tag scheme, issue 40).
# SPARKPOINT_IMAGE_SUFFIX=-x tags sparkpoint/operator-x:dev and sparkpoint/runtime-x:dev instead, so a
# build of one checkout never replaces another's in the shared store (the local cluster runs any
# sparkpoint/*:dev image in image mode; the e2e suite takes the names from SPARKPOINT_E2E_*_IMAGE).
# A target is rebuilt only when its inputs changed: the base, the Dockerfile and the package
# sources, hashed into the image's io.sparkpoint.inputs label. The host's pip cache is mounted into
# the build, so the pyspark wheel is not downloaded and built a second time.
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/ensure-buildah.sh
base=$(scripts/build-base.sh)

inputs_hash() {
  {
    echo "$base"
    find Dockerfile .dockerignore pyproject.toml setup.py README.md jars.lock scripts/fetch_jars.py image examples sparkpoint runtime operator plugin crds \
      -type f -not -path '*/__pycache__/*' -not -name '*.pyc' -print0 | LC_ALL=C sort -z | xargs -0 sha256sum
  } | sha256sum | cut -c1-32
}
hash=$(inputs_hash)
revision=$(git rev-parse --short HEAD 2>/dev/null || echo unknown)
version=$(sed -n 's/^version = "\(.*\)"$/\1/p' pyproject.toml)
pip_cache="${PIP_CACHE_DIR:-$HOME/.cache/pip}"
mkdir -p "$pip_cache"
# The host's CA bundle (it may trust a TLS-intercepting egress proxy) for pip inside the build.
tls=()
host_ca=${PIP_CERT:-/etc/ssl/certs/ca-certificates.crt}
if [ -f "$host_ca" ]; then
  tls=(--volume "$host_ca:/run/sparkpoint-host-ca.crt:ro" --build-arg PIP_CERT=/run/sparkpoint-host-ca.crt)
fi

# Targets: both by default, or those named (`scripts/build-image.sh operator`).
targets=("$@")
[ ${#targets[@]} -gt 0 ] || targets=(operator runtime)
for target in "${targets[@]}"; do
  tag="sparkpoint/$target${SPARKPOINT_IMAGE_SUFFIX:-}:dev"
  have=$(buildah inspect --type image --format '{{index .OCIv1.Config.Labels "io.sparkpoint.inputs"}}' \
         "$tag" 2>/dev/null || true)
  release="sparkpoint/$target${SPARKPOINT_IMAGE_SUFFIX:-}:$version"
  if [ "$have" = "$hash" ]; then
    buildah tag "$tag" "$release"
    echo "$tag ($release) is up to date ($hash)"
    continue
  fi
  echo "building $tag (inputs $hash)"
  start=$SECONDS
  buildah build --isolation=chroot --layers --target "$target" \
    --build-arg "BASE=$base" --build-arg "REVISION=$revision" --build-arg "VERSION=$version" \
    --label "io.sparkpoint.inputs=$hash" \
    --volume "$pip_cache:/root/.cache/pip" "${tls[@]}" \
    --tag "$tag" --tag "$release" .
  echo "built $tag ($release) in $((SECONDS - start)) s"
done
