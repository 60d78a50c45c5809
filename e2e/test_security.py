"""Issue 11 on the local cluster: a namespace that enforces Pod Security "restricted" refuses a
non-compliant pod but admits the example job's pods, which run to a first checkpoint with the
operator talking to the runtime over the authenticated control API; afterwards nothing the run
left visible (CR, ConfigMaps, Events, logs, metrics, the store's keys and manifests) holds the S3
access key, the S3 secret key or the control token."""

from __future__ import annotations

import base64
import urllib.error
import urllib.request
from pathlib import Path

import pytest
import yaml
from kube_helpers import GROUP, PLURAL, VERSION, pod_logs, wait_for
from kubernetes import client
from kubernetes.client.rest import ApiException
from operator_jobs import Jobs

from sparkpoint.operator.kube import builders
from sparkpoint.runtime.store import JobRef, open_store

EXAMPLE = Path(__file__).resolve().parents[1] / "examples" / "streamingjob.yaml"
RESTRICTED = {"pod-security.kubernetes.io/enforce": "restricted",
              "pod-security.kubernetes.io/enforce-version": "latest"}


def _http(url: str, token: str | None = None) -> tuple[int, str]:
    req = urllib.request.Request(url, headers={"Authorization": f"Bearer {token}"} if token else {})
    try:
        with urllib.request.urlopen(req, timeout=10) as resp:
            return resp.status, resp.read().decode(errors="replace")
    except urllib.error.HTTPError as err:
        return err.code, err.read().decode(errors="replace")
    except OSError as err:  # not listening (see the GC note below)
        return 0, f"unreachable: {err}"


def _copy_storage_secret(core: client.CoreV1Api, namespace: str, name: str) -> dict[str, str]:
    """The Secret `make cluster-up` provisioned in `default` (e2e/local/provision.py), copied."""
    found = core.read_namespaced_secret(name, "default")
    core.create_namespaced_secret(namespace, client.V1Secret(metadata=client.V1ObjectMeta(name=name),
                                                             data=found.data))
    return {k: base64.b64decode(v).decode() for k, v in found.data.items()}


def test_restricted_namespace_refuses_a_non_compliant_pod(core, namespace):
    core.patch_namespace(namespace, {"metadata": {"labels": RESTRICTED}})
    plain = client.V1Pod(metadata=client.V1ObjectMeta(name="plain"), spec=client.V1PodSpec(
        containers=[client.V1Container(name="main", image="python:3.11", command=["true"])]))
    with pytest.raises(ApiException) as refused:
        core.create_namespaced_pod(namespace, plain, dry_run="All")
    assert refused.value.status == 403 and "violates PodSecurity" in refused.value.body
    assert "restricted" in refused.value.body and "runAsNonRoot" in refused.value.body


def test_example_job_runs_under_restricted_and_leaks_no_credential(api_client, core, namespace, operator,
                                                                   store_env):
    core.patch_namespace(namespace, {"metadata": {"labels": RESTRICTED}})
    example = yaml.safe_load(EXAMPLE.read_text())
    name = example["metadata"]["name"]
    example["metadata"]["namespace"] = namespace
    example["spec"]["spark"]["resources"] = {"cpu": "100m", "memory": "1Gi"}  # room for parallel tests
    creds = _copy_storage_secret(core, namespace, example["spec"]["checkpoint"]["storage"]["secretRef"]["name"])
    custom = client.CustomObjectsApi(api_client)
    custom.create_namespaced_custom_object(GROUP, VERSION, namespace, PLURAL, example)
    jobs = Jobs(api_client, namespace, store_env)
    st = jobs.wait_status(name, "a first checkpoint", lambda s: (s.get("latestCheckpoint") or {}).get("id"),
                          timeout=300, operator=operator)
    # The operator's trigger went through the authenticated API (its checkpoints are "api" triggered).
    wait_for("an operator trigger completed", lambda: 'sparkpoint_operator_checkpoint_triggers_total'
             '{result="completed"}' in (operator.get("/metrics") or ""), timeout=120)

    pod = core.read_namespaced_pod(st["pod"], namespace)
    # No API token in the pod: the operator's own builder says automount false; under the chart the
    # pod runs as its runtime ServiceAccount, which says it (the API server then mounts nothing).
    assert pod.spec.automount_service_account_token is False or pod.spec.service_account_name == "sparkpoint-runtime"
    assert not [v for v in pod.spec.volumes if v.projected and any(
        src.service_account_token for src in v.projected.sources or [])], "a service-account token is mounted"
    assert all(c.security_context.read_only_root_filesystem for c in pod.spec.containers)
    token_secret = core.read_namespaced_secret(f"{name}-control-token", namespace)
    assert token_secret.metadata.owner_references[0].name == name
    token = base64.b64decode(token_secret.data["token"]).decode()
    ip = pod.status.pod_ip
    control = f"http://{ip}:{builders.CONTROL_PORT}"
    assert _http(f"{control}/status")[0] == 401
    assert _http(f"{control}/status", "wrong-token")[0] == 403
    assert _http(f"{control}/status", token)[0] == 200
    assert _http(f"{control}/healthz")[0] == 200

    # --- everything visible after the run -----------------------------------------------------------
    seen: dict[str, str] = {}
    seen["cr"] = str(custom.get_namespaced_custom_object(GROUP, VERSION, namespace, PLURAL, name))
    seen["configmaps"] = str(core.list_namespaced_config_map(namespace).to_dict())
    seen["events"] = str(core.list_namespaced_event(namespace).to_dict())
    seen["pod"] = str(pod.to_dict())
    for container in ("runtime", "gc"):
        seen[f"log:{container}"] = pod_logs(core, namespace, pod.metadata.name, container)
    seen["log:operator"] = operator.log(tail=100000)
    seen["metrics:runtime"] = _http(f"http://{ip}:{builders.METRICS_PORT}/metrics")[1]
    seen["metrics:control"] = _http(f"{control}/metrics")[1]
    seen["metrics:gc"] = _http(f"http://{ip}:{builders.GC_METRICS_PORT}/metrics")[1]
    seen["metrics:operator"] = operator.get("/metrics") or ""
    # What is scanned is the real thing (a scan of empty texts would pass vacuously).
    assert "sparkpoint_" in seen["metrics:runtime"] and "sparkpoint_" in seen["metrics:operator"]
    # (The GC sidecar listens on 0.0.0.0:9090; on the local cluster all pods share the host's
    # network, so a concurrent pod's GC may hold the port: its metrics are scanned when reachable.)
    assert "attempt started" in seen["log:runtime"]
    assert "control-token" in seen["pod"] and name in seen["cr"] and "job.json" in seen["configmaps"]
    store = open_store(example["spec"]["checkpoint"]["storage"]["url"], env=creds)
    job = JobRef(namespace, name)
    keys = [info.key for info in store.list(f"{job.root}/")]
    seen["store:keys"] = "\n".join(keys)
    for key in keys:
        if not key.startswith(f"{job.root}/objects/"):  # manifests, fence, claims, outputs
            seen[f"store:{key}"] = store.get_bytes(key).decode(errors="replace")
    assert any("/checkpoints/" in k for k in keys)
    secrets = {"AWS_ACCESS_KEY_ID": creds["AWS_ACCESS_KEY_ID"],
               "AWS_SECRET_ACCESS_KEY": creds["AWS_SECRET_ACCESS_KEY"], "control token": token}
    leaks = [(what, where) for what, value in secrets.items() for where, text in seen.items() if value in text]
    assert not leaks, f"credentials visible: {leaks}"
