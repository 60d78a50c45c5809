#!/usr/bin/env bash
# `make release`: everything a release publishes, into dist/, with the one version pyproject.toml
# holds (the chart's version and appVersion are set from it when packaged):
#   sparkpoint-V-py3-none-any.whl, sparkpoint-V.tar.gz   the Python package (pip install, PyPI)
#   sparkpoint-V.tgz                                     the Helm chart (helm push dist/sparkpoint-V.tgz oci://REGISTRY/charts)
#   sparkpoint-crds-V.yaml                               every CRD in one file (kubectl apply --server-side -f)
#   sparkpoint-{operator,runtime}-V.oci.tar              the images as OCI archives, with IMAGES=1 (needs `make image`;
#                                                        skopeo copy oci-archive:FILE docker://REGISTRY/sparkpoint/NAME:V)
#   SHA256SUMS                                           sha256sum -c SHA256SUMS
# Usage: scripts/release.sh PYTHON HELM [OUT_DIR]
set -euo pipefail
here=$(cd "$(dirname "$0")/.." && pwd)
py=$1 helm=$2 out=${3:-$here/dist}
version=$("$py" -c 'import sys, tomllib; print(tomllib.load(open(sys.argv[1], "rb"))["project"]["version"])' "$here/pyproject.toml")
rm -rf "$out" && mkdir -p "$out"
cd "$here"

# The wheel and sdist (PEP 517, isolated: what a user's pip would build from the sdist too).
"$py" -m build --outdir "$out" . >&2

# The chart at the package's version; its crds/ are the generated CRDs (tests check the copies agree).
"$helm" package charts/sparkpoint --version "$version" --app-version "$version" --destination "$out" >&2

# The CRDs as one file, in a stable order.
for crd in crds/*.yaml; do
  printf -- '---\n# %s\n' "$(basename "$crd")"
  cat "$crd"
done > "$out/sparkpoint-crds-$version.yaml"

if [ "${IMAGES:-0}" = 1 ]; then
  for name in operator runtime; do
    buildah push --quiet "sparkpoint/$name:dev" "oci-archive:$out/sparkpoint-$name-$version.oci.tar:sparkpoint/$name:$version" >&2
  done
fi

(cd "$out" && sha256sum -- * > SHA256SUMS)
echo "release $version in $out:" >&2
ls -1 "$out" >&2
echo "$out"
