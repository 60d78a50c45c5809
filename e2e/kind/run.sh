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
example_image=sparkpoint:0.1.0
docker tag "$image" "$example_image"
kind load docker-image --name "$cluster" "$example_image"

kubectl apply -f "$here/minio.yaml"
if ! kubectl -n sparkpoint-e2e-minio get secret minio-credentials >/dev/null 2>&1; then
  kubectl -n sparkpoint-e2e-minio create secret generic minio-credentials \
    --from-literal=access_key="e2e-$(openssl rand -hex 4)" --from-literal=secret_key="$(openssl rand -hex 24)"
fi
kubectl -n sparkpoint-e2e-minio rollout status deployment/minio --timeout=180s

# What examples/streamingjob.yaml needs, as `make cluster-up` provisions it locally: the Secret
# sparkpoint-storage in the default namespace (MinIO's credentials and in-cluster endpoint) and the
# bucket `sparkpoint`. Idempotent; values go through a 0600 file, never a command line or the output.
envfile=$(umask 077 && mktemp)
trap 'rm -f "$kubeconfig" "$envfile"' EXIT
field() { kubectl -n sparkpoint-e2e-minio get secret minio-credentials -o "jsonpath={.data.$1}" | base64 -d; }
{ echo "AWS_ACCESS_KEY_ID=$(field access_key)"; echo "AWS_SECRET_ACCESS_KEY=$(field secret_key)"
  echo "SPARKPOINT_S3_ENDPOINT=http://minio.sparkpoint-e2e-minio:9000"; } >"$envfile"
kubectl -n default create secret generic sparkpoint-storage --from-env-file="$envfile" \
  --dry-run=client -o yaml | kubectl apply -f - >/dev/null
kubectl -n default delete pod sparkpoint-make-bucket --ignore-not-found --wait=true >/dev/null
kubectl -n default apply -f - <<YAML
apiVersion: v1
kind: Pod
metadata: {name: sparkpoint-make-bucket}
spec:
  restartPolicy: Never
  containers:
    - name: main
      image: $image
      imagePullPolicy: IfNotPresent
      envFrom: [{secretRef: {name: sparkpoint-storage}}]
      command: [python, -c, "import os; from sparkpoint.runtime.store.s3 import S3Store; S3Store(os.environ['SPARKPOINT_S3_ENDPOINT'], 'sparkpoint', '', os.environ['AWS_ACCESS_KEY_ID'], os.environ['AWS_SECRET_ACCESS_KEY']).create_bucket()"]
YAML
kubectl -n default wait pod/sparkpoint-make-bucket --for=jsonpath='{.status.phase}'=Succeeded --timeout=180s
kubectl -n default delete pod sparkpoint-make-bucket --wait=false >/dev/null

if [ -f "$repo/charts/sparkpoint/Chart.yaml" ]; then
  command -v helm >/dev/null || { echo "the chart exists but helm is not on PATH" >&2; exit 1; }
  helm upgrade --install sparkpoint "$repo/charts/sparkpoint" --namespace sparkpoint-system \
    --create-namespace --set image.repository="${image%%:*}" --set image.tag="${image##*:}" --wait
fi

SPARKPOINT_E2E_IMAGE=$image "$python" -m pytest -q -p no:cacheprovider "$repo/e2e" --ignore="$repo/e2e/local"
