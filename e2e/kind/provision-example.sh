#!/usr/bin/env bash
# What examples/streamingjob.yaml needs, as `make cluster-up` provisions it on the local cluster:
# the Secret sparkpoint-storage in the default namespace (MinIO's credentials, from the Secret
# minio-credentials in sparkpoint-e2e-minio, and its endpoint) and the bucket `sparkpoint`, made
# by a pod of the project image. Idempotent. Credentials go through a 0600 file, never a command
# line or the output.   env: KUBECONFIG, IMAGE (sparkpoint:e2e),
#   MINIO_ENDPOINT (http://minio.sparkpoint-e2e-minio:9000, the in-cluster Service)
set -euo pipefail
image=${IMAGE:-sparkpoint:e2e}
endpoint=${MINIO_ENDPOINT:-http://minio.sparkpoint-e2e-minio:9000}
pod=sparkpoint-make-bucket

envfile=$(umask 077 && mktemp)
trap 'rm -f "$envfile"' EXIT
field() { kubectl -n sparkpoint-e2e-minio get secret minio-credentials -o "jsonpath={.data.$1}" | base64 -d; }
access=$(field access_key)
secret=$(field secret_key)
printf 'AWS_ACCESS_KEY_ID=%s\nAWS_SECRET_ACCESS_KEY=%s\nSPARKPOINT_S3_ENDPOINT=%s\n' \
  "$access" "$secret" "$endpoint" >"$envfile"
kubectl -n default create secret generic sparkpoint-storage --from-env-file="$envfile" \
  --dry-run=client -o yaml | kubectl apply -f - >/dev/null

kubectl -n default delete pod "$pod" --ignore-not-found --wait=true >/dev/null
kubectl -n default apply -f - >/dev/null <<YAML
apiVersion: v1
kind: Pod
metadata: {name: $pod}
spec:
  restartPolicy: Never
  containers:
    - name: main
      image: $image
      imagePullPolicy: IfNotPresent
      envFrom: [{secretRef: {name: sparkpoint-storage}}]
      command: [python, -c, "import os; from sparkpoint.runtime.store.s3 import S3Store; e = os.environ; S3Store(e['SPARKPOINT_S3_ENDPOINT'], 'sparkpoint', '', e['AWS_ACCESS_KEY_ID'], e['AWS_SECRET_ACCESS_KEY']).create_bucket(); print('bucket sparkpoint ready')"]
YAML
if ! kubectl -n default wait "pod/$pod" --for=jsonpath='{.status.phase}'=Succeeded --timeout=180s >/dev/null; then
  kubectl -n default logs "$pod" >&2 || true
  echo "provision-example.sh: could not create the bucket" >&2
  exit 1
fi
kubectl -n default logs "$pod"
kubectl -n default delete pod "$pod" --wait=false >/dev/null
echo "secret default/sparkpoint-storage and bucket sparkpoint ready"
