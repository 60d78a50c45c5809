#!/usr/bin/env bash
# Runs the e2e suite on kind (where Docker exists; not on the development machine, which has no
# Docker). Creates the cluster unless it exists, builds the image with the top-level
# Dockerfile, loads it into kind, deploys MinIO, installs the chart when it exists, then runs the
# same cluster-agnostic pytest suite as `make e2e`.
#   env: KIND_CLUSTER (sparkpoint-e2e), IMAGE (sparkpoint:e2e), PYTHON (.venv/bin/python)
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
repo=$(cd "$here/../.." && pwd)
cluster=${KIND_CLUSTER:-sparkpoint-e2e}
image=${IMAGE:-sparkpoint:e2e}
python=${PYTHON:-$repo/.venv/bin/python}
for tool in docker kind kubectl; do
  command -v "$tool" >/dev/null || { echo "run.sh needs $tool on PATH" >&2; exit 1; }
done
[ -f "$repo/Dockerfile" ] || { echo "no Dockerfile at $repo/Dockerfile" >&2; exit 1; }

if ! kind get clusters | grep -qx "$cluster"; then
  kind create cluster --name "$cluster" --config "$here/kind-config.yaml" --wait 120s
fi
kubeconfig=$(mktemp)
trap 'rm -f "$kubeconfig"' EXIT
kind get kubeconfig --name "$cluster" >"$kubeconfig"
export KUBECONFIG=$kubeconfig

docker build -t "$image" -f "$repo/Dockerfile" "$repo"
kind load docker-image --name "$cluster" "$image"
# Also under the name examples/streamingjob.yaml uses, so the example runs unchanged.
example_image=sparkpoint/runtime:$(sed -n 's/^version = "\(.*\)"$/\1/p' "$repo/pyproject.toml")
docker tag "$image" "$example_image"
kind load docker-image --name "$cluster" "$example_image"

kubectl apply -f "$here/minio.yaml"
if ! kubectl -n sparkpoint-e2e-minio get secret minio-credentials >/dev/null 2>&1; then
  kubectl -n sparkpoint-e2e-minio create secret generic minio-credentials \
    --from-literal=access_key="e2e-$(openssl rand -hex 4)" --from-literal=secret_key="$(openssl rand -hex 24)"
fi
kubectl -n sparkpoint-e2e-minio rollout status deployment/minio --timeout=180s

IMAGE=$image "$here/provision-example.sh"  # the bucket and Secret examples/streamingjob.yaml names

# No cluster-wide operator here: each operator test starts its own, watching only its namespace
# (e2e/test_operator_run.py installs the chart that way, with scripts/ensure-helm.sh's helm).

SPARKPOINT_E2E_IMAGE=$image SPARKPOINT_E2E_OPERATOR_IMAGE=$image "$python" -m pytest -q -p no:cacheprovider "$repo/e2e" --ignore="$repo/e2e/local"
